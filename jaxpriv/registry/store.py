"""The registry's store: every registered notion (:data:`NOTIONS`) and relation
(:data:`REGISTRY`), :func:`register` and :func:`unregister` (a relation's bound checked, its
hints derived), and the look-ups :func:`get`, :func:`notion` and :func:`select`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxpriv.core.errors import InputError
from jaxpriv.registry.records import Notion
from jaxpriv.registry.relations import Relation, StatisticalRelation, _derive_hints

NOTIONS: dict[str, Notion] = {}
"""Every registered notion by key."""
REGISTRY: dict[str, Relation | StatisticalRelation] = {}
"""Every registered relation by id."""
CLAIMS: dict = {}
"""Every registered claim with parameters by id (:class:`jaxpriv.registry.claims.Claim`)."""
_BUILTIN: dict[str, dict] = {"notions": {}, "relations": {}, "claims": {}}
"""The catalog's own records (:func:`seal_builtins`), by name."""
OPTIONAL: dict[str, str] = {}
"""Id prefixes of relations registered only when an optional package is installed, and what to
install (named when a selection finds none of them)."""


def register(record, *, replace: bool = False, check_bound: bool = True):
    """Add a :class:`Notion`, :class:`Relation` or :class:`StatisticalRelation` (``replace=True``
    to overwrite one of the same name). A relation's notions must be registered first.

    ``check_bound``: trace the bound once (abstractly) to see that it takes ``(x, parameter)``
    and returns one number per ``x``. The built-in catalog passes ``False``: its bounds are
    checked by the test suite (tests/test_relations.py), and tracing all of them took 1.2 s of
    every ``import jaxpriv`` (every command, every audit worker). A plugin's bound is always
    checked.

    Returns the record."""
    if isinstance(record, Notion):
        if record.key in NOTIONS and not replace:
            raise InputError(f"notion {record.key!r} is already registered")
        NOTIONS[record.key] = record
        return record
    if not isinstance(record, (Relation, StatisticalRelation)):
        raise InputError(f"register() takes a Notion, Relation or StatisticalRelation, not "
                         f"{type(record).__name__}")
    if _lookup_key(record.id) in {_lookup_key(r) for r in REGISTRY} and not replace:
        raise InputError(f"relation {record.id} is already registered")
    if record.kind == "mechanism":
        for key in sorted(record.notions):
            if key not in NOTIONS:
                raise InputError(f"relation {record.id} uses unknown notion {key!r}; "
                                 f"registered: {', '.join(NOTIONS)}")
        if check_bound:
            check_bound_shape(record)
        _derive_hints(record)
    for existing in [r for r in REGISTRY if _lookup_key(r) == _lookup_key(record.id)]:
        del REGISTRY[existing]
    REGISTRY[record.id] = record
    return record


def seal_builtins() -> None:
    """Remember every record registered so far as the catalog's own (:func:`is_builtin`); the
    catalog calls it once, after registering its notions and claims."""
    _BUILTIN["notions"] = dict(NOTIONS)
    _BUILTIN["relations"] = dict(REGISTRY)
    _BUILTIN["claims"] = dict(CLAIMS)


def unregister(name: str) -> None:
    """Remove a relation (by id) or a notion (by key); no error if there is none."""
    for rid in [r for r in REGISTRY if _lookup_key(r) == _lookup_key(name)]:
        del REGISTRY[rid]
    NOTIONS.pop(name, None)



def check_bound_shape(relation: Relation) -> None:
    """A bound must take ``(x, parameter)`` and return one number per ``x``: traced once,
    abstractly (:func:`jax.eval_shape`, so registering never starts a JAX backend)."""
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    try:
        out = jax.eval_shape(lambda x, p: jnp.asarray(relation.bound(x, p)), scalar, scalar)
    except Exception as error:  # a plugin's function: any failure is the plugin's
        raise InputError(f"relation {relation.id}: bound(x, parameter) failed: "
                         f"{type(error).__name__}: {error}") from None
    if getattr(out, "shape", None) != ():
        raise InputError(f"relation {relation.id}: bound(x, parameter) must return one number "
                         f"per x (got shape {getattr(out, 'shape', None)})")


def _lookup_key(name: str) -> str:
    return name.strip().upper()


def get(relation_id: str):
    """The registered relation with this id (case-insensitive); a claim's instance at any
    setting (``D6.a3.d1e-7``, built on demand: :mod:`jaxpriv.registry.claims`); else an
    InputError naming the closest ids (or, for a claim's own id, its parameters)."""
    key = _lookup_key(str(relation_id))
    for rid, relation in REGISTRY.items():
        if _lookup_key(rid) == key:
            return relation
    found = claim_of(str(relation_id))
    if found is not None:  # a claim's instance at a setting off the audit's grid, or the claim
        claim, values = found
        if values:
            return claim.instance(**values)
        raise InputError(claim.needs(claim.parameters))
    hint = _optional_hint(str(relation_id))
    raise InputError(hint or _unknown_relation(str(relation_id)))


def claim_of(relation_id: str) -> tuple | None:
    """``(claim, values)`` for a claim's id (``{}``) or an instance id of it; ``None`` else."""
    key = str(relation_id).strip().upper()
    for claim in CLAIMS.values():
        if key == claim.id.upper():
            return claim, {}
        if key.startswith(claim.id.upper() + "."):
            values = claim.parse(str(relation_id))
            if values is not None:
                return claim, values
    return None


def _unknown_relation(relation_id: str, shown: int = 8) -> str:
    """One line for an unknown id: the registered instances of the claim it names (``D10`` →
    ``D10.e0.5, D10.e1, D10.e2``), else the closest ids — not the whole registry."""
    import difflib

    key = _lookup_key(relation_id)
    ids = list(REGISTRY)
    instances = [rid for rid in ids if _lookup_key(rid).startswith(key + ".")]

    def listed(names):
        more = f", … ({len(names)} in all; jaxpriv relations lists them)" \
            if len(names) > shown else ""
        return ", ".join(names[:shown]) + more

    if instances:
        return (f"relation {relation_id!r} is a claim registered at {len(instances)} "
                f"parameter setting{'s' if len(instances) > 1 else ''}: give one of "
                f"{listed(instances)}")
    # the claims' own ids beside the registered ones, an instance's claim in its place (a
    # mistyped claim id was answered with five of its instances)
    claims = {_lookup_key(c): c for c in CLAIMS}
    pool = list(claims) + [_lookup_key(r) for r in ids if claim_of(r) is None]
    close = difflib.get_close_matches(key, pool, n=5, cutoff=0.6)
    by_key = {**{_lookup_key(r): r for r in ids}, **claims}
    nearest = f"; did you mean {', '.join(by_key[c] for c in close)}?" if close else ""
    return (f"unknown relation {relation_id!r}{nearest} ({len(ids)} registered; jaxpriv "
            f"relations lists them)")


def notion(key: str) -> Notion:
    """The registered notion with this key, or an InputError naming the keys."""
    if key not in NOTIONS:
        raise InputError(f"unknown notion {key!r}; registered: {', '.join(NOTIONS)}")
    return NOTIONS[key]


def select(pattern: str | None) -> list[str]:
    """Relation ids matching a comma list of ids or prefixes ending in ``*`` (``'opendp.*'``;
    a prefix matches case-sensitively where it can, else in any case);
    an id registered only at parameter values (``D6`` as ``D6.a2.d1e-5``, …) selects them all;
    ``None``/``"all"``: every relation."""
    if pattern is None or pattern.strip().lower() == "all":
        return list(REGISTRY)
    chosen = []
    parts = [p.strip() for p in pattern.split(",") if p.strip()]
    if not parts:
        raise InputError("no relation ids given: give ids like R1,R5, a prefix like 'R*', or "
                         "'all'")
    for part in parts:
        if part.endswith("*"):
            # case-sensitive first ('D*' is D1–D16, not dp_accounting.*), else any case
            matched = [rid for rid in REGISTRY if rid.startswith(part[:-1])] or [
                rid for rid in REGISTRY if _lookup_key(rid).startswith(_lookup_key(part[:-1]))]
            if not matched:
                raise InputError(_optional_hint(part) or f"no relation matches {part!r}; "
                                 f"registered: {', '.join(REGISTRY)}")
            chosen += matched
        else:
            key = _lookup_key(part)
            registered = any(_lookup_key(rid) == key for rid in REGISTRY)
            claim = None if registered else claim_of(part)
            if claim is not None and not claim[1]:  # a claim's id: its instances, not every
                # id it prefixes ('prv_accountant.rdp' is not prv_accountant.RDP.compute_…)
                family = [rid for rid, relation in REGISTRY.items()
                          if getattr(relation, "claim", None) == claim[0].id]
            else:
                family = [] if registered else [
                    rid for rid in REGISTRY if _lookup_key(rid).startswith(key + ".")]
            chosen += family or [get(part).id]  # get names the extra for an optional id
    return list(dict.fromkeys(chosen))


def _optional_hint(part: str) -> str | None:
    """What to install for a selection that names an optional package's relations."""
    key = _lookup_key(part.rstrip("*"))
    for prefix, hint in OPTIONAL.items():
        if key.startswith(_lookup_key(prefix)) or _lookup_key(prefix).startswith(key + "."):
            return f"no relation matches {part!r}: {hint}"
    return None
