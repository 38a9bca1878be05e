"""jaxpriv: exact privacy notions for finite mechanisms, and audits of the relations between them.

Notions and relations are data (:mod:`jaxpriv.registry`): the built-in ones are registered on
import (:mod:`jaxpriv.catalog`, :mod:`jaxpriv.relations`, :mod:`jaxpriv.statistical_relations`,
:mod:`jaxpriv.dp_relations`),
and a researcher's own are added with :func:`register` — in a session, or from a plugin file
(``jaxpriv ... --plugin FILE.py``) or an installed package's ``jaxpriv.plugins`` entry point.
"""

from jaxpriv import divergences, families, notions
from jaxpriv import catalog, relations, statistical_relations  # noqa: F401  (register built-ins)
from jaxpriv import dp_relations  # noqa: F401  (SPEC §5: D1–D16)
from jaxpriv import accountant_relations  # noqa: F401  (installed accountants' conversions)
from jaxpriv.errors import InputError
from jaxpriv.mechanisms import Mechanism, Records
from jaxpriv.registry import (REQUIRED, Notion, Relation, Sampling, SearchHints, Source,
                              StatisticalRelation, get, level, load_plugin, notion, register,
                              unregister)

__version__ = "0.1.0"

__all__ = ["InputError", "Mechanism", "Notion", "REQUIRED", "Records", "Relation", "Sampling",
           "SearchHints", "Source", "StatisticalRelation", "divergences", "families", "get",
           "level", "load_plugin", "notion", "notions", "register", "unregister", "__version__"]
