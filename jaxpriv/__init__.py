"""jaxpriv: exact privacy notions for finite mechanisms, and audits of the relations between them.

Notions and relations are data (:mod:`jaxpriv.registry`): the built-in ones are registered on
import (:mod:`jaxpriv.catalog`), and a researcher's own are added with :func:`register` — in a
session, or from a plugin file (``jaxpriv ... --plugin FILE.py``) or an installed package's
``jaxpriv.plugins`` entry point.

The layers, each importing only those before it: :mod:`jaxpriv.core` (mathematics) →
:mod:`jaxpriv.kernels` (batched evaluation, samplers) → :mod:`jaxpriv.registry` (records,
check, store, plugins) → :mod:`jaxpriv.catalog` (built-in notions and claims) →
:mod:`jaxpriv.engines` (sweep, search, settings, certify, run state) → :mod:`jaxpriv.audit` →
:mod:`jaxpriv.report` → :mod:`jaxpriv.cli`.

This module is the public API. The engines, the audit and the report load on first use (``import
jaxpriv`` loads the mathematics, the registry and the catalog only).

Examples:
  >>> import jaxpriv
  >>> mech = jaxpriv.families.k_randomized_response(3, 1.0)
  >>> round(float(jaxpriv.level("ldp", mech)), 6)
  1.0
  >>> first = jaxpriv.get(jaxpriv.select(None)[0])  # the first built-in relation
  >>> result = jaxpriv.check(first, mech)
  >>> bool(result.violated), bool(result.condition_holds)
  (False, True)
"""

from jaxpriv.core.version import __version__  # first: it notes when the package was imported
from jaxpriv.core import families
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism, Records
from jaxpriv.registry import (OPTIONAL, REQUIRED, Certificate, CheckResult, Notion, Relation,
                              Sampling, SearchHints, Source, StatisticalRelation, check, get,
                              level, load_plugin, notion, register, select, unregister)
from jaxpriv import catalog  # noqa: F401  (registers the built-in notions and claims)

# name -> (module, attribute): loaded on first use (PEP 562), so that `import jaxpriv` stays light
_LAZY = {
    "SweepConfig": ("jaxpriv.engines.sweep", "SweepConfig"),
    "SweepResult": ("jaxpriv.engines.sweep", "SweepResult"),
    "sweep_config": ("jaxpriv.engines.sweep", "make_config"),
    "run_sweep": ("jaxpriv.engines.sweep", "run"),
    "SearchConfig": ("jaxpriv.engines.search", "SearchConfig"),
    "SearchResult": ("jaxpriv.engines.search", "SearchResult"),
    "search_config": ("jaxpriv.engines.search", "make_config"),
    "run_search": ("jaxpriv.engines.search", "run"),
    "StatConfig": ("jaxpriv.engines.settings", "StatConfig"),
    "StatResult": ("jaxpriv.engines.settings", "StatResult"),
    "certified_envelope": ("jaxpriv.engines.certify", "envelope"),
    "check_witness": ("jaxpriv.engines.certify", "check_witness"),
    "Budget": ("jaxpriv.audit", "Budget"),
    "budget": ("jaxpriv.audit", "budget"),
    "run_audit": ("jaxpriv.report", "run_audit"),
    "Verdict": ("jaxpriv.audit", "Verdict"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        module, attribute = _LAZY[name]
        value = getattr(importlib.import_module(module), attribute)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'jaxpriv' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Budget", "Certificate", "CheckResult", "InputError", "Mechanism", "Notion",
           "OPTIONAL", "REQUIRED", "Records", "Relation", "Sampling", "SearchConfig",
           "SearchHints", "SearchResult", "Source", "StatConfig", "StatResult",
           "StatisticalRelation", "SweepConfig", "SweepResult", "Verdict", "__version__",
           "budget", "certified_envelope", "check", "check_witness", "families", "get", "level", "load_plugin", "notion",
           "register", "run_audit", "run_search", "run_sweep", "search_config", "select",
           "sweep_config", "unregister"]
