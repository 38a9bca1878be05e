"""JAX started for the ``sweep``, ``search`` and ``audit`` commands, before it runs anything:
one device per CPU core, the persistent compilation cache (:func:`cache_directory`; the
commands that start no run use it too, :func:`use_compilation_cache`), and the process group
the flags or the environment name (:mod:`jaxpriv.engines.group`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from jaxpriv.core.errors import InputError


GROUP_LOCAL = ("process_id", "out", "cpu_devices", "quiet", "coordinator_timeout",
               "distributed", "coordinator", "given")
"""Settings that may differ between the processes of a group; the rest must agree (``given``,
the options a command line sets itself: their values are compared)."""


COMPILATION_CACHE = "jax-compilation"
"""The folder of JAX's persistent compilation cache under jaxpriv's cache root (the native
kernel's, :func:`jaxpriv.kernels.native.cache_root`: ``$JAXPRIV_CACHE``, else ``~/.cache/jaxpriv``)."""


PROGRAM_CACHE = "programs"
"""The folder of the engines' compiled programs under jaxpriv's cache root
(:mod:`jaxpriv.engines.program_cache`), on with :data:`COMPILATION_CACHE`."""


def cache_directory() -> Path | None:
    """Where jaxpriv's commands keep JAX's persistent compilation cache, so a second run does
    not compile again: :data:`COMPILATION_CACHE` under jaxpriv's cache root;
    ``None`` when ``JAXPRIV_COMPILATION_CACHE=off``, or when the user set JAX's own
    ``JAX_COMPILATION_CACHE_DIR`` (then JAX uses that)."""
    import os

    from jaxpriv.kernels import native

    if os.environ.get("JAXPRIV_COMPILATION_CACHE", "").strip().lower() in ("off", "0", "no"):
        return None
    if os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    return native.cache_root() / COMPILATION_CACHE


def _start_jax(devices: int | None, args=None) -> None:
    """Before JAX runs anything: one device per CPU core (:func:`_use_cpu_cores`), the
    persistent compilation cache at :func:`cache_directory` (also for the audit's worker
    processes, through the environment they inherit; a directory that cannot be created is a
    note, and the run compiles as usual), and the process group ``args`` names, if any
    (:func:`_join_group`)."""
    _use_cpu_cores(devices)
    use_compilation_cache()
    if args is not None:
        _join_group(args)


def _join_group(args) -> None:
    """Join the process group the flags or the environment name (:mod:`jaxpriv.engines.group`); every
    setting but :data:`GROUP_LOCAL` must agree across it. A process other than the writer runs
    quietly, into a scratch directory of its own."""
    import os

    from jaxpriv.engines import group

    found = group.settings(args.coordinator, args.num_processes, args.process_id,
                           args.coordinator_timeout)
    if found is None:
        if args.distributed:
            raise InputError("--distributed needs a process group: give --coordinator HOST:PORT "
                             "--num-processes N --process-id I (or JAX_COORDINATOR_ADDRESS, "
                             "JAX_NUM_PROCESSES, JAX_PROCESS_ID)")
        return
    from jaxpriv.core.version import __version__

    shared = {k: v for k, v in sorted(vars(args).items()) if k not in GROUP_LOCAL}
    group.join(found, json.dumps({"jaxpriv": __version__, **shared}, default=str))
    # the collectives library prints to the process's stdout itself: that goes to stderr (the
    # writer) or nowhere (the others), while Python's own output keeps the real stdout
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2 if found.rank == 0 else os.open(os.devnull, os.O_WRONLY), 1)
    sys.stdout = open(kept if found.rank == 0 else os.devnull, "w",  # noqa: SIM115
                      buffering=1)
    if found.rank != 0:
        args.out = str(group.scratch() / "out")
        args.quiet = True
        print(f"jaxpriv: process {found.rank} of {found.size} joined the group at "
              f"{found.address}; process 0 prints and writes the results", file=sys.stderr)


def use_compilation_cache() -> None:
    """JAX's persistent compilation cache at :func:`cache_directory`, unless turned off."""
    import os

    import jax

    path = cache_directory()
    if path is None:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        print(f"jaxpriv: note: no compilation cache ({path}: {error.strerror or error}); set "
              "JAXPRIV_CACHE to a writable directory, or JAXPRIV_COMPILATION_CACHE=off",
              file=sys.stderr)
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(path)
    # and the engines' compiled programs beside it, found before tracing
    # (jaxpriv.engines.program_cache; also for the audit's workers, through the environment)
    os.environ.setdefault("JAXPRIV_PROGRAM_CACHE", str(path.parent / PROGRAM_CACHE))
    # every program, however quick to compile: a run dispatches ~150 small ones (eager
    # float64 checks, initial parameters), ~55 ms each to compile and ~1 ms to load — with a
    # 0.3 s threshold they were compiled again on every run (a warm quick audit of R1: 14 s → 4 s)
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs",
                      float(os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"]))
    jax.config.update("jax_persistent_cache_min_entry_size_bytes",
                      int(os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"]))


def _use_cpu_cores(devices: int | None) -> None:
    """One JAX device per core on a CPU host: XLA runs one device's work on one thread, and the
    sweep shards its blocks over devices. Only possible before JAX first runs anything (so not
    when ``main`` is called from a process that already used JAX; it then keeps its devices)."""
    import os

    import jax

    if devices is not None and devices < 1:
        raise InputError(f"--cpu-devices must be >= 1, got {devices}")
    try:
        jax.config.update("jax_num_cpu_devices", devices or os.cpu_count() or 1)
    except RuntimeError:
        if devices is not None and jax.local_device_count("cpu") != devices:
            raise InputError("--cpu-devices must be set before JAX starts; run the jaxpriv "
                             "command in a fresh process") from None
