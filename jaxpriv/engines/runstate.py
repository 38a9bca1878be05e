"""Run state shared by every engine: run directories, checkpoints and resume, progress bars, and
the witness round trip (float64 re-check → save → re-read → re-check).

The sweep (:mod:`jaxpriv.engines.sweep`), the search (:mod:`jaxpriv.engines.search`) and the statistical engine
(:mod:`jaxpriv.engines.settings`) all keep their state through this module, so a run killed at
any point resumes to exactly the uninterrupted result, and a witness is reported only if the
file on disk, read back, still violates the claim.

Examples:
  >>> from jaxpriv.engines import runstate
  >>> runstate.progress_bar(10, 0, "mech", "sweep R1", enabled=False) is None
  True
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from jaxpriv.engines import group, io
from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism

WITNESSES = "witnesses"
# checkpoints: a sweep's (with its record, RECORD_STATE, beside it), a statistical claim's run
# (RECORD_STATE alone), a search's
SWEEP_STATE, RECORD_STATE, SEARCH_STATE = "checkpoint.npz", "checkpoint.json", "search_state.npz"


def other_run(out_dir: Path, checkpoint: str, what: str = "") -> str | None:
    """What other kind of run ``out_dir`` holds than a ``what`` whose checkpoint is
    ``checkpoint`` (``"a search"``, ``"a sweep"``, ``"a statistical claim's run"``), or
    ``None``: a search written into a finished sweep's directory replaced its summary and
    envelope, and the reverse. A statistical claim's search keeps no checkpoint: its summary
    (``mode`` "search") says it is there; another of its kind may write over it (it does not
    resume)."""
    held = {name for name in (SWEEP_STATE, RECORD_STATE, SEARCH_STATE)
            if io.has_checkpoint(out_dir / name)}
    if SWEEP_STATE in held:
        held.discard(RECORD_STATE)  # a sweep's own record (written after its state)
    held.discard(checkpoint)
    for name, kind in ((SEARCH_STATE, "a search"), (SWEEP_STATE, "a sweep"),
                       (RECORD_STATE, "a statistical claim's run")):
        if name in held:
            return kind
    if not (checkpoint == RECORD_STATE and what.startswith("search ")) and \
            summary_text(out_dir, "mode") == "search":
        return "a statistical claim's search"
    return None


def summary_text(out_dir: Path, field: str) -> str | None:
    """The text a run directory's summary gives as ``field`` (``relation``, ``mode``), or None."""
    try:
        value = json.loads((out_dir / "summary.json").read_text()).get(field)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def note(message: str) -> None:
    """One line for the user on stderr (a resume point, a stale lock taken over)."""
    print(f"jaxpriv: {message}", file=sys.stderr, flush=True)


def writable_directory(path: str | os.PathLike, flag: str = "--out") -> Path:
    """``path`` as a directory that exists and can be written (created if needed), checked
    before any work starts; an InputError naming the problem otherwise."""
    path = Path(path).expanduser()
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} {path}: a file is there, not a directory; give a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot create the directory "
                         f"({error.strerror or error}); choose a path you can write") from None
    try:
        fd, probe = tempfile.mkstemp(dir=path, prefix=".jaxpriv-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise InputError(f"{flag} {path}: cannot write there ({error.strerror or error}); "
                         "choose a path you can write") from None
    return path


def _prepare(out_dir: Path | None, resume: bool, checkpoint: str, what: str) -> Path | None:
    """The resume guards of a (checked, locked) run directory: ``resume`` needs a directory,
    and a fresh run refuses a directory that already holds a ``what``'s checkpoint; then
    ``witnesses/`` is made and a killed writer's unfinished temp files are cleared."""
    if resume and out_dir is None:
        raise InputError("--resume needs --out DIR")
    if out_dir is not None:
        other = other_run(out_dir, checkpoint, what)
        if other is not None:
            raise InputError(f"{out_dir} holds {other}'s results, and a {what} would replace "
                             "them; use a new --out")
        if not resume and io.has_checkpoint(out_dir / checkpoint):
            raise InputError(f"{out_dir} already holds a {what}; use --resume, or a new --out")
        for litter in [*out_dir.glob(".*.tmp"), *out_dir.glob(f"{WITNESSES}/.*.tmp")]:
            litter.unlink(missing_ok=True)
        try:
            (out_dir / WITNESSES).mkdir(exist_ok=True)
        except OSError as error:
            raise InputError(f"--out {out_dir}: cannot create {WITNESSES}/ "
                             f"({error.strerror or error})") from None
    return out_dir


@contextlib.contextmanager
def run_directory(out: str | os.PathLike | None, resume: bool, checkpoint: str, what: str):
    """The run directory (created, writable, with ``witnesses/``; ``None`` for a run without
    one), held under its :func:`lock` for the run, after the resume guards: ``resume`` needs a
    directory, and a fresh run refuses one that already holds a ``what``'s checkpoint."""
    if out is None:
        yield _prepare(None, resume, checkpoint, what)
        return
    if group.size() > 1:
        with _group_directory(out, resume, checkpoint, what) as out_dir:
            yield out_dir
        return
    out_dir = writable_directory(out)
    with lock(out_dir, what):
        yield _prepare(out_dir, resume, checkpoint, what)


@contextlib.contextmanager
def _group_directory(out: str | os.PathLike, resume: bool, checkpoint: str, what: str):
    """:func:`run_directory` in a process group (:mod:`jaxpriv.engines.group`): the writer (rank 0)
    prepares and locks ``out`` as one process would; every other process works in a scratch
    directory of its own (:func:`jaxpriv.engines.group.scratch`), into which the writer's checkpoint
    (latest and previous copy) is copied when resuming, so the whole group resumes from the same
    state. A writer that cannot open its directory stops the group (:func:`group.writer_first`)."""
    @contextlib.contextmanager
    def writer():
        out_dir = writable_directory(out)
        with lock(out_dir, what):
            yield _prepare(out_dir, resume, checkpoint, what)

    @contextlib.contextmanager
    def other():
        # the command line already points a non-writer's --out into its scratch directory;
        # a library caller's directory is the writer's, so a fresh one is used instead
        private = Path(out) if group.in_scratch(out) else Path(
            tempfile.mkdtemp(prefix="run-", dir=group.scratch()))
        private.mkdir(parents=True, exist_ok=True)
        yield private

    with group.writer_first(writer, other, f"open its run directory for the {what}") as opened:
        for path in (opened / checkpoint, io.previous_path(opened / checkpoint)):
            mine = None
            if group.is_writer() and resume:
                try:
                    mine = path.read_bytes()
                except OSError:  # missing or unreadable: its own load says so
                    mine = None
            data = group.share_bytes(mine)
            if not group.is_writer() and data is not None:
                path.write_bytes(data)
        yield opened if group.is_writer() else _prepare(opened, resume, checkpoint, what)


def note_resumed(what: str, out_dir: Path, chunk: int, chunks: int, chunk_size: int, count: int,
                 unit: str, violations: int | None = None) -> None:
    """The line a resumed chunked run prints: where it continues."""
    found = "" if violations is None else f", {violations} verified violations so far"
    note(f"resuming {what} in {out_dir} at chunk {chunk} of {chunks} "
         f"({min(chunk * chunk_size, count):,} of {count:,} {unit} done{found})")


def save(out_dir: Path, name: str, state: Any, config: dict[str, Any],
         progress: dict[str, Any]) -> None:
    """Checkpoint a pytree ``state`` and a JSON progress record in one atomic file (the
    previous one kept until the next, see :func:`jaxpriv.engines.io.save_state`)."""
    io.save_state(out_dir / name, state, config, progress)


def load(out_dir: Path, name: str, like: Any, config: dict[str, Any]
         ) -> tuple[Any, dict[str, Any]]:
    """The state and progress record :func:`save` wrote (same ``config`` required), from the
    previous good checkpoint if the latest is damaged."""
    return io.load_state(out_dir / name, like, config, note=note)


def save_record(out_dir: Path, name: str, config: dict[str, Any], state: dict[str, Any]) -> None:
    """Checkpoint a JSON-only run state (atomic, read back before it replaces the previous
    one, which is kept until the next)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"config": json.loads(json.dumps(config)), "format": io.CHECKPOINT_FORMAT, **state}
    text = json.dumps(record)

    def verify(tmp: Path) -> None:
        if tmp.read_text() != text:
            raise OSError(f"{tmp}: the checkpoint read back differs from the one written")

    io.atomic_write(out_dir / name, lambda f: f.write(text), verify=verify,
                    keep_previous=io.readable(_read_record))


def load_record(out_dir: Path | None, name: str, config: dict[str, Any]) -> dict[str, Any]:
    """The JSON run state :func:`save_record` wrote (same ``config`` required), from the
    previous good one if the latest is damaged."""
    if out_dir is None:
        raise InputError("--resume needs --out DIR")
    path = out_dir / name
    if not io.has_checkpoint(path):
        raise InputError(f"{out_dir}: no checkpoint to resume (run without --resume first)")

    def read(file: Path) -> dict[str, Any]:
        record = _read_record(file)
        io.check_same_config(out_dir, record.pop("config"), config)
        record.pop("format", None)
        return record

    return io.read_latest(path, read, note=note)


def _read_record(file: Path) -> dict[str, Any]:
    """A JSON checkpoint of :data:`jaxpriv.engines.io.CHECKPOINT_FORMAT` with its settings; an
    InputError otherwise."""
    record = io.read_json(file)
    if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
        raise InputError(f"{file}: not a jaxpriv checkpoint (no settings in it)")
    io.check_format(file, record)
    return record


# --------------------------------------------------------------------------------------------
# one writer per run directory
# --------------------------------------------------------------------------------------------

LOCK = ".jaxpriv.lock"
"""The lock file of a run directory: held (``flock``) by the process writing it, and naming
that process (host, pid, what, since) for the message a second run gets."""

_HELD: dict[str, int] = {}  # resolved directory -> depth of this process's hold on it


def holder(directory: Path) -> dict[str, Any]:
    """What the lock file of ``directory`` says about its holder (``{}`` if nothing)."""
    try:
        found = json.loads((Path(directory) / LOCK).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _describe(found: dict[str, Any]) -> str:
    if not found:
        return "another process"
    return (f"{found.get('what', 'a run')} (pid {found.get('pid')} on {found.get('host')}, "
            f"since {found.get('since')})")


@contextlib.contextmanager
def lock(directory: Path, what: str):
    """Hold ``directory``'s lock for the ``with`` block: one writer per run directory.

    The lock is an ``flock`` on :data:`LOCK`, so the kernel releases it when its holder dies
    (even by ``kill -9``): a lock file left behind is stale by construction, and the next run
    takes it over (with a note naming the dead holder). Re-entrant within a process (the CLI
    holds ``--out`` while an engine locks the same directory).

    Args:
      directory: an existing directory.
      what: the run, as the refusal message names it (``"sweep R5"``); a held lock is waited
        for :data:`LOCK_WAIT` seconds before refusing.

    Raises:
      InputError: another live process holds it (its host and pid named).

    Examples:
      >>> import tempfile
      >>> from pathlib import Path
      >>> from jaxpriv.engines import runstate
      >>> run = Path(tempfile.mkdtemp())
      >>> with runstate.lock(run, "sweep R5"):
      ...     print(runstate.holder(run)["what"], (run / runstate.LOCK).exists())
      sweep R5 True
      >>> (run / runstate.LOCK).exists()  # released
      False
    """
    key = str(Path(directory).resolve())
    fd = None if key in _HELD else _acquire(Path(directory), what, LOCK_WAIT)
    _HELD[key] = _HELD.get(key, 0) + 1
    try:
        yield
    finally:
        _HELD[key] -= 1
        if not _HELD[key]:
            del _HELD[key]
            _release(Path(directory), fd)


LOCK_WAIT = 0.0
"""Seconds a run waits for a locked directory before refusing (the audit's workers wait a
little longer, for a worker of a killed audit to notice and stop)."""


def _acquire(directory: Path, what: str, wait: float) -> int | None:
    try:
        import fcntl
    except ImportError:  # no flock on this platform: runs are not serialized
        return None
    path = directory / LOCK
    deadline = time.monotonic() + wait
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise InputError(f"{directory}: cannot create the lock file {LOCK} "
                             f"({error.strerror or error})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() < deadline:
                time.sleep(0.1)
                continue
            raise InputError(f"{directory} is in use by {_describe(holder(directory))}; wait "
                             "for it to finish, or use another --out") from None
        except OSError as error:  # a filesystem without locks: carry on unserialized
            note(f"{directory}: cannot lock it ({error.strerror or error}); nothing stops "
                 "another run from writing it too")
            return fd
        try:  # the file may have been removed by its last holder since we opened it
            now, mine = os.stat(path), os.fstat(fd)
            same = (now.st_ino, now.st_dev) == (mine.st_ino, mine.st_dev)
        except FileNotFoundError:
            same = False
        if not same:
            os.close(fd)
            if time.monotonic() > deadline + 10:
                raise InputError(f"{directory}: its lock file keeps changing; is another "
                                 "jaxpriv run starting there?")
            time.sleep(0.01)
            continue
        try:
            stale = holder(directory)
            if stale:
                note(f"{directory}: taking over the lock of {_describe(stale)}, which is no "
                     "longer running")
            record = {"host": socket.gethostname(), "pid": os.getpid(), "what": what,
                      "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
        except BaseException:
            os.close(fd)  # releases the lock: this process must not lock itself out
            raise
        return fd


def _release(directory: Path, fd: int | None) -> None:
    if fd is None:
        return
    try:  # remove the file while still holding it: a waiter that opened it retries
        (directory / LOCK).unlink(missing_ok=True)
    finally:
        os.close(fd)


def progress_bar(total: int, initial: int, unit: str, desc: str, enabled: bool = True):
    """A tqdm bar on stderr (``None`` when disabled)."""
    if not enabled:
        return None
    from tqdm.auto import tqdm
    return tqdm(total=total, initial=initial, unit=unit, unit_scale=True, desc=desc,
                smoothing=0.1, dynamic_ncols=True)


_SCRATCH: list[Path] = []


def witness_path(out_dir: Path | None, name: str) -> Path:
    """Where a witness named ``name`` goes: the run directory's ``witnesses/``, or, for a run
    without one, a temporary directory of this process's own (two runs never share files)."""
    if out_dir is None:
        if not _SCRATCH:
            _SCRATCH.append(Path(tempfile.mkdtemp(prefix="jaxpriv-witnesses-")))
        base = _SCRATCH[0]
    else:
        base = out_dir
    path = base / WITNESSES / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def keep(found: dict[str, Any], out_dir: Path | None) -> dict[str, Any]:
    """A verified witness as the run reports it: its file relative to the run directory, or no
    file (and none left behind) for a run without one."""
    if found.get("file") is None:
        return found
    if out_dir is None:
        Path(found["file"]).unlink(missing_ok=True)
        found["file"] = None
    else:
        found["file"] = str(Path(found["file"]).relative_to(out_dir))
    return found


def levels_dict(result) -> dict[str, float]:
    """The float levels of a one-mechanism :class:`jaxpriv.registry.CheckResult`."""
    return {"premise": float(result.premise), "parameter": float(result.parameter),
            "conclusion": float(result.conclusion), "bound": float(result.bound),
            "slack": float(result.slack)}


def verify_witness(relation, mech: Mechanism, options: dict[str, Any], path: Path, index: int
                   ) -> dict | None:
    """Re-check ``mech`` in float64; if it violates the relation, save it as a witness JSON,
    re-read the file and re-check that; return its levels, or ``None`` (no file left behind)
    if the violation does not survive."""
    result = relation.check(mech, **options)
    if not bool(result.violated):
        return None
    io.save_mechanism(path, mech, relation=relation.id, index=int(index), **options,
                      claimed=levels_dict(result))
    reloaded, saved = io.load_mechanism(path)
    again = relation.check(reloaded, **{k: saved.get(k) for k in options})
    if not bool(again.violated):
        path.unlink()
        return None
    return {"file": str(path), "index": int(index), **levels_dict(again)}


def verify_setting(relation, fields: dict[str, Any], path: Path | None) -> dict | None:
    """The statistical counterpart: re-check a setting from scratch; if violated, save it (when
    ``path`` is given), re-read and re-check; ``None`` if the violation does not survive."""
    checked = relation.check(**fields)
    if not bool(checked.violated):
        return None
    found = {"file": None, **levels_dict(checked), **fields}
    if path is not None:
        io.atomic_write(path, lambda f: json.dump({"relation": relation.id, **fields}, f,
                                                  indent=1))
        again = relation.check(**{k: v for k, v in io.read_json(path).items()
                                  if k != "relation"})
        if not bool(again.violated):
            path.unlink()
            return None
        found["file"] = str(path)
    return found


class Progress(NamedTuple):
    """What a chunked run has found so far (checkpointed with its state)."""

    violations: list
    violation_count: int
    seconds: float


def run_chunks(first: int, stop: int, step, verify, save, progress: Progress, *,
               max_witnesses: int, bar=None, size=lambda chunk_index: 1) -> Progress:
    """The chunk loop every sweep runs, whatever its subject (mechanisms or settings).

    For each chunk: ``step(chunk_index)`` advances the engine's own state and returns the hits
    its float64 screen found, as ``(index, payload)`` pairs; each hit is re-verified from
    scratch by ``verify(index, payload)`` (``None`` if the violation does not survive) and
    saved, up to ``max_witnesses`` — past the cap the screen's float64 recomputation is the
    verification, and the hit is counted only; then ``save(next_chunk, progress)`` checkpoints
    (so a killed run loses at most the chunk in flight) and the progress bar moves.

    Args:
      first, stop: chunks ``first .. stop − 1``.
      step, verify, save: the engine's callbacks, as above.
      progress: what earlier chunks found (a resumed run's checkpoint).
      max_witnesses: verified violations saved as files.
      bar: a progress bar or ``None``; ``size(chunk_index)`` subjects per chunk.

    Returns:
      the :class:`Progress` after chunk ``stop − 1``.
    """
    violations = list(progress.violations)
    count, seconds = int(progress.violation_count), float(progress.seconds)
    for chunk_index in range(first, stop):
        began = time.perf_counter()
        for index, payload in step(chunk_index):
            if len(violations) >= max_witnesses:
                count += 1
                continue
            found = verify(index, payload)
            if found is not None:
                count += 1
                violations.append(found)
        seconds += time.perf_counter() - began
        save(chunk_index + 1, Progress(violations, count, seconds))
        if bar is not None:
            bar.update(size(chunk_index))
            bar.set_postfix(violations=count)
    if bar is not None:
        bar.close()
    return Progress(violations, count, seconds)
