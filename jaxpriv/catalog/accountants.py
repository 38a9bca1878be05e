"""The conversions privacy accountants ship, registered as relations whose claimed bound is the
library's own function (:mod:`jaxpriv.catalog.accountant_adapters`, one record per audited
parameter value in :mod:`jaxpriv.catalog.accountant_conversions`).

With the optional extra (``pip install "jaxpriv[accountants]"``: dp-accounting, autodp, opendp,
prv-accountant) every installed library's conversions are registered on import. A function
with parameters (a Rényi order, a δ, an ε) is one **claim** (:mod:`jaxpriv.registry.claims`),
its instances at the audited values registered with ids
``<library>.<function>[.a<α>][.d<δ>][.e<ε>]`` (``dp_accounting.compute_epsilon.a2.d1e-5``):
``jaxpriv check dp_accounting.compute_epsilon FILE --alpha 3 --delta 1e-7`` takes any other
setting, and the engines compile one program per claim for all its instances, the values
passed in (a program that calls the host cannot be kept in JAX's persistent compilation
cache, so before this each of the 47 instances compiled its own, cold and warm alike).
OpenDP's zCDP profile is read at δ (the claim ``opendp.make_zCDP_to_approxDP``) and at ε (the
instances ``opendp.make_zCDP_to_approxDP.e0.5`` …, relations of their own: one id cannot name
two claims). ``--relations 'opendp.*'`` selects a library's. Without a library its relations
are absent and selecting them names the extra to install.

The bound of such a relation calls the library through :func:`jax.pure_callback` (host code,
so the sweep's throughput is the library's: from ~2 µs to ~4 ms a call), in float64, with
the premise level and the parameters in the program's dtype (float32 in a sweep's screen,
float64 in the checks that decide a verdict). Two readings, stated once here:

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

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxpriv.catalog import accountant_conversions as conversions
from jaxpriv.catalog import dp_literature as dp_relations
from jaxpriv.catalog.accountant_libraries import vectorized
from jaxpriv.registry import OPTIONAL, REGISTRY, Relation, Source, register
from jaxpriv.registry.claims import DELTA, EPSILON, ORDER, Claim, register_claim

EXTRA = 'pip install "jaxpriv[accountants]"'

ACCOUNTANT_RELATIONS: list[Relation] = []
"""The relations registered here (the installed libraries' conversions)."""


def _host(function, known: dict[str, set] | None = None, cache_size: int = 4096):
    """``host(names, rounded, x, *values) -> out``: ``function(x, **values)`` on every entry of
    the premise levels ``x`` (float64 arrays) at the parameters ``values`` (arrays of ``x``'s
    shape: a program's arguments, one setting in practice); ``+∞`` where ``x = +∞`` or the
    library returns NaN (no claim). One
    :func:`~jaxpriv.catalog.accountant_libraries.vectorized` (its value cache) per setting.

    ``rounded``: the values came through a float32 program (a sweep's screen, a search), which
    rounds a claim's parameters (δ = 1e-5 to 9.99999975e-6; a value float32 cannot hold at all
    is refused before, :func:`jaxpriv.registry.programs.check_float32`). Each is then read as
    the one value in ``known[name]`` (every setting the claim was built at) that rounds to it,
    so the library sees the setting itself."""
    per_setting: dict[tuple, Callable] = {}

    def exact(name, value, rounded):
        if not rounded or known is None:
            return float(value)
        matches = {v for v in known.get(name, ()) if np.float32(v) == np.float32(value)}
        return matches.pop() if len(matches) == 1 else float(value)

    def host(names, rounded, x, *values):
        x = np.asarray(x, dtype=np.float64)
        out = np.full(x.shape, np.inf)
        finite = np.isfinite(x)
        # (an unbatched parameter of a vmapped call comes with size-1 batch axes)
        settings = np.stack([np.broadcast_to(np.asarray(v, np.float64), x.shape)[finite]
                             for v in values], axis=-1) \
            if values else np.zeros((int(finite.sum()), 0))
        levels = x[finite]
        result = np.empty(levels.shape)
        # one setting in practice: no sort of the rows then
        single = len(levels) and bool((settings == settings[0]).all())
        groups = settings[:1] if single else np.unique(settings, axis=0)
        for setting in groups if len(levels) else ():
            at = np.all(settings == setting, axis=-1)
            key = tuple(exact(name, v, rounded) for name, v in zip(names, setting))
            apply = per_setting.get(key)
            if apply is None:
                if len(per_setting) >= 64:
                    per_setting.clear()
                apply = per_setting[key] = vectorized(function, nan_ok=True,
                                                      cache_size=cache_size,
                                                      **dict(zip(names, key)))
            result[at] = apply(levels[at])
        out[finite] = result
        return np.where(np.isnan(out), np.inf, out)

    return host


def _to_bits(x, dtype):
    """``x`` as ``dtype`` and then its bits (``uint32``; a trailing axis of 2 for float64)."""
    return jax.lax.bitcast_convert_type(jnp.asarray(x, dtype), jnp.uint32)


def _from_bits(b, dtype, wide: bool) -> np.ndarray:
    b = np.array(b, dtype=np.uint32, order="C")  # (a copy: 0-d stays 0-d)
    return b.view(dtype).reshape(b.shape[:-1]) if wide else b.view(dtype)


def library_bound(function, names: tuple[str, ...] = (), known: dict[str, set] | None = None):
    """``bound(x, *p, **values)`` calling the library's ``function(x, **values)`` on every
    premise level (float64, host side); ``+∞`` where ``x = +∞`` or the library returns NaN (no
    claim). ``names``: the parameters it takes (a claim's: traced values inside a program,
    handed to the host with the premise in its dtype — float32 in a sweep's screen, float64
    in the checks that decide; ``known``: the settings a float32 program's rounded values are
    read back to, see :func:`_host`)."""
    host = _host(function, known)

    def bound(x, *p, **values):
        missing = sorted(set(names) - set(values))
        if missing:
            raise TypeError(f"{getattr(function, '__name__', 'bound')} needs {missing}")
        x = jnp.asarray(x)
        dtype = np.dtype(x.dtype)
        wide = dtype.itemsize == 8
        # the premise crosses to the host as its bits: JAX hands a callback its arguments
        # converted to the calling thread's default width, float32 where x64 was enabled only
        # by a context manager (the premise would be rounded before the library sees it)
        # the parameters broadcast to the levels' shape here, where both have their own
        # (unbatched) shapes: a vmapped callback receives them with the batch axes in front
        args = [_to_bits(x, dtype)] + [_to_bits(jnp.broadcast_to(jnp.asarray(values[name]),
                                                                 x.shape), dtype)
                                       for name in names]

        def on_bits(*bits):
            levels = [_from_bits(b, dtype, wide) for b in bits]
            value = np.array(host(names, not wide, *levels), dtype=dtype, order="C")
            return (value.reshape(*value.shape, 1) if wide else value).view(np.uint32)

        out = jax.pure_callback(on_bits, jax.ShapeDtypeStruct(args[0].shape, jnp.uint32), *args,
                                vmap_method="expand_dims")
        return jax.lax.bitcast_convert_type(out, dtype)

    bound.__name__ = getattr(function, "__name__", "library_bound")
    return bound


_PARAMETERS = {"order": ORDER, "delta": DELTA, "epsilon": EPSILON}


def _certificate(conversion: conversions.Conversion):
    """The known envelope of the conversion's (premise, conclusion, options), if any."""
    options = {**conversion.premise_options, **conversion.conclusion_options}
    return dp_relations.ldp_envelope(conversion.premise, conversion.conclusion, options)


def _relation(conversion: conversions.Conversion, bound, rid: str | None = None) -> Relation:
    certificate = _certificate(conversion)
    return Relation(
        id=rid or conversion.id, statement=conversion.statement,
        sources=(Source(conversion.source),), premise=conversion.premise,
        conclusion=conversion.conclusion,
        options={**conversion.premise_options, **conversion.conclusion_options},
        bound=bound, certificate=certificate,
        proof=dp_relations.CERTIFIED if certificate else "")


def _claim(instances: list[conversions.Conversion]) -> Claim:
    """One library function over its audited parameter values as a claim: its instances share
    one compiled program per engine, the parameters passed in (:mod:`jaxpriv.registry.programs`);
    ``make`` builds the instance at any setting (``jaxpriv check ... --alpha 3``)."""
    first = instances[0]
    names = tuple(first.fixed)
    known: dict[str, set] = {name: {c.fixed[name] for c in instances} for name in names}
    claim_bound = library_bound(first.function, names, known)
    by_values = {tuple(c.fixed[n] for n in names): c for c in instances}

    def make(rid, **values):
        for name in names:
            known[name].add(values[name])
        key = tuple(values[n] for n in names)
        conversion = by_values.get(key) or conversions.instance(first, dict(values))
        return _relation(conversion, functools.partial(claim_bound, **values), rid)

    statement = first.template.format(order="α", delta="δ", epsilon="ε")
    return Claim(first.conversion, statement, tuple(_PARAMETERS[n] for n in names), make,
                 grid=tuple(dict(c.fixed) for c in instances), bound=claim_bound)


def _register_all() -> None:
    families: dict[tuple, list[conversions.Conversion]] = {}
    installed = {c.library for c in conversions.CONVERSIONS if c.available}
    for conversion in conversions.CONVERSIONS:
        # (only where the library is missing: with it installed, an unknown id of its is an
        # unknown id, with the closest ones; "pip install" sent the user to reinstall)
        if conversion.library not in installed:
            OPTIONAL[conversion.library + "."] = (
                f"the {conversion.library} conversions need the optional extra: {EXTRA}")
        if conversion.available:
            families.setdefault((conversion.conversion, conversion.function), []).append(
                conversion)
    claimed: set[str] = set()
    for (name, _), instances in families.items():
        if instances[0].fixed and name not in claimed:
            claimed.add(name)
            claim = register_claim(_claim(instances), replace=True, check_bound=False)
            ACCOUNTANT_RELATIONS.extend(REGISTRY[claim.instance_id(dict(c.fixed))]
                                        for c in instances)
            continue
        # a function without parameters, or a second function under a claimed name (OpenDP's
        # zCDP profile read at ε beside the one read at δ): one relation per instance
        for conversion in instances:
            bound = library_bound(conversion.function, tuple(conversion.fixed))
            ACCOUNTANT_RELATIONS.append(register(_relation(
                conversion, functools.partial(bound, **conversion.fixed)),
                replace=True, check_bound=False))  # checked by tests/test_relations.py


_register_all()
