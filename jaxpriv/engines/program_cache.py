"""Compiled programs kept on disk between processes: a warm run loads an engine's executable
instead of tracing, lowering and fetching it from JAX's persistent compilation cache.

JAX's cache skips only the backend compile: every process still traces each program and lowers
it to a module, whose hash is the cache key — a warm quick audit of the 63 built-in relations
spent 57 s (summed over its workers) tracing and 37 s lowering, of ~290 s, a search segment
~0.9 s + 0.25 s each. Here a program is found by what determines it, before any tracing:

- the **code**: every source file of the package (``*.py``, the native kernel's ``*.cc`` and
  ``*.h``), the versions of Python, JAX, jaxlib, NumPy, optax and the accountant libraries, the
  native kernel's state, every ``JAX_*``, ``XLA_*`` and ``JAXPRIV_*`` setting and JAX's whole
  configuration (64-bit types included) — :func:`fingerprint`;
- the **program**: its name, the relation's claim key (:func:`jaxpriv.registry.programs.program_key`;
  for a search's segment, which never reads the bound, its notions, options and hints:
  :func:`jaxpriv.registry.programs.objective_key`) and options, every field of the engine's
  config, and the shapes, types and shardings of its arguments;
- the **machine**: the CPU's feature flags, the backend and its version, every device
  (platform, kind, id), the process count.

Only what that key determines is kept: a program of a built-in relation or claim whose record,
notions and claim are the catalog's own objects (:func:`jaxpriv.registry.programs.is_builtin`) —
never a plugin's, a test's replacement or a relation built in a session, whose code is outside
the fingerprint — with no host callback (an accountant's bound calls the library: its executable
holds a pointer to a Python function), in a single process, with no plugin loaded (a plugin's
code could change what a built-in program computes) and no source file changed since the package
was imported (the code running would not be the code hashed). Anything else compiles as
before. A file that cannot be read or loaded is a miss (compiled again and rewritten). A
program missing here is compiled by the backend, not fetched from JAX's cache (whose executables
do not serialize again): the first run after the code changed compiles these programs as a cold
run does, and every later one loads them.

On only where :mod:`jaxpriv.cli.jaxsetup` turns it on with JAX's persistent cache (the
``sweep``, ``search`` and ``audit`` commands: ``$JAXPRIV_CACHE/programs``; off with
``JAXPRIV_COMPILATION_CACHE=off``), or where ``JAXPRIV_PROGRAM_CACHE`` names a folder. The three
most recently used fingerprints' folders are kept; older ones (only folders this cache made) are
removed when a new one starts. Every file carries its payload's SHA-256.
"""

from __future__ import annotations

import functools
import hashlib
import os
import pickle
import shutil
import sys
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxpriv.registry import programs as registry_programs

__all__ = ["ENV", "KEEP", "clear_stats", "compile", "compile_shared", "directory", "fingerprint",
           "signature", "stats"]

ENV = "JAXPRIV_PROGRAM_CACHE"
"""The folder of kept programs (``off``: none)."""
KEEP = 3
"""Fingerprints' folders kept (the most recently used)."""
_FORMAT = 3
_LIBRARIES = ("jax", "jaxlib", "numpy", "optax", "dp-accounting", "autodp", "opendp",
              "prv-accountant")
_STATS = {"loaded": 0, "saved": 0, "compiled": 0, "broken": 0}
_TOGGLE = threading.Lock()  # one compile at a time with JAX's cache turned off
_MARK = "jaxpriv-programs"  # the file that marks a folder as this cache's (pruning)
_FOLDER = re.compile(r"[0-9a-f]{24}")


def stats() -> dict[str, int]:
    """Programs this process loaded from disk, saved to it, compiled without it, and loaded but
    found broken on their first run (compiled instead, their file removed)."""
    return dict(_STATS)


def directory() -> Path | None:
    """This code's folder of kept programs, or ``None`` where they are off: not asked for,
    several processes, a plugin loaded (its code may change what the catalog's programs
    compute), or a source file changed since the package was imported (the code running may
    not be the code on disk)."""
    from jaxpriv.registry import plugins

    root = os.environ.get(ENV, "").strip()
    if not root or root.lower() in ("off", "0", "no") or jax.process_count() > 1 or \
            plugins.LOADED_PLUGINS or plugins.LOADED_ENTRY_POINTS:
        return None
    found = fingerprint()
    return None if found is None else Path(root).expanduser() / found[:24]


@functools.cache
def fingerprint() -> str | None:
    """The hash of everything but the program that decides what it compiles to (module
    docstring), computed once per process; ``None`` if a source file was changed, added or
    removed since the package was imported (:data:`jaxpriv.core.version.SOURCES_AT_IMPORT`)."""
    from importlib import metadata

    from jaxpriv.core import version
    from jaxpriv.kernels import native
    from jaxpriv.kernels.native import builder

    digest = hashlib.sha256(f"format {_FORMAT} {sys.version}".encode())
    package = Path(__file__).resolve().parents[1]
    sources = version.source_files()
    if sources != version.SOURCES_AT_IMPORT:
        return None
    for name in sources:
        digest.update(name.encode() + b"\0" + (package / name).read_bytes())
    # the CPU's features (XLA compiles for the host: code for AVX-512 must not load on AVX2)
    digest.update(builder._cpu_identity().encode() + b"\n")
    for name in _LIBRARIES:
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            version = "-"
        digest.update(f"{name} {version}\n".encode())
    if jax.default_backend() == "cpu":
        native.available()  # registers the kernel's targets, which loaded programs call
    digest.update(f"native {native.state()}\n".encode())
    for name in sorted(os.environ):
        if name.startswith(("JAX_", "XLA_", "JAXPRIV_")) and name != ENV:
            digest.update(f"{name}={os.environ[name]}\n".encode())
    devices = jax.devices()
    digest.update(repr((jax.default_backend(), devices[0].client.platform_version,
                        [(d.platform, d.device_kind, d.id) for d in devices],
                        jax.process_count())).encode())
    return digest.hexdigest()


def _configuration() -> str:
    """JAX's configuration as it is now (thread-local settings such as 64-bit types included)."""
    holders = jax.config._value_holders  # every option JAX defines, by name
    return repr(sorted((name, repr(holder.value)) for name, holder in holders.items()))


def signature(args) -> str:
    """The shapes, types and shardings of ``args`` (arrays, ``ShapeDtypeStruct``s, scalars)."""
    leaves, tree = jax.tree_util.tree_flatten(args)

    def one(leaf):
        sharding = getattr(leaf, "sharding", None)
        dtype = leaf.dtype if hasattr(leaf, "dtype") else np.result_type(leaf)
        return (np.shape(leaf), str(dtype), repr(sharding),
                bool(getattr(leaf, "weak_type", False)))
    return repr((str(tree), [one(leaf) for leaf in leaves]))


def _key(name: str, relation, config_key: tuple, args, extra: tuple,
         program=None) -> str | None:
    """The program's file name, or ``None`` where it may not be kept (module docstring);
    ``program``: what the program reads of the relation, where it is less than its claim
    (:func:`jaxpriv.registry.programs.objective_key`)."""
    if not registry_programs.is_builtin(relation):
        return None
    if program is not None:  # its text: the notions' names, options and hints
        which = program[:2]
    else:
        program = registry_programs.program_key(relation)
        which = program if program[0] == "claim" else relation.id
    # the relation's options but the claim's traced parameters (arguments), for a record whose
    # dict was changed in place
    traced = registry_programs.traced_values(relation)
    options = sorted((k, repr(v)) for k, v in relation.options.items() if k not in traced)
    return _hashed((name, which, options, config_key, extra, signature(args), _configuration()))


def _hashed(parts: tuple) -> str | None:
    """A file name for a program from what determines it; ``None`` where a part has no
    value's repr (an object's address is not a key)."""
    text = repr(parts)
    return None if " at 0x" in text else hashlib.sha256(text.encode()).hexdigest()


def compile(name: str, relation, config_key: tuple, jitted, *args, extra: tuple = (),
            program=None) -> Any:
    """``jitted.lower(*args).compile()``, loaded from disk where this program was kept, and kept
    there after compiling where it may be (module docstring).

    Args:
      name: the program's name (``"search segment"``, ...).
      relation: the relation it serves (its claim's program where it shares one).
      config_key: every field of the engine's config but the relation id
        (:func:`jaxpriv.engines.programs.config_key`).
      jitted: the ``jax.jit`` function.
      *args: its arguments (or ``ShapeDtypeStruct``s).
      extra: anything else the program was built from.
      program: what the program reads of the relation, where that is less than its claim
        (:func:`jaxpriv.registry.programs.objective_key`; default: the claim's key).
    Returns:
      a :class:`jax.stages.Compiled` (one loaded from disk checks its first run: ``_CheckedOnce``).
    """
    folder = directory()
    key = None if folder is None else _key(name, relation, config_key, args, extra, program)
    return _loaded_or_compiled(folder, key, jitted, args)


def compile_shared(name: str, jitted, *args, extra: tuple = ()) -> Any:
    """:func:`compile` for a program that reads no relation (the sweeps' seed words,
    :func:`jaxpriv.kernels.samplers.draw_all_seeds`): one file, keyed by ``name``, ``extra``, the
    arguments' signature and the code, machine and configuration, for every relation. Kept per
    relation, it was saved again by each of an audit's 36 sweeps (1.1 MB each, 40 of the quick
    audit's 122 MB of programs) and each warm sweep loaded its own copy."""
    folder = directory()
    key = None if folder is None else _hashed((name, "shared", extra, signature(args),
                                               _configuration()))
    return _loaded_or_compiled(folder, key, jitted, args)


def _loaded_or_compiled(folder: Path | None, key: str | None, jitted, args) -> Any:
    if key is not None:
        path = folder / f"{key}.pkl"
        loaded = _load(path)
        if loaded is not None:
            _STATS["loaded"] += 1
            return _CheckedOnce(loaded, path, lambda: jitted.lower(*args).compile())
    lowered = jitted.lower(*args)
    _STATS["compiled"] += 1
    if key is None:
        return lowered.compile()
    compiled, fresh = _compile_fresh(lowered)
    if fresh and _save(folder, f"{key}.pkl", compiled):
        _STATS["saved"] += 1
    return compiled


class _CheckedOnce:
    """A program loaded from disk whose first call runs to completion on copies of its
    arguments before it is trusted. An executable that XLA:CPU compiled while an equal function
    was already in the process can serialize without that function's code, and then fails only
    when run ("Error dispatching computation: Function slice_bitcast_fusion not found", seen
    once in CI): its file is removed and the program is compiled instead, its
    result the compiled one's. Copies, because a program may donate its arguments."""

    def __init__(self, loaded, path: Path, compile_fresh):
        self._program, self._path, self._compile_fresh = loaded, path, compile_fresh
        self._checked = False

    def __call__(self, *args):
        if self._checked:
            return self._program(*args)
        try:
            copies = jax.tree_util.tree_map(
                lambda a: a.copy() if isinstance(a, jax.Array) else a, args)
            result = jax.block_until_ready(self._program(*copies))
        except Exception:  # not runnable as kept: compile it, forget the file
            _STATS["broken"] += 1
            try:
                self._path.unlink(missing_ok=True)
            except OSError:
                pass
            self._program = self._compile_fresh()
            result = self._program(*args)
        self._checked = True
        return result

    def __getattr__(self, name):
        return getattr(self._program, name)


def _compile_fresh(lowered):
    """``lowered.compile()`` by the backend itself, not fetched from JAX's persistent cache (an
    executable loaded from there serializes without its kernels' code: loaded again, it fails
    with "Function ... not found"), and whether it was: ``(compiled, fresh)``. JAX's in-memory
    cache may still answer with an executable this process made before (the sweeps' shared seed
    program), perhaps loaded from disk: not fresh, never kept."""
    from jax._src.interpreters import pxla
    from jax.experimental.compilation_cache import compilation_cache as jax_cache

    with _TOGGLE:
        previous = jax.config.jax_enable_compilation_cache
        jax.config.update("jax_enable_compilation_cache", False)
        jax_cache.reset_cache()  # JAX decides once per process whether its cache is used
        try:
            hits = pxla._cached_compilation.cache_info().hits
            compiled = lowered.compile()
            return compiled, pxla._cached_compilation.cache_info().hits == hits
        finally:
            jax.config.update("jax_enable_compilation_cache", previous)
            jax_cache.reset_cache()


def _load(path: Path):
    from jax.experimental import serialize_executable

    try:
        with open(path, "rb") as file:
            version, digest, payload, in_tree, out_tree, device_ids = pickle.load(file)
        if version != _FORMAT or hashlib.sha256(payload).hexdigest() != digest:
            return None
        by_id = {device.id: device for device in jax.devices()}
        # on the devices it was compiled for (a one-device program of a two-device process)
        loaded = serialize_executable.deserialize_and_load(
            payload, in_tree, out_tree, execution_devices=[by_id[i] for i in device_ids])
    except Exception:  # missing, partly written, from another build: compile again
        return None
    try:
        os.utime(path.parent)  # the folder's last use, for pruning (a read-only one: no matter)
    except OSError:
        pass
    return loaded


def _save(folder: Path, name: str, compiled) -> bool:
    """Write ``compiled`` to ``folder/name`` (atomically) where it holds no host callback."""
    from jax.experimental import serialize_executable

    temporary = None
    try:
        unloaded = compiled._executable._unloaded_executable
        if unloaded.host_callbacks or unloaded.keepalive or unloaded.ordered_effects or \
                unloaded.unordered_effects:
            return False
        payload, in_tree, out_tree = serialize_executable.serialize(compiled)
        device_ids = [device.id for device in unloaded.device_list]
        data = pickle.dumps((_FORMAT, hashlib.sha256(payload).hexdigest(), payload, in_tree,
                             out_tree, device_ids))
        if not (folder / _MARK).is_file():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / _MARK).write_text("compiled programs of jaxpriv "
                                        "(jaxpriv.engines.program_cache)\n")
            _prune(folder.parent, keep=folder)
        _sweep_orphans(folder)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".tmp", delete=False) as file:
            temporary = Path(file.name)
            file.write(data)
        os.replace(temporary, folder / name)
        return True
    except Exception:  # a program that does not serialize, a full disk: not kept
        if temporary is not None:
            try:
                temporary.unlink(missing_ok=True)
            except OSError:  # the folder went away or turned read-only meanwhile
                pass
        return False


ORPHAN_SECONDS = 600.0
"""A ``*.tmp`` file untouched this long is a killed process's partial write (a program's write
takes well under a second): removed."""


@functools.cache
def _sweep_orphans(folder: Path) -> None:
    """Remove partial writes that a killed process left in ``folder`` (once per process)."""
    now = time.time()
    for path in folder.glob("*.tmp"):
        try:
            if now - path.stat().st_mtime > ORPHAN_SECONDS:
                path.unlink()
        except OSError:  # another process's, removed or renamed meanwhile
            pass


def _prune(root: Path, keep: Path) -> None:
    """Remove all but the :data:`KEEP` most recently used fingerprints' folders under ``root``:
    only folders this cache made (a fingerprint's name, holding its mark), never another."""
    folders = sorted((p for p in root.iterdir() if p.is_dir() and p != keep and
                      _FOLDER.fullmatch(p.name) and (p / _MARK).is_file()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for old in folders[KEEP - 1:]:
        shutil.rmtree(old, ignore_errors=True)


def clear_stats() -> None:
    """Reset :func:`stats` (tests)."""
    for name in _STATS:
        _STATS[name] = 0

