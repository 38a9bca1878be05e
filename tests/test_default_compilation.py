"""A part of the suite compiled as users' programs are.

The suite compiles its own programs at XLA's LLVM optimization level 0 with the elemental fusion
emitters (``tests/conftest.py``): the same IEEE operations with fewer compiler passes, since
compiling is most of its time. Users' programs compile at XLA's defaults (the engines' fused
kernels set their own options either way), whose emitters round ``exp`` and ``log`` differently.
This test runs the tests most sensitive to that rounding — the float32 screens against float64,
no false alarm in a sweep, a search reaching a certified optimum — in a process that compiles
at the defaults (``JAXPRIV_TEST_OPTIMIZED=1``), with a compilation cache of its own (so that no
program compiled the suite's way is loaded).
"""

import os
import subprocess
import sys
from pathlib import Path

from conftest import SUITE_XLA_FLAGS

ROOT = Path(__file__).resolve().parents[1]

TESTS = [
    "tests/test_pair_notions.py::test_float32_screens_agree_with_float64",
    "tests/test_sweep.py::test_true_bounds_are_never_reported_violated[R5]",
    "tests/test_search.py::test_search_reaches_the_certified_optimum_within_one_percent[R1-0.0]",
]

SUITE_FLAGS = tuple(flag.split("=")[0] for flag in SUITE_XLA_FLAGS)


def test_sensitive_tests_pass_compiled_at_xlas_defaults(tmp_path):
    env = dict(os.environ)
    env["XLA_FLAGS"] = " ".join(flag for flag in env.get("XLA_FLAGS", "").split()
                                if not flag.startswith(SUITE_FLAGS))
    env["JAXPRIV_TEST_OPTIMIZED"] = "1"
    env["JAX_COMPILATION_CACHE_DIR"] = str(tmp_path / "compilation-cache")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert f"{len(TESTS)} passed" in done.stdout, done.stdout[-2000:]
    # the run compiled at the defaults (the header names the level and the emitters)
    assert "optimization level default, default fusion emitters" in done.stdout, \
        done.stdout[-2000:]
