"""The Examples in the library's docstrings run and print what they claim."""

import doctest
import importlib
import pkgutil

import jax
import pytest

import jaxpriv

# every module of every layer (and the package's own docstring: the public API's example);
# not the ``python -m`` entry points, which run the command line on import
MODULES = ["jaxpriv"] + sorted(info.name for info in pkgutil.walk_packages(jaxpriv.__path__, "jaxpriv.")
                               if not info.name.endswith("__main__"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    x64 = jax.config.jax_enable_x64
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    leaked = jax.config.jax_enable_x64 != x64
    jax.config.update("jax_enable_x64", x64)
    assert result.failed == 0
    # an example that switches float64 on for the process turns every later test in the worker
    # to float64 (its sweeps then fail with float32/float64 scan carries): refused here
    assert not leaked, f"{name}'s examples change jax_enable_x64 (use `with jax.enable_x64()`)"
