"""The built-in notions and claims, registered on import: the notions (:mod:`.notions`), the seed
papers' relations R1–R13 (:mod:`.seed_papers`), the claims about estimators R14–R15
(:mod:`.statistical`), the DP literature's D1–D16 (:mod:`.dp_literature`), the composition
theorems C1–C7 (:mod:`.composition_theorems`) and the installed accountants' shipped conversions
(:mod:`.accountants`)."""

from jaxpriv.catalog import notions  # noqa: F401
from jaxpriv.catalog import seed_papers  # noqa: F401
from jaxpriv.catalog import statistical  # noqa: F401
from jaxpriv.catalog import dp_literature  # noqa: F401
from jaxpriv.catalog import composition_theorems  # noqa: F401
from jaxpriv.catalog import accountants  # noqa: F401

from jaxpriv.registry import store as _store  # noqa: E402

_store.seal_builtins()  # what the engines may keep compiled on disk (jaxpriv.engines.program_cache)
