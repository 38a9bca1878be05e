"""Input checks the engines share, each written once with its one message: a database layout
(``n = k^r`` databases of ``r`` records with ``k`` values each) and a PRNG seed. The configs'
own validation (``__post_init__``) and the factories that fill them (``make_config``) both call
these.

Examples:
  >>> from jaxpriv.engines import checks
  >>> checks.seed(3)
  >>> checks.seed(-1)
  Traceback (most recent call last):
  ...
  jaxpriv.core.errors.InputError: --seed must be an integer in [0, 4294967295], got -1
"""

from __future__ import annotations

from jaxpriv.core.errors import InputError


def database_layout(relation, k: int, r: int, n: int | None = None) -> tuple[int, int]:
    """``(k, r)`` for ``relation``: as given where it relates database-level notions (``k >= 2``
    values per record, ``r >= 1`` records; with ``n``, also ``n = k^r`` secrets), ``(0, 0)``
    where its secrets are not databases. An InputError naming ``--k`` and ``--r`` otherwise."""
    if not relation.needs_records:
        return 0, 0
    if k < 2 or r < 1:
        raise InputError(f"{relation.id} relates database-level notions: give the layout with "
                         "--k (values per record, >= 2) and --r (records, >= 1)")
    if n is not None and n != k**r:
        raise InputError(f"{relation.id} relates database-level notions: n = {n} secrets is "
                         f"not k^r = {k**r} databases (--k {k}, --r {r})")
    return k, r


SEED_LIMIT = 2**32
"""Seeds are below this: JAX's default (32-bit) PRNG key keeps a seed's low 32 bits, so seed
``2**32`` ran bit for bit as seed 0 (and ``2**63`` ended in an OverflowError)."""


def seed(value) -> None:
    """An InputError unless ``value`` is an integer in ``[0, 2^32)`` (a PRNG seed)."""
    if not 0 <= value < SEED_LIMIT or int(value) != value:
        raise InputError(f"--seed must be an integer in [0, {SEED_LIMIT - 1}], got {value}")
