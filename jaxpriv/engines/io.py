"""The mechanism / witness JSON format of SPEC §4.

``{"K": [[...], ...], "prior": [...], "belief": [...], "values": [...],
"records": {"k": 2, "r": 3, "default": 0}}`` — only ``K`` is required. A witness adds
``"relation"`` and whatever its relation needs to be re-checked (``"q"``, ``"mu"``, ``"alpha"``,
``"beta"``, ``"d_true"``, ``"eps"``, ``"law"``, …); those come back as ``extras``.

Files are read and written in float64 (the verification precision); infinite numbers are written
as ``Infinity``, which Python's ``json`` reads back.

Also read here, for every layer above: a run directory's ``envelope.csv``
(:func:`read_envelope`; written by :mod:`jaxpriv.report.files`) and the software versions a
run records (:func:`versions`).
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import platform
import tempfile
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from jaxpriv.core.errors import InputError
from jaxpriv.core.mechanisms import Mechanism, Records

MECHANISM_KEYS = ("K", "prior", "belief", "values", "records")


def mechanism_from_dict(data: Any) -> tuple[Mechanism, dict[str, Any]]:
    """Parse the SPEC §4 dictionary; returns the float64 mechanism and the remaining keys.

    Must be called with float64 enabled (``jax.enable_x64(True)``) to keep full precision.

    Raises:
      InputError: naming the missing or malformed field.
    """
    if not isinstance(data, dict):
        raise InputError(f"the JSON top level must be an object with a 'K' field, "
                         f"got {type(data).__name__}")
    if "K" not in data:
        raise InputError("the JSON object has no 'K' field (the mechanism matrix)")
    for key in ("K", "prior", "belief", "values"):
        if key in data and not _is_numeric_tree(data[key]):
            raise InputError(f"'{key}' must be an array of numbers")
    records = _records_from(data.get("records"))
    try:
        K = np.asarray(data["K"], dtype=np.float64) if _is_rectangular(data["K"]) else None
    except OverflowError:  # an integer literal beyond float64 (a 400-digit one)
        raise InputError("'K' has a number too large for a float64") from None
    if K is None or K.ndim != 2:
        raise InputError("'K' must be a matrix: a list of rows of equal length")
    mech = Mechanism.from_K(K, data.get("prior"), data.get("belief"), data.get("values"),
                            records=records, dtype=np.float64)
    extras = {k: v for k, v in data.items() if k not in MECHANISM_KEYS}
    return mech, extras


def mechanism_to_dict(mech: Mechanism, **extras: Any) -> dict[str, Any]:
    """The SPEC §4 dictionary of one (unbatched) mechanism, plus ``extras``."""
    if mech.batch_shape:
        raise InputError(f"only one mechanism fits a JSON file; this one has batch shape "
                         f"{mech.batch_shape} (index it first)")
    out: dict[str, Any] = {
        "K": np.exp(np.asarray(mech.log_K, np.float64)).tolist(),
        "prior": np.exp(np.asarray(mech.log_prior, np.float64)).tolist(),
        "belief": np.exp(np.asarray(mech.log_belief, np.float64)).tolist(),
    }
    if mech.values is not None:
        out["values"] = np.asarray(mech.values, np.float64).tolist()
    if mech.records is not None:
        r = mech.records
        out["records"] = {"k": r.k, "r": r.r, "default": r.default}
    out.update({k: _plain(v) for k, v in extras.items()})
    return out


def read_json(path: str | os.PathLike) -> Any:
    """The parsed JSON of ``path``; an InputError naming the file and the problem otherwise."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a JSON file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read ({e.__class__.__name__}: {e})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}"
                         ) from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to read") from None
    return data


def load_mechanism(path: str | os.PathLike) -> tuple[Mechanism, dict[str, Any]]:
    """Read a mechanism or witness file (float64); see :func:`mechanism_from_dict`."""
    data = read_json(path)
    with jax.enable_x64(True), about(path):
        return mechanism_from_dict(data)


@contextlib.contextmanager
def about(path: str | os.PathLike):
    """InputErrors raised in the block name the file ``path`` (once): what is wrong is in it."""
    try:
        yield
    except InputError as error:
        if str(error).startswith(str(path)):
            raise
        raise InputError(f"{path}: {error}") from None


def save_mechanism(path: str | os.PathLike, mech: Mechanism, **extras: Any) -> Path:
    """Write a mechanism (plus witness ``extras``) atomically: a killed write leaves no half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(mechanism_to_dict(mech, **extras), indent=1)
    atomic_write(path, lambda f: f.write(text + "\n"))
    return path


def atomic_write(path: Path, write: Callable[[Any], Any], mode: str = "w", *,
                 newline: str | None = None, verify: Callable[[Path], Any] | None = None,
                 keep_previous: Callable[[Path], bool] | None = None) -> None:
    """Write ``path`` through ``write(file)`` so that a reader (or a kill) sees the old file or
    the complete new one, never a half-written one: temp file, fsync, rename.

    Args:
      path: the file to (re)write.
      write: writes the content to the open temp file.
      mode: ``"w"`` (text) or ``"wb"``.
      newline: as :func:`open`'s (``""`` for the csv module).
      verify: called with the temp file's path once it is complete; whatever it raises stops the
        write with the old file untouched (a checkpoint is read back before it replaces one).
      keep_previous: ``good(old_file) -> bool``; if given, the old file, when ``good``, is
        moved to :func:`previous_path` first, so a good copy survives even if the new one is
        later damaged (a checkpoint's fallback, see :func:`read_latest`); a damaged old file
        is replaced without displacing the good previous one.

    Raises:
      OSError: the write failed (a full disk, a read-only directory); the old file is intact
        and no temp file is left behind.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode, newline=newline) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if verify is not None:
            verify(Path(tmp))
        if keep_previous is not None and path.exists() and keep_previous(path):
            os.replace(path, previous_path(path))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def previous_path(path: Path) -> Path:
    """Where :func:`atomic_write` keeps the file it replaced (``checkpoint.npz`` →
    ``checkpoint.previous.npz``)."""
    return path.with_name(f"{path.stem}.previous{path.suffix}")


def has_checkpoint(path: Path) -> bool:
    """Whether there is a checkpoint ``path`` to resume: the file or its previous copy."""
    return path.exists() or previous_path(path).exists()


def read_latest(path: Path, read: Callable[[Path], Any],
                note: Callable[[str], None] | None = None) -> Any:
    """``read(path)``, or, when that file is missing or damaged, ``read`` of the copy
    :func:`atomic_write` kept (``keep_previous``), with a note saying so.

    ``read`` raises :class:`InputError` for a damaged file. If both are unreadable the error
    names the latest one's problem (the run cannot be resumed from either)."""
    previous = previous_path(path)
    try:
        return read(path)
    except SettingsMismatch:
        raise  # the run's own arguments differ: so do the previous checkpoint's
    except InputError as error:
        if not previous.exists():
            raise
        try:
            found = read(previous)
        except InputError as second:
            # both: say so, and what is left to do (it said only the latest one's problem)
            why = str(second).removeprefix(f"{previous}: ")
            raise InputError(f"{error}; the previous checkpoint, {previous.name}, cannot be "
                             f"used either ({why}): neither can be resumed from, start the run "
                             "again with a new --out") from None
        if note is not None:
            note(f"{error}; using the previous good checkpoint, {previous.name}")
        return found


def _records_from(value) -> Records | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not {"k", "r"} <= set(value):
        raise InputError("'records' must be an object with integer fields 'k', 'r' (and 'default')")
    fields = {key: value.get(key, 0) for key in ("k", "r", "default")}
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in fields.values()):
        raise InputError("'records' fields k, r, default must be integers")
    return Records(**fields)


def _is_numeric_tree(x) -> bool:
    if isinstance(x, list):
        return all(_is_numeric_tree(v) for v in x)
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_rectangular(x) -> bool:
    if not isinstance(x, list) or not x:
        return False
    lengths = {len(row) if isinstance(row, list) else -1 for row in x}
    return len(lengths) == 1 and -1 not in lengths


def _plain(v):
    if isinstance(v, (np.ndarray, jax.Array)):
        return np.asarray(v).tolist()
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, float) and math.isnan(v):
        raise InputError("refusing to write NaN into a witness file")
    return v


CHECKPOINT_FORMAT = 2
"""Version of the checkpoint layout (npz leaves + JSON record); a checkpoint of another format
is refused with a message instead of being misread (1: before formats were recorded)."""


def save_state(path: Path, state: Any, config: dict[str, Any], progress: dict[str, Any]) -> None:
    """A run's checkpoint: the leaves of the ``state`` pytree and a JSON record (``config`` and
    ``progress``) in **one** npz file, written atomically — two files written one after the
    other could be split by a ``kill -9``, pairing a state with the record of another step.

    The new file is read back and checked before it replaces the old one, which is kept as
    :func:`previous_path` until the next checkpoint: a damaged latest file (a full disk, a copy
    cut short) never costs more than one step."""
    from jaxpriv.core.version import __version__

    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(state)]
    arrays = {f"a{i}": leaf for i, leaf in enumerate(leaves)}
    arrays["meta"] = np.asarray(json.dumps({"config": config, "format": CHECKPOINT_FORMAT,
                                            "jaxpriv": __version__, **progress}))

    def verify(tmp: Path) -> None:
        read = _read_state(tmp, len(leaves))
        if any(a.shape != b.shape or a.dtype != b.dtype for a, b in zip(read[1], leaves)):
            raise OSError(f"{tmp}: the checkpoint read back differs from the one written")

    # the old file was read back when it was written: whether it is still a whole archive with
    # its record is enough to keep it as the previous one (its arrays are not loaded again)
    atomic_write(path, lambda f: np.savez(f, **arrays), mode="wb", verify=verify,
                 keep_previous=readable(lambda old: _read_state(old, len(leaves), arrays=False)))


def readable(read: Callable[[Path], Any]) -> Callable[[Path], bool]:
    """``path -> bool``: whether ``read(path)`` succeeds (raises no :class:`InputError`)."""
    def good(path: Path) -> bool:
        try:
            read(path)
        except InputError:
            return False
        return True
    return good


ADDED_SETTINGS: dict[str, Any] = {"prior": ""}
"""Settings later versions added, with the value every earlier run implicitly had (a search's
``prior`` override): a saved config without one counts as having that value."""


def same_config(saved: Any, config: dict[str, Any]) -> bool:
    """Whether a saved config (JSON) is ``config``, allowing for :data:`ADDED_SETTINGS`."""
    config = json.loads(json.dumps(config))
    if isinstance(saved, dict):
        saved = {**{k: v for k, v in ADDED_SETTINGS.items() if k in config}, **saved}
    return saved == config


def check_same_config(run_dir: Path, saved: Any, config: dict[str, Any]) -> None:
    """An InputError naming the settings that differ unless a checkpoint's ``saved`` config is
    ``config`` (compared as JSON: tuples as lists, as they were saved; see
    :data:`ADDED_SETTINGS`)."""
    if not same_config(saved, config):
        config = json.loads(json.dumps(config))
        saved = {**ADDED_SETTINGS, **saved} if isinstance(saved, dict) else {}
        differing = sorted(k for k, v in config.items() if saved.get(k) != v)
        # derived: candidates follow from chunk and block, and the chunk is rounded to whole
        # blocks (--memory-mb alone moves all three)
        derived = {"candidates", "chunk"} if "block" in differing else {"candidates"} \
            if "chunk" in differing else set()
        differing = [k for k in differing if k not in derived]
        # named by the options that set them (it said "block, candidates", set by none); a
        # setting no option sets by its name
        flags = dict.fromkeys(_SETTING_FLAGS.get(k, k) for k in differing)
        raise SettingsMismatch(f"{run_dir}: the checkpoint was made with different settings "
                         f"({', '.join(flags) or 'another kind of run'}); resume with the "
                         "same arguments, or start a new --out")


class SettingsMismatch(InputError):
    """A checkpoint made with other settings than the run resuming it."""


OPTION_SETTINGS = {"relation": "relation", "n": "n", "m": "m", "count": "count", "seed": "seed",
                   "chunk": "chunk", "memory_mb": "block", "bins": "x_bins", "grid": "grid",
                   "param": "param", "law": "law", "prior": "prior", "restarts": "restarts",
                   "steps": "steps", "lr": "learning_rate", "k": "k", "r": "r",
                   "t_max": "t_max", "draws": "draws"}
"""The run setting each option of ``sweep`` and ``search`` sets (``--memory-mb``: the block)."""
_SETTING_FLAGS = {setting: "--" + option.replace("_", "-")
                  for option, setting in OPTION_SETTINGS.items()}


def check_format(path: Path, meta: dict[str, Any]) -> None:
    """An InputError unless a checkpoint record ``meta`` is of :data:`CHECKPOINT_FORMAT`."""
    found = meta.get("format", 1)
    if found != CHECKPOINT_FORMAT:
        writer = f"jaxpriv {meta['jaxpriv']}" if "jaxpriv" in meta else "an earlier jaxpriv"
        raise InputError(f"{path}: a checkpoint of format {found} (written by {writer}); "
                         f"this jaxpriv reads format "
                         f"{CHECKPOINT_FORMAT}: finish that run with the version that started "
                         "it, or start a new --out")


def _read_state(path: Path, count: int | None = None, arrays: bool = True
                ) -> tuple[dict[str, Any], list[np.ndarray]]:
    """The JSON record and array leaves of a checkpoint file (no leaves unless ``arrays``);
    InputError if it is not one."""
    import zipfile

    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):  # a .npy array, not an archive
            raise InputError(f"{path}: not a jaxpriv checkpoint (an array, not an archive)")
        with loaded as data:
            if "meta" not in data.files:
                raise InputError(f"{path}: not a jaxpriv checkpoint (no record in it)")
            meta = json.loads(str(data["meta"]))
            n = len(data.files) - 1
            if sorted(data.files) != sorted(["meta"] + [f"a{i}" for i in range(n)]) or (
                    count is not None and n != count):
                raise InputError(f"{path}: not a checkpoint of this kind of run")
            leaves = [np.asarray(data[f"a{i}"]) for i in range(n)] if arrays else []
    except InputError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile,
            json.JSONDecodeError) as error:
        raise InputError(f"{path}: unreadable checkpoint ({type(error).__name__}: {error})"
                         ) from None
    if not isinstance(meta, dict) or not isinstance(meta.get("config"), dict):
        raise InputError(f"{path}: not a jaxpriv checkpoint (its record has no settings)")
    return meta, leaves


def load_state(path: Path, like: Any, config: dict[str, Any],
               note: Callable[[str], None] | None = None) -> tuple[Any, dict[str, Any]]:
    """The state (shaped like the pytree ``like``) and progress record saved by :func:`save_state`
    — from the previous good checkpoint if the latest is damaged (``note`` says so); an
    InputError if neither is readable, or it is of another format, kind of run or ``config``."""
    if not has_checkpoint(path):
        raise InputError(f"{path.parent}: no checkpoint to resume (run without --resume first)")
    like_leaves, treedef = jax.tree_util.tree_flatten(like)

    def read(file: Path):
        meta, leaves = _read_state(file)
        check_format(file, meta)
        check_same_config(path.parent, meta["config"], config)
        if len(leaves) != len(like_leaves) or any(
                a.shape != np.shape(b) or a.dtype != np.asarray(b).dtype
                for a, b in zip(leaves, like_leaves)):
            raise InputError(f"{file}: not a checkpoint of this kind of run, or one written by "
                             "a jaxpriv whose run state held other arrays (its arrays differ): "
                             "finish it with the version that started it, or start a new --out")
        return meta, leaves

    meta, leaves = read_latest(path, read, note=note)
    progress = {k: v for k, v in meta.items() if k not in ("config", "format", "jaxpriv")}
    return jax.tree_util.tree_unflatten(treedef, [jax.numpy.asarray(a) for a in leaves]), progress


# --------------------------------------------------------------------------------------------
# run directories: the envelope a finished run wrote, the versions it records
# --------------------------------------------------------------------------------------------


def read_envelope(run_dir: Path) -> list[dict]:
    """The rows of a run directory's ``envelope.csv`` (numbers as floats, blanks as NaN)."""
    path = run_dir / "envelope.csv"
    if not path.exists():
        raise InputError(f"{run_dir}: no envelope.csv (is it a finished sweep or search?)")
    try:
        with open(path) as f:
            return [{k: (v if k == "witness" else (np.nan if v == "" else float(v)))
                     for k, v in row.items()} for row in csv.DictReader(f)]
    except (ValueError, TypeError, UnicodeDecodeError, csv.Error) as error:
        raise InputError(f"{path}: not an envelope jaxpriv wrote ({type(error).__name__}: "
                         f"{error})") from None


def versions() -> dict[str, str]:
    """The software a run's ``summary.json`` records (``versions``): jaxpriv, JAX, NumPy, optax,
    matplotlib, Python and the native kernel's state."""
    import matplotlib
    import optax

    from jaxpriv.core.version import __version__
    from jaxpriv.kernels import native
    # Which float32 screen ran: the native and XLA kernels agree to rounding, not bitwise.
    return {"jaxpriv": __version__, "jax": jax.__version__, "numpy": np.__version__,
            "optax": optax.__version__, "matplotlib": matplotlib.__version__,
            "python": platform.python_version(), "native_kernel": native.state()}
