"""The mechanism / witness JSON format of SPEC §4.

``{"K": [[...], ...], "prior": [...], "belief": [...], "values": [...],
"records": {"k": 2, "r": 3, "default": 0}}`` — only ``K`` is required. A witness adds
``"relation"`` and whatever its relation needs to be re-checked (``"q"``, ``"mu"``, ``"alpha"``,
``"beta"``, ``"d_true"``, ``"eps"``, ``"law"``, …); those come back as ``extras``.

Files are read and written in float64 (the verification precision); infinite numbers are written
as ``Infinity``, which Python's ``json`` reads back.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

import jax
import numpy as np

from jaxpriv.errors import InputError
from jaxpriv.mechanisms import Mechanism, Records

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
    K = np.asarray(data["K"], dtype=np.float64) if _is_rectangular(data["K"]) else None
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
    return data


def load_mechanism(path: str | os.PathLike) -> tuple[Mechanism, dict[str, Any]]:
    """Read a mechanism or witness file (float64); see :func:`mechanism_from_dict`."""
    data = read_json(path)
    with jax.enable_x64(True):
        try:
            return mechanism_from_dict(data)
        except InputError as e:
            raise InputError(f"{path}: {e}") from None


def save_mechanism(path: str | os.PathLike, mech: Mechanism, **extras: Any) -> Path:
    """Write a mechanism (plus witness ``extras``) atomically: a killed write leaves no half file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(mechanism_to_dict(mech, **extras), indent=1)
    atomic_write(path, lambda f: f.write(text + "\n"))
    return path


def atomic_write(path: Path, write: Callable[[Any], Any], mode: str = "w") -> None:
    """Write ``path`` through ``write(file)`` so that a reader (or a kill) sees the old file or
    the complete new one, never a half-written one: temp file, fsync, rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


def save_state(path: Path, state: Any, config: dict[str, Any], progress: dict[str, Any]) -> None:
    """A run's checkpoint: the leaves of the ``state`` pytree and a JSON record (``config`` and
    ``progress``) in **one** npz file, written atomically — two files written one after the
    other could be split by a ``kill -9``, pairing a state with the record of another step."""
    arrays = {f"a{i}": np.asarray(leaf) for i, leaf in enumerate(jax.tree_util.tree_leaves(state))}
    arrays["meta"] = np.asarray(json.dumps({"config": config, **progress}))
    atomic_write(path, lambda f: np.savez(f, **arrays), mode="wb")


def check_same_config(run_dir: Path, saved: Any, config: dict[str, Any]) -> None:
    """An InputError naming the settings that differ unless a checkpoint's ``saved`` config is
    ``config`` (compared as JSON: tuples as lists, as they were saved)."""
    config = json.loads(json.dumps(config))
    if saved != config:
        differing = sorted(k for k, v in config.items() if (saved or {}).get(k) != v)
        raise InputError(f"{run_dir}: the checkpoint was made with different settings "
                         f"({', '.join(differing)}); resume with the same arguments")


def load_state(path: Path, like: Any, config: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The state (shaped like the pytree ``like``) and progress record saved by :func:`save_state`;
    an InputError if the file is missing or unreadable, or was written with another ``config``."""
    if not path.exists():
        raise InputError(f"{path.parent}: no checkpoint to resume (run without --resume first)")
    try:
        with np.load(path) as data:
            meta = json.loads(str(data["meta"]))
            leaves = [jax.numpy.asarray(data[f"a{i}"]) for i in range(len(data.files) - 1)]
    except (OSError, ValueError, KeyError) as error:
        raise InputError(f"{path}: unreadable checkpoint ({error})") from None
    check_same_config(path.parent, meta["config"], config)
    treedef = jax.tree_util.tree_structure(like)
    progress = {k: v for k, v in meta.items() if k != "config"}
    return jax.tree_util.tree_unflatten(treedef, leaves), progress
