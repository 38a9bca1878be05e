"""Run state shared by every engine: run directories, checkpoints and resume, progress bars, and
the witness round trip (float64 re-check → save → re-read → re-check).

The sweep (:mod:`jaxpriv.sweep`), the search (:mod:`jaxpriv.search`) and the statistical engine
(:mod:`jaxpriv.statistical_audit`) all keep their state through this module, so a run killed at
any point resumes to exactly the uninterrupted result, and a witness is reported only if the
file on disk, read back, still violates the claim.

Examples:
  >>> from jaxpriv import runstate
  >>> runstate.progress_bar(10, 0, "mech", "sweep R1", enabled=False) is None
  True
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

from jaxpriv import io
from jaxpriv.errors import InputError
from jaxpriv.mechanisms import Mechanism

WITNESSES = "witnesses"


def prepare(out: str | os.PathLike | None, resume: bool, checkpoint: str, what: str
            ) -> Path | None:
    """The run directory (created, with ``witnesses/``), after the resume guards: ``resume``
    needs a directory, and a fresh run refuses a directory that already holds a ``what``'s
    checkpoint."""
    out_dir = Path(out) if out is not None else None
    if resume and out_dir is None:
        raise InputError("--resume needs --out DIR")
    if out_dir is not None:
        if out_dir.exists() and not out_dir.is_dir():
            raise InputError(f"--out {out_dir}: a file is there, not a directory")
        try:
            (out_dir / WITNESSES).mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise InputError(f"--out {out_dir}: cannot create the run directory "
                             f"({error.strerror or error})") from None
        if not resume and (out_dir / checkpoint).exists():
            raise InputError(f"{out_dir} already holds a {what}; use --resume, or a new --out")
    return out_dir


def save(out_dir: Path, name: str, state: Any, config: dict[str, Any],
         progress: dict[str, Any]) -> None:
    """Checkpoint a pytree ``state`` and a JSON progress record in one atomic file."""
    io.save_state(out_dir / name, state, config, progress)


def load(out_dir: Path, name: str, like: Any, config: dict[str, Any]
         ) -> tuple[Any, dict[str, Any]]:
    """The state and progress record :func:`save` wrote (same ``config`` required)."""
    return io.load_state(out_dir / name, like, config)


def save_record(out_dir: Path, name: str, config: dict[str, Any], state: dict[str, Any]) -> None:
    """Checkpoint a JSON-only run state (atomic)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    record = {"config": json.loads(json.dumps(config)), **state}
    io.atomic_write(out_dir / name, lambda f: json.dump(record, f))


def load_record(out_dir: Path | None, name: str, config: dict[str, Any]) -> dict[str, Any]:
    """The JSON run state :func:`save_record` wrote (same ``config`` required)."""
    if out_dir is None:
        raise InputError("--resume needs --out DIR")
    path = out_dir / name
    if not path.exists():
        raise InputError(f"{out_dir}: no checkpoint to resume (run without --resume first)")
    record = io.read_json(path)
    io.check_same_config(out_dir, record.pop("config", None), config)
    return record


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
