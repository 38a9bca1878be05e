"""The Examples in the library's docstrings run and print what they claim."""

import doctest
import importlib
import pkgutil

import pytest

import jaxpriv

MODULES = sorted(info.name for info in pkgutil.iter_modules(jaxpriv.__path__, "jaxpriv."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
