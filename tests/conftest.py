import atexit
import functools
import os
import shutil
import tempfile

# One persistent compilation cache for the session, shared with the processes tests start
# (audit workers, CLI subprocesses): a program compiled once is not compiled again. Every test
# still compiles what it runs at least once per session; the cache starts empty.
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="jaxpriv-test-compilation-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _cache
    # every program that took 0.1 s or more to compile: the suite's processes compile the same
    # float64 checks again and again (test_group + test_cli 234 s -> 217 s on the 2-core EPYC
    # against JAX's 1 s). Not every program, as the command line does: writing each of the
    # ~9,000 one-operation programs (~20 ms to compile) cost more than it saved (2-core AVX2
    # EPYC, one worker: test_abp_envelope + test_samplers 85/84 s at 0 against 78 s at 0.1;
    # test_cli + test_faults 145 s at 0, 143 s at 0.1; test_group 111 s either way)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.1")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

# No compiled programs kept between processes (jaxpriv.engines.program_cache): tests replace
# module globals and records that its key cannot see; tests/test_program_cache.py turns it on.
os.environ["JAXPRIV_PROGRAM_CACHE"] = "off"

# XLA's LLVM back end at optimization level 0 and its elemental fusion emitters for the suite's
# own programs (the fused sweep kernels set both per program, as in use): the same IEEE
# operations compiled with fewer passes. Most of the suite's time is compiling small programs
# once: level 0, test_pair_notions 84 s -> 65 s, test_sweep 163 s -> 141 s (AVX-512 EPYC); the
# elemental emitters then, test_pair_notions 111 s -> 76 s, test_search 243 s -> 194 s (2-core
# AVX2 EPYC, where the whole suite had grown to 33 minutes). JAXPRIV_TEST_OPTIMIZED=1 tests the
# defaults; tests/test_default_compilation.py runs a part of the suite that way in every run.
# And each program's machine code generated in one piece, not split over threads: the suite's two
# workers keep both cores busy already (test_pair_notions 93 -> 85 s of CPU time; the code is
# the same, only how LLVM's work is divided).
SUITE_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false",
                   "--xla_cpu_parallel_codegen_split_count=1")
if not os.environ.get("JAXPRIV_TEST_OPTIMIZED"):
    for _flag in SUITE_XLA_FLAGS:
        if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
            os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), _flag]).strip()

import jax  # noqa: E402 - after the cache settings above
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# CI replays a fixed set of examples (no flaky runs); local runs keep exploring new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture
def x64():
    """Run the test body with float64 enabled."""
    with jax.enable_x64(True):
        yield


def random_stochastic(rng: np.random.Generator, n: int, m: int, concentration: float = 1.0,
                      zero_fraction: float = 0.0) -> np.ndarray:
    """A random row-stochastic matrix, optionally with zeroed entries (never a zero row)."""
    K = rng.dirichlet(np.full(m, concentration), size=n)
    if zero_fraction:
        mask = rng.random((n, m)) < zero_fraction
        mask[np.arange(n), rng.integers(0, m, n)] = False
        K = np.where(mask, 0.0, K)
        K /= K.sum(axis=1, keepdims=True)
    return K


def random_prior(rng: np.random.Generator, n: int, concentration: float = 1.0) -> np.ndarray:
    return rng.dirichlet(np.full(n, concentration))


@functools.cache
def _jitted_sample():
    from jaxpriv.kernels import samplers
    return jax.jit(samplers.sample, static_argnums=(1, 2, 3))


def sample(key, count: int, spec, kernel: str = "xla"):
    """``jaxpriv.kernels.samplers.sample`` compiled as one program. Called op by op, one draw
    of a new shape dispatches ~150 small XLA programs (~6 s of the suite's time each;
    docs/development.md, "Where the suite's time goes")."""
    return _jitted_sample()(key, count, spec, kernel)


def skip_without_native_kernel():
    """Skips the calling test where the native kernel is not available (tests/test_native.py
    fails instead if a compiler is there and the build still fails)."""
    from jaxpriv.kernels import native
    if not native.available():
        pytest.skip(f"native kernel unavailable: {native.unavailable_reason()}")


@pytest.fixture
def native_built():
    skip_without_native_kernel()


@pytest.fixture
def native_kernel(request):
    """For tests parametrized over ``kernel``: skips the ``"native"`` case where it is not
    available."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and callspec.params.get("kernel") == "native":
        skip_without_native_kernel()


@pytest.fixture
def too_tight_relation():
    """R2 with its bound halved (ξ-MBP ⇒ LDP ≤ ξ): false, registered for one test only."""
    from jaxpriv import registry
    from jaxpriv.catalog import seed_papers as relations
    relation = registry.register(registry.Relation(
        id="TEST-R2-HALF", statement="ξ-MBP ⇒ LDP ≤ ξ (deliberately false)",
        sources=(registry.Source("003", "Lemma 5.2, halved"),), premise="mbp",
        conclusion="ldp", condition="π uniform", parameter="eps_unif",
        parameter_limit=relations.UNIFORM_TOL, bound=lambda x, eps: x), replace=True)
    yield relation
    registry.REGISTRY.pop(relation.id, None)


def pytest_report_header(config):
    """Which instruction-set paths this run tests (``.ci/run`` caps them at AVX2); shown at the
    start without ``-q``, and at the end always (:func:`pytest_terminal_summary`)."""
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as numpy_features
    except ImportError:  # NumPy < 2
        numpy_features = {}
    levels = ("X86_V4", "X86_V3") if "X86_V3" in numpy_features else ("AVX512F", "AVX2")
    widest = [name for name in levels if numpy_features.get(name)]  # NumPy 2.4+: X86_V*
    flags = os.environ.get("XLA_FLAGS", "")
    xla = next((f.split("=", 1)[1] for f in flags.split() if f.startswith("--xla_cpu_max_isa")),
               "the CPU's widest")
    from jaxpriv.kernels import native
    try:
        march = native.march()
    except RuntimeError as error:  # refused: the XLA kernel runs
        march = f"none ({error})"
    level = next((f.split("=", 1)[1] for f in flags.split()
                  if f.startswith("--xla_backend_optimization_level")), "default")
    emitters = "elemental" if "--xla_cpu_use_fusion_emitters=false" in flags else "default"
    return (f"jaxpriv ISA paths (XLA optimization level {level}, {emitters} fusion emitters): "
            f"NumPy dispatch "
            f"{widest[0] if widest else 'baseline'} "
            f"(NPY_DISABLE_CPU_FEATURES={os.environ.get('NPY_DISABLE_CPU_FEATURES', '')!r}), "
            f"XLA {xla}, native kernel -march={march}")


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(pytest_report_header(terminalreporter.config))
