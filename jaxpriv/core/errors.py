"""The one exception jaxpriv raises for bad input.

The CLI turns it into a single line on stderr and exit status 2, so its message must name the
problem on its own (which field, which entry, what was expected).
"""


class InputError(ValueError):
    """A mechanism, prior, belief, observation law or option that jaxpriv cannot accept."""


class BrokenNotionError(InputError):
    """A notion's own function broke its contract (a level of the wrong shape): said wherever
    the notion is evaluated, never left out in silence as a notion the input does not fit."""
