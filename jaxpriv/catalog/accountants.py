"""The conversions privacy accountants ship, registered as relations whose claimed bound is the
library's own function (:mod:`jaxpriv.catalog.accountant_adapters`, one record per audited
parameter value in :mod:`jaxpriv.catalog.accountant_conversions`).

With the optional extra (``pip install "jaxpriv[accountants]"``: dp-accounting, autodp, opendp,
prv-accountant) every installed library's conversions are registered on import, one relation
per audited parameter value, with ids ``<library>.<function>[.a<α>][.d<δ>][.e<ε>]``
(``dp_accounting.compute_epsilon.a2.d1e-5``); ``--relations 'opendp.*'`` selects a library's.
Without a library its relations are absent and selecting them names the extra to install.

The bound of such a relation calls the library through :func:`jax.pure_callback` (host code,
so the sweep's throughput is the library's: from ~2 µs to ~3 ms a call), in float64 whatever the
sweep's dtype. Two readings, stated once here:

* a premise level of ``+∞`` carries no claim (the conversions are stated for finite levels;
  autodp's ``puredp_to_rdp(∞)`` returns −∞), so the bound there is ``+∞``;
* a NaN from the library (autodp's ``puredp_to_rdp(0)``) is no claim either: ``+∞``, never a
  violation. Both are listed in the README's findings.

Where the envelope of a (premise, conclusion) pair is known — the ε-LDP conversions, whose
supremum is the value at binary randomized response (:mod:`jaxpriv.catalog.dp_literature`) — the relation
carries that certificate, so a library's bound gets an exact verdict.

Examples:
  >>> from jaxpriv import registry
  >>> ids = registry.select("opendp.*") if "opendp.make_pureDP_to_zCDP" in registry.REGISTRY \\
  ...     else ["opendp.make_pureDP_to_zCDP"]
  >>> "opendp.make_pureDP_to_zCDP" in ids
  True
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv.catalog import accountant_conversions as conversions
from jaxpriv.catalog import dp_literature as dp_relations
from jaxpriv.registry import OPTIONAL, Relation, Source, register

EXTRA = 'pip install "jaxpriv[accountants]"'

ACCOUNTANT_RELATIONS: list[Relation] = []
"""The relations registered here (the installed libraries' conversions)."""


def library_bound(conversion: conversions.Conversion):
    """``bound(x, *p)`` calling the library on every premise level (float64, host side);
    ``+∞`` where ``x = +∞`` or the library returns NaN (no claim)."""
    apply = conversion.vectorized(nan_ok=True)

    def host(x):
        x = np.asarray(x, dtype=np.float64)
        finite = np.isfinite(x)
        out = np.full(x.shape, np.inf)
        if finite.any():
            out[finite] = apply(x[finite])
        return np.where(np.isnan(out), np.inf, out)

    def bound(x, *p):
        x = jnp.asarray(x)
        dtype = np.dtype(x.dtype)
        wide = dtype.itemsize == 8
        # the premise crosses to the host as its bits: JAX hands a callback its arguments
        # converted to the calling thread's default width, float32 where x64 was enabled only
        # by a context manager (the premise would be rounded before the library sees it)
        bits = jax.lax.bitcast_convert_type(x, jnp.uint32)  # (..., 2) for float64

        def on_bits(b):
            b = np.ascontiguousarray(np.asarray(b, dtype=np.uint32))
            levels = b.view(dtype).reshape(b.shape[:-1]) if wide else b.view(dtype)
            value = np.array(host(levels), dtype=dtype, order="C")  # (0-d stays 0-d)
            return (value.reshape(*value.shape, 1) if wide else value).view(np.uint32)

        out = jax.pure_callback(on_bits, jax.ShapeDtypeStruct(bits.shape, jnp.uint32), bits,
                                vmap_method="expand_dims")
        return jax.lax.bitcast_convert_type(out, dtype)

    bound.__name__ = conversion.id
    return bound


def _certificate(conversion: conversions.Conversion):
    """The known envelope of the conversion's (premise, conclusion, options), if any."""
    options = {**conversion.premise_options, **conversion.conclusion_options}
    return dp_relations.ldp_envelope(conversion.premise, conversion.conclusion, options)


def _register_all() -> None:
    for conversion in conversions.CONVERSIONS:
        OPTIONAL[conversion.library + "."] = (
            f"the {conversion.library} conversions need the optional extra: {EXTRA}")
        if not conversion.available:
            continue
        certificate = _certificate(conversion)
        ACCOUNTANT_RELATIONS.append(register(Relation(
            id=conversion.id, statement=conversion.statement,
            sources=(Source(conversion.source),), premise=conversion.premise,
            conclusion=conversion.conclusion,
            options={**conversion.premise_options, **conversion.conclusion_options},
            bound=library_bound(conversion), certificate=certificate,
            proof=dp_relations.CERTIFIED if certificate else ""), replace=True,
            check_bound=False))  # checked by tests/test_relations.py, as the other built-ins


_register_all()
