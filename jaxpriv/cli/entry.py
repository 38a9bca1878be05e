"""The ``jaxpriv`` command's entry point: :func:`main` parses the arguments
(:mod:`jaxpriv.cli.parser`), loads the plugins, runs the command (:mod:`jaxpriv.cli.commands`,
:mod:`jaxpriv.cli.runs`), and turns every failure into its exit status: one line on stderr and
2 for what a user can cause, a traceback and 3 for a bug in jaxpriv, 130 interrupted."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from jaxpriv.cli import commands, jaxsetup, listings, runs
from jaxpriv.cli.parser import _parser, given_options
from jaxpriv.core.errors import InputError

ONE_SHOT = ("eval", "check", "show", "compose")
"""Commands that compile programs but start no run: they use the persistent compilation cache
too (``jaxpriv eval`` of a 4×4 mechanism compiles 81 programs, 12.5 s every time without it;
:func:`jaxpriv.cli.jaxsetup.use_compilation_cache`)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a batch scheduler's notice), unwound as Ctrl-C is: a run keeps its
    finished work, releases its lock and says how to resume (it ended silently, exit 143)."""


def _terminate(signum, frame):
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; every failure a user can cause is one line on stderr and exit 2.

    Only a bug in jaxpriv shows a traceback, followed by a line asking to report it (exit 3).
    SIGINT exits 130 and SIGTERM 143, each with one line on what was kept."""
    import signal
    import threading

    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return _main(argv)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _main(argv: Sequence[str] | None) -> int:
    try:
        args = _parser().parse_args(argv)
        args.given = given_options(sys.argv[1:] if argv is None else argv)
        if args.version:
            from jaxpriv.core.version import __version__
            print(__version__)
            return 0
        if args.command is None:
            _parser().print_usage(sys.stderr)
            return _fail("give a command (eval, check, sweep, search, audit, show, compose, "
                         "relations, notions); see 'jaxpriv --help'")
        from jaxpriv import registry

        for name in ("out", "sweep"):  # '--out=~/x' reaches us unexpanded
            if isinstance(getattr(args, name, None), str):
                setattr(args, name, str(Path(getattr(args, name)).expanduser()))
        if args.command in ONE_SHOT:
            jaxsetup.use_compilation_cache()  # sweep, search and audit start JAX themselves
        registry.load_plugins(args.plugin)
        # looked up when called, so a test can replace one command
        command = {"eval": commands._eval, "check": commands._check, "sweep": runs._sweep,
                   "search": runs._search, "audit": runs._audit, "show": commands._show,
                   "compose": commands._compose,
                   "relations": listings._relations, "notions": listings._notions}
        return command[args.command](args)
    except InputError as e:
        return _fail(str(e))
    except KeyboardInterrupt as e:
        how = "terminated" if isinstance(e, Terminated) else "interrupted"
        print(f"jaxpriv: {how} (a sweep's finished chunks and a search's finished "
              "segments are kept: run again with --resume; an audit resumes by itself)",
              file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    except BrokenPipeError:
        # the reader went away (``jaxpriv eval f.json | head``): not an error; keep Python's
        # final flush of stdout from raising again
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:
        return _fail(_os_problem(e))
    except MemoryError:
        return _fail("out of memory: lower --memory-mb or --chunk, or --count")
    except Exception as e:  # noqa: BLE001 - sorted below: a plugin's, the device's, or a bug
        return _unexpected(e)


def _fail(message: str) -> int:
    print(f"jaxpriv: error: {message}", file=sys.stderr)
    return 2


def _os_problem(error: OSError) -> str:
    """One line for a failed file operation: the path, the system's reason, what to do."""
    import errno

    where = f"{error.filename}: " if error.filename else ""
    reason = error.strerror or str(error)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        advice = ("free some space, then run the same command again, with --resume if the run "
                  "had begun (an audit resumes by itself); finished work is kept")
    elif error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        advice = "choose a path you can write, or fix its permissions"
    else:
        advice = "check the path and the disk"
    return f"{where}{reason}; {advice}"


def _unexpected(error: Exception) -> int:
    """A plugin's own exception (named with its file and line), the device running out of
    memory, or a bug in jaxpriv (traceback and a request to report it)."""
    import traceback

    from jaxpriv import registry

    found = registry.plugin_error(error)
    if found is not None:
        return _fail(str(found))
    text = str(error)
    if "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower():
        return _fail("the device ran out of memory: lower --memory-mb or --chunk")
    from jaxpriv.core.version import __version__

    traceback.print_exception(error)
    print(f"jaxpriv: internal error: this is a bug in jaxpriv {__version__}, not in your input; "
          "please report it with the command line and the traceback above", file=sys.stderr)
    return 3
