"""GPU readiness without a GPU (issue 35): every matrix product in the library states its
precision. XLA's default for a float32 dot on recent NVIDIA GPUs is TF32 (~3 decimal digits);
``Precision.HIGHEST`` keeps float32's 7. A CPU ignores the setting, so the test reads the
programs, not the numbers."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv import Mechanism
from jaxpriv.core import notions, retractions

ROOT = Path(__file__).resolve().parents[1] / "jaxpriv"
PRODUCT = re.compile(r"jnp\.(einsum|dot|matmul|tensordot|inner|vdot)\(|lax\.dot(_general)?\(|"
                     r"\bjnp\.\w+\([^)]*\)\s*@|\)\s*@\s*\w|\w\s@\s\w")


def _statements_with_products():
    """``(file, line, statement)`` for every JAX product in the library's source (a statement
    runs to its closing parenthesis)."""
    for path in sorted(ROOT.rglob("*.py")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            code = line.split("#", 1)[0]
            if PRODUCT.search(code) and "np.asarray" not in code:
                statement, depth, j = "", 0, i
                while j < len(lines):
                    statement += lines[j]
                    depth += lines[j].count("(") - lines[j].count(")")
                    if depth <= 0:
                        break
                    j += 1
                yield path.relative_to(ROOT.parent), i + 1, statement


def test_every_product_in_the_source_states_its_precision():
    found = list(_statements_with_products())
    assert found, "the scan finds the products it is meant to check"
    missing = [f"{path}:{line}" for path, line, statement in found
               if "precision=" not in statement]
    assert not missing, f"products without a stated precision: {missing}"


def _jaxprs_in_params(params):
    try:
        from jax.extend.core import jaxprs_in_params
    except ImportError:  # older JAX
        from jax.core import jaxprs_in_params
    return jaxprs_in_params(params)


def _dot_precisions(fn, *args):
    jaxpr = jax.make_jaxpr(fn)(*args)
    out = []

    def walk(jp):
        for eqn in jp.eqns:
            if eqn.primitive.name == "dot_general":
                out.append(eqn.params["precision"])
            for sub in _jaxprs_in_params(eqn.params):
                walk(sub)

    walk(jaxpr.jaxpr)
    return out


def test_the_float32_programs_ask_for_highest_precision():
    """The ABP kernel's inner products (n = m = 8: the einsum branch) and the MBP retraction's
    marginal, traced in float32: every dot_general carries HIGHEST."""
    a = jnp.ones((3, 8, 8), jnp.float32)
    b = jnp.ones((3, 8, 8), jnp.float32)
    found = _dot_precisions(notions._batched_inner, a, b)
    K = np.full((8, 8), 1 / 8, np.float32)
    mech = Mechanism.from_K(K, dtype=jnp.float32)
    found += _dot_precisions(lambda m: retractions.mbp_keep(m, jnp.float32(0.5)), mech)
    assert len(found) >= 2
    highest = jax.lax.Precision.HIGHEST
    assert all(p is not None and all(q == highest for q in p) for p in found), found
