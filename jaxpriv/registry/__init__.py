"""Notions and relations as data: the records every engine works from, and the one registry.

A :class:`Notion` is a record: a key, a float64 reference ``level(mechanism, **params)`` that
broadcasts over batch axes, a one-line definition with its source, its unit, the parameters it
takes (with defaults), whether it needs a records layout, and what the engines may use instead
of the reference: a float32 ``screen`` (a field of the fused kernel), a smooth ``surrogate``
for the search, a closed-form ``retract`` (premise retraction), and the ``post_processing``
flag (the level cannot increase under post-processing, which lets the search hold it at any
level by mixing with the constant mechanism).

A :class:`Relation` is a record of a claim ``premise ≤ x ∧ condition ⇒ conclusion ≤ bound(x, ε)``
carrying everything the engines need: sources, the condition, how to sample for it
(:class:`Sampling`), how to search it (:class:`SearchHints`), its certified envelope and the
link to its proof where one is known, and display hints. A :class:`StatisticalRelation` is a
claim whose subject is a setting of an estimator rather than a mechanism.

The engines (:mod:`jaxpriv.engines.sweep`, :mod:`jaxpriv.engines.search`, :mod:`jaxpriv.engines.certify`,
:mod:`jaxpriv.engines.settings`) read these records and never branch on an id or a notion name.
Built-in notions live in :mod:`jaxpriv.catalog.notions`, the relations of the three seed papers in
:mod:`jaxpriv.catalog.seed_papers` and :mod:`jaxpriv.catalog.statistical`; a user's own are added with
:func:`register`, from a plugin file (:func:`load_plugin`, ``--plugin FILE.py``) or an installed
package's entry point in the group ``jaxpriv.plugins``.

Examples:
  >>> import jax.numpy as jnp
  >>> from jaxpriv import Notion, Relation, Source, families, register
  >>> def tv_rows(mech, **params):
  ...     K = jnp.exp(mech.log_K)
  ...     return 0.5 * jnp.abs(K[..., :, None, :] - K[..., None, :, :]).sum(-1).max(axis=(-2, -1))
  >>> _ = register(Notion("tv_rows_doc", tv_rows, doc="largest TV distance between rows",
  ...                     post_processing=True), replace=True)
  >>> _ = register(Relation(id="TVDOC", statement="ε-LDP ⇒ TV ≤ tanh(ε/2)", premise="ldp",
  ...                       conclusion="tv_rows_doc", bound=lambda x, *p: jnp.tanh(x / 2),
  ...                       sources=(Source("Kairouz, Oh, Viswanath 2015"),)), replace=True)
  >>> result = get("TVDOC").check(families.randomized_response(1.0))
  >>> round(float(result.slack), 9), bool(result.violated)  # binary RR attains it
  (1.0, False)
  >>> unregister("TVDOC"); unregister("tv_rows_doc")

The package is split by job: :mod:`jaxpriv.registry.records` (constants and plain records),
:mod:`jaxpriv.registry.relations` (the claims), :mod:`jaxpriv.registry.store` (the registered
notions and relations, look-ups and selection), :mod:`jaxpriv.registry.checks` (the float64
check), :mod:`jaxpriv.registry.plugins` (plugin files and entry points) and
:mod:`jaxpriv.registry.programs` (one compiled program per claim: its parameters as arguments);
every public name is re-exported here.
"""

from jaxpriv.registry.records import (ATOL, PAPERS, REQUIRED, RESERVED_PARAMS, RTOL, UNITS,
                                      Certificate, CheckResult, Notion, Sampling, SearchHints,
                                      Source, Strategies, is_number, where_defined)
from jaxpriv.registry.relations import Relation, StatisticalRelation
from jaxpriv.registry.store import (NOTIONS, OPTIONAL, REGISTRY, get, notion, register, select,
                                    unregister)
from jaxpriv.registry.checks import bound_at, check, evaluate, level, notion_levels, slack
from jaxpriv.registry.claims import (CLAIMS, Claim, ClaimParameter, claim_of, register_claim,
                                     resolve, settings)
from jaxpriv.registry import programs
from jaxpriv.registry.plugins import (LOADED_PLUGINS, PLUGIN_GROUP, load_plugin, load_plugins,
                                      plugin_error)

__all__ = [
    "ATOL", "PAPERS", "REQUIRED", "RESERVED_PARAMS", "RTOL", "UNITS", "Certificate",
    "CheckResult", "Notion", "Sampling", "SearchHints", "Source", "Strategies", "is_number",
    "where_defined",
    "Relation", "StatisticalRelation",
    "NOTIONS", "OPTIONAL", "REGISTRY", "get", "notion", "register", "select", "unregister",
    "bound_at", "check", "evaluate", "level", "notion_levels", "slack",
    "CLAIMS", "Claim", "ClaimParameter", "claim_of", "register_claim", "resolve", "settings",
    "LOADED_PLUGINS", "PLUGIN_GROUP", "load_plugin", "load_plugins", "plugin_error",
    "programs",
]
