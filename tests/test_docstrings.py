"""The Examples in the library's docstrings run and print what they claim."""

import doctest
import importlib
import pkgutil

import pytest

import jaxpriv

# every module of every layer (and the package's own docstring: the public API's example);
# not the ``python -m`` entry points, which run the command line on import
MODULES = ["jaxpriv"] + sorted(info.name for info in pkgutil.walk_packages(jaxpriv.__path__, "jaxpriv.")
                               if not info.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
