"""jaxpriv: exact privacy notions for finite mechanisms, and audits of the relations between them."""

from jaxpriv import divergences, families, notions
from jaxpriv.errors import InputError
from jaxpriv.mechanisms import Mechanism, Records

__version__ = "0.1.0"

__all__ = ["InputError", "Mechanism", "Records", "divergences", "families", "notions",
           "__version__"]
