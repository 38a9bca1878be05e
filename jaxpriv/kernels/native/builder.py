"""Building the native kernel's shared library (:mod:`jaxpriv.kernels.native`): the compiler
and its flags, the ``-march`` (``JAXPRIV_NATIVE_MARCH``) and the CPU features it needs, the
library's cache key and folder (``JAXPRIV_CACHE``), and one build at a time per library.

The cache key hashes the sources and the headers they include, the flags, the ``-march``, the
compiler's identity, JAX's version and the CPU's feature flags (:func:`library_path`), so a
library built once is loaded from the cache by every later process on the same machine.

Settings (environment variables):
  ``JAXPRIV_CACHE``: jaxpriv's cache root, where built libraries go (``native/``) and the
  CLI's JAX compilation cache (``jax-compilation/``); default ``$XDG_CACHE_HOME/jaxpriv`` or
  ``~/.cache/jaxpriv``, a folder in the temporary directory if neither can be written.
  ``CXX``: the compiler (default ``c++``, then ``g++``, then ``clang++``).
  ``JAXPRIV_NATIVE_MARCH``: the compiler's ``-march`` for the library (default ``native``: the
  widest vectors this CPU has). ``x86-64-v3`` builds the AVX2 path (8 lanes) on any AVX2 CPU,
  AVX-512 ones included: with NumPy's ``NPY_DISABLE_CPU_FEATURES=X86_V4`` and XLA's
  ``--xla_cpu_max_isa=AVX2`` it runs jaxpriv as an AVX2-only machine does (``.ci/run`` tests
  that way); ``x86-64-v4`` the AVX-512 path (16 lanes); ``x86-64`` the SSE2 one (4 lanes).

Examples:
  >>> from jaxpriv.kernels.native import builder
  >>> builder.FLAGS[:2]
  ('-std=c++17', '-O3')
  >>> sorted(builder.MARCH_NEEDS)
  ['x86-64-v3', 'x86-64-v4']
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import jax

__all__ = [
    "AVX2_ENVIRONMENT", "BUILD_TIMEOUT_S", "FLAGS", "MARCH_NEEDS", "SOURCES", "build",
    "cache_root", "cpu_flags", "library_path", "march",
]

SOURCES = tuple(Path(__file__).with_name(name)
                for name in ("record_levels.cc", "zcdp_orders.cc", "sorted_pairs.cc",
                             "composed_eps.cc"))
"""The library's translation units: the record notions' kernel, the samplers and the sweep's
reduction; the zCDP level, ε(δ) and the GDP level of float32 pairs; the composed ε(δ)."""
HEADERS = tuple(Path(__file__).with_name(name) for name in ("pair_twins.h", "fast_math.h"))
"""Headers the translation units include (in the cache key with them)."""
FLAGS = ("-std=c++17", "-O3", "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared")
"""Plus ``-march=native`` by default: the library is built for the machine that runs it (the
cache key holds the CPU's feature flags). No ``-ffast-math``: infinities are values here
(``log K = −∞``)."""
BUILD_TIMEOUT_S = 300


def march() -> str:
    """The ``-march`` the kernel is built with: ``JAXPRIV_NATIVE_MARCH``, default ``native``."""
    chosen = os.environ.get("JAXPRIV_NATIVE_MARCH", "").strip() or "native"
    if not all(c.isalnum() or c in "-_." for c in chosen):
        raise RuntimeError(f"JAXPRIV_NATIVE_MARCH={chosen!r} is not a -march name")
    missing = sorted(set(MARCH_NEEDS.get(chosen, ())) - cpu_flags())
    if missing and platform.machine() == "x86_64":
        raise RuntimeError(f"JAXPRIV_NATIVE_MARCH={chosen} needs CPU features this CPU lacks "
                           f"({', '.join(missing)})")
    return chosen


MARCH_NEEDS = {"x86-64-v3": ("avx2", "fma", "bmi2"),
               "x86-64-v4": ("avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl")}
"""CPU flags (``/proc/cpuinfo``) a ``-march`` level needs: its code must not run without them."""

AVX2_ENVIRONMENT = {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
                    "XLA_FLAGS": "--xla_cpu_max_isa=AVX2", "JAXPRIV_NATIVE_MARCH": "x86-64-v3"}
"""Environment that runs NumPy, XLA and this kernel as on an AVX2-only CPU, on any AVX2 CPU
(``XLA_FLAGS`` is appended to, not replaced); ``.ci/run`` exports the same."""


def cpu_flags() -> set[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where there is none)."""
    return set(_cpu_identity().partition(":")[2].split())


def library_path(march: str = "native") -> Path:
    """Where the library for this source, flags, compiler, JAX and CPU is cached."""
    key = hashlib.sha256()
    for part in (*(source.read_bytes() for source in SOURCES + HEADERS), " ".join(FLAGS).encode(),
                 march.encode(),
                 _compiler_identity().encode(), jax.__version__.encode(),
                 _cpu_identity().encode()):
        key.update(part)
        key.update(b"\0")
    return cache_root() / "native" / f"record_levels-{key.hexdigest()[:16]}.so"


def cache_root() -> Path:
    """jaxpriv's cache root: ``JAXPRIV_CACHE`` if set; else the first of
    ``$XDG_CACHE_HOME/jaxpriv``, ``~/.cache/jaxpriv`` and a per-user folder in the temporary
    directory that can be written."""
    if os.environ.get("JAXPRIV_CACHE"):
        return Path(os.environ["JAXPRIV_CACHE"]).expanduser()
    user_cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    user = os.getuid() if hasattr(os, "getuid") else "user"
    fallback = Path(tempfile.gettempdir()) / f"jaxpriv-cache-{user}"
    for root in (user_cache / "jaxpriv", fallback):
        try:
            (root / "native").mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(root / "native", os.W_OK):
            return root
    return fallback


def build(march: str = "native") -> Path:
    """Compiles :data:`SOURCES` into :func:`library_path` unless it is there already.

    The library is written to a temporary file and renamed into place, so concurrent builds
    (two processes, a killed one) never leave a partial library behind.

    Args:
      march: the compiler's ``-march``; the tests build the portable variants with it
        (``x86-64-v3``: AVX2, ``x86-64``: SSE2).

    Raises:
      RuntimeError: no compiler, or the compiler failed (its last lines in the message).
    """
    target = library_path(march)
    if target.exists():
        return target
    compiler = _compiler()
    if compiler is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++ or clang++)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _build_lock(target):
        if target.exists():  # another process built it while this one waited
            return target
        _stale_scratch(target.parent)
        return _compile(compiler, march, target)


def turned_off() -> bool:
    """Whether ``JAXPRIV_NATIVE`` turns the native kernel off (``0``, ``false``, ``no``,
    ``off``)."""
    return os.environ.get("JAXPRIV_NATIVE", "1").strip().lower() in ("0", "false", "no", "off")


def build_ahead() -> threading.Thread | None:
    """Starts :func:`build` for this CPU (:func:`march`) in a background thread, unless the
    library is built already, the kernel is turned off, :func:`march` cannot serve this CPU or
    there is no compiler; returns the thread, or ``None``.

    An audit on a CPU calls it before it plans: with empty caches the build's ~7 s on two cores
    then overlap planning and the workers' start instead of holding the first relations (one
    worker builds, the others wait for :func:`_build_lock`); a process that needs the kernel
    before it is built waits for the same lock. Nothing is reported here: a kernel that cannot
    be built is reported where it is first used, as without this call
    (:class:`jaxpriv.kernels.native.NativeKernelWarning`). A build cut short by the process's
    exit leaves a scratch folder, removed by a later build (:func:`_stale_scratch`).
    """
    try:
        chosen = march()
        if turned_off() or library_path(chosen).exists() or _compiler() is None:
            return None
    except (OSError, RuntimeError):  # reported where the kernel is first used
        return None

    def run() -> None:
        try:
            build(chosen)
        except Exception:  # noqa: BLE001 - reported where the kernel is first used
            pass

    thread = threading.Thread(target=run, name="jaxpriv-native-build", daemon=True)
    thread.start()
    return thread


SCRATCH_AGE_S = 3600
"""A build's scratch folder older than this is a build's that never finished (its process
ended, e.g. an audit stopped while :func:`build_ahead` built): removed by the next build."""


def _stale_scratch(folder: Path) -> None:
    """Removes :func:`_compile`'s scratch folders in ``folder`` older than :data:`SCRATCH_AGE_S`."""
    now = time.time()
    for entry in folder.glob("tmp*"):
        try:
            if entry.is_dir() and now - entry.stat().st_mtime > SCRATCH_AGE_S:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass


@contextlib.contextmanager
def _build_lock(target: Path):
    """One build at a time per library (processes starting together, e.g. an audit's workers,
    would otherwise each spend the build's seconds of CPU on the same file); a holder that
    never lets go is waited for no longer than a build may take."""
    try:
        import fcntl
    except ImportError:  # no advisory locks here: concurrent builds stay safe, only wasteful
        yield
        return
    with open(target.with_suffix(".lock"), "a") as lock:
        deadline = time.monotonic() + BUILD_TIMEOUT_S + 30
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    break  # build anyway: the rename below keeps it safe
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _compile(compiler: str, march: str, target: Path) -> Path:
    """Each translation unit compiled in its own process (a 2-core machine builds the library
    in about three quarters of the time of one ``c++`` over all of them), then linked into
    ``target``."""
    scratch = tempfile.mkdtemp(dir=target.parent)
    partial = os.path.join(scratch, target.name)
    flags = [flag for flag in FLAGS if flag != "-shared"]
    common = [*flags, f"-march={march}", "-I", jax.ffi.include_dir()]
    objects = [os.path.join(scratch, f"{source.stem}.o") for source in SOURCES]
    deadline = time.monotonic() + BUILD_TIMEOUT_S
    running: list[subprocess.Popen] = []
    try:
        for source, obj in zip(SOURCES, objects):
            running.append(subprocess.Popen([compiler, *common, "-c", str(source), "-o", obj],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                            text=True))
        for source, process in zip(SOURCES, running):
            _finish(compiler, process, deadline, source.name)
        running.append(subprocess.Popen([compiler, *flags, "-shared", *objects, "-o", partial],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True))
        _finish(compiler, running[-1], deadline, "the link")
        os.replace(partial, target)
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _finish(compiler: str, process: subprocess.Popen, deadline: float, what: str) -> None:
    """Waits for one compiler process (``what`` it builds); a failure raises with its last
    lines."""
    try:
        _, err = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{compiler} did not finish in {BUILD_TIMEOUT_S} s") from None
    if process.returncode != 0:
        tail = " | ".join(err.strip().splitlines()[-3:])
        raise RuntimeError(f"{compiler} failed on {what} (exit {process.returncode}): {tail}")


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


@functools.cache
def _compiler_identity() -> str:
    compiler = _compiler()
    if compiler is None:
        return "none"
    try:
        version = subprocess.run([compiler, "--version"], capture_output=True, text=True,
                                 timeout=60).stdout.splitlines()[:1]
    except (OSError, subprocess.TimeoutExpired):
        version = []
    return f"{compiler} {' '.join(version)}"


def _cpu_identity() -> str:
    """The CPU's feature flags (``-march=native`` code must not run on a CPU without them)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return line
    except OSError:
        pass
    return f"{platform.machine()} {platform.processor()}"
