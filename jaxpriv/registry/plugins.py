"""Plugins: files (:func:`load_plugin`, ``--plugin FILE.py``) and installed packages' entry
points in the group :data:`PLUGIN_GROUP` (:func:`load_plugins`) that register their own notions
and relations, and :func:`plugin_error`, which names the plugin's line where its code fails.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from jaxpriv.core.errors import InputError

PLUGIN_GROUP = "jaxpriv.plugins"
"""Entry-point group through which installed packages register notions and relations."""

LOADED_PLUGINS: list[str] = []
"""Plugin files loaded in this process (absolute paths), in order; worker processes load the
same ones."""


LOADED_ENTRY_POINTS: list[str] = []
"""Installed packages' ``jaxpriv.plugins`` entry points loaded in this process, by name."""


def load_plugin(path: str | Path) -> None:
    """Run a plugin file (it registers its notions and relations with :func:`register`).

    Any failure — a missing file, a syntax error, an exception while it runs, a malformed
    record — is an :class:`InputError` naming the file."""
    path = Path(path).expanduser()
    resolved = str(path.resolve())
    if resolved in LOADED_PLUGINS:
        return
    if not path.is_file():
        raise InputError(f"plugin {path}: no such file")
    name = "jaxpriv_plugin_" + re.sub(r"\W", "_", path.stem) + f"_{len(LOADED_PLUGINS)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"plugin {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except InputError as error:
        sys.modules.pop(name, None)
        raise InputError(f"plugin {path}: {error}") from None
    except SyntaxError as error:
        sys.modules.pop(name, None)
        raise InputError(f"plugin {path}: syntax error at line {error.lineno}: "
                         f"{error.msg}") from None
    except (Exception, SystemExit) as error:  # the plugin's own code: report it, do not crash
        # (SystemExit too: a plugin's `raise SystemExit(0)`, or its own argparse reading
        # jaxpriv's command line, ended jaxpriv with the plugin's status and no word of it — a
        # check that finds a violation exited 0)
        sys.modules.pop(name, None)
        line = _plugin_line(error, path)
        when = " (while it was loaded)" if isinstance(error, SystemExit) else ""
        raise InputError(f"plugin {path}{line}: {type(error).__name__}: {error}{when}") from None
    LOADED_PLUGINS.append(resolved)


def _plugin_line(error: BaseException, path: Path) -> str:
    frame = _plugin_frame(error, [path])
    return "" if frame is None else f" (line {frame.lineno})"


def _plugin_frame(error: BaseException, files) -> Any:
    """The innermost traceback frame of ``error`` in one of ``files`` (``None`` if none)."""
    import traceback

    wanted = {str(Path(f).resolve()) for f in files}
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if str(Path(f.filename).resolve()) in wanted]
    return frames[-1] if frames else None


def plugin_error(error: BaseException) -> InputError | None:
    """An exception raised by a loaded plugin's own code while jaxpriv ran it, as one-line
    :class:`InputError` naming the plugin file, line and function; ``None`` if no plugin frame
    is in its traceback (then it is jaxpriv's)."""
    frame = _plugin_frame(error, LOADED_PLUGINS)
    if frame is None:
        return None
    first = (str(error).strip().splitlines() or [""])[0]  # JAX's messages run to many lines
    return InputError(f"plugin {frame.filename} (line {frame.lineno}, in {frame.name}): "
                      f"{type(error).__name__}: {first}; fix the plugin")


def load_plugins(files=(), entry_points: bool = True) -> None:
    """Load plugin files and (optionally) every installed ``jaxpriv.plugins`` entry point.

    An entry point names a module (imported; it registers on import) or a callable (called)."""
    for file in files or ():
        load_plugin(file)
    if not entry_points:
        return
    from importlib.metadata import entry_points as find

    for point in find(group=PLUGIN_GROUP):
        LOADED_ENTRY_POINTS.append(point.name)
        try:
            loaded = point.load()
            if callable(loaded):
                loaded()
        except InputError as error:
            raise InputError(f"plugin {point.name} ({point.value}): {error}") from None
        except (Exception, SystemExit) as error:
            raise InputError(f"plugin {point.name} ({point.value}): {type(error).__name__}: "
                             f"{error}") from None
