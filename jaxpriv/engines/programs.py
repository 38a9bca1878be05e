"""The engines' compiled programs, kept for the life of the process and shared by every
instance of a claim (:mod:`jaxpriv.registry.programs`): an audit worker that has compiled
``D6.a2.d1e-2``'s sweep step, float64 screen, search segment and float64 re-checks runs
``D6.a4.d1e-5`` with the same programs, its α and δ passed in — no tracing, no lowering, no
compiling (with the persistent cache warm, tracing and lowering were ~4.5 of a D6 instance's
~7.5 s; cold, compiling another ~9 s).

A program is keyed by its name, its relation's :func:`~jaxpriv.registry.programs.program_key`
and every field of the engine's config but the relation id (and whatever else the caller
adds); a relation that is no claim's instance keys its own programs, so the cache only ever
returns a program built for what is asked. :func:`aot` compiles one ahead of time, from the
disk where a previous process kept it (:mod:`jaxpriv.engines.program_cache`).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Hashable

from jaxpriv.engines import program_cache
from jaxpriv.registry import programs as registry_programs

__all__ = ["LIMIT", "RESULTS_LIMIT", "aot", "cached", "clear", "compiler", "config_key", "kept",
           "remember", "remembered", "shared"]

LIMIT = 48
"""Programs kept (the least recently used go first): an audit worker meets each claim's a few
times in a row; a plugin's relations and the statistical claims are never shared."""

_PROGRAMS: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()

RESULTS_LIMIT = 16
"""Finished runs remembered (:func:`remember`; the least recently used go first): an audit
worker runs D6's eight instances, then D7's, whose searches are D6's (one program, the same
settings and values: :func:`jaxpriv.registry.programs.objective_key`)."""

_RESULTS: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()


def config_key(config) -> tuple:
    """Every field of an engine's config (a dataclass) but ``relation``, as a key; a field the
    config names in ``ARGUMENTS`` (a search's premise grid) by its length only: its programs
    take its values as an argument (the grids of D9's instances differ in their last point)."""
    arguments = getattr(type(config), "ARGUMENTS", ())
    return tuple((f.name, ("argument of length", len(getattr(config, f.name)))
                  if f.name in arguments else getattr(config, f.name))
                 for f in dataclasses.fields(config) if f.name != "relation")


def cached(name: str, relation, config, build: Callable[[], Any], *extra: Hashable,
           program: Hashable = None) -> Any:
    """The program ``name`` of ``relation`` under ``config`` (and ``extra``): built by
    ``build()`` the first time, the same object after (for every instance of a claim that
    shares programs). ``build`` must read the claim's parameters only as the program's
    arguments (:func:`jaxpriv.registry.programs.bind`), never as constants. ``program``: the
    key of what the program reads of the relation, where that is less than its claim
    (:func:`jaxpriv.registry.programs.objective_key`); default
    :func:`jaxpriv.registry.programs.program_key`."""
    if program is None:
        program = registry_programs.program_key(relation)
    key = (name, program, config_key(config), *extra)
    try:
        hash(key)
    except TypeError:  # an unhashable option (a plugin's): built each time, as before
        return build()
    return _kept(key, build)


def _kept(key: Hashable, build: Callable[[], Any]) -> Any:
    """``_PROGRAMS[key]``, built by ``build()`` the first time (the least recently used go
    beyond :data:`LIMIT`)."""
    if key in _PROGRAMS:
        _PROGRAMS.move_to_end(key)
        return _PROGRAMS[key]
    program = _PROGRAMS[key] = build()
    while len(_PROGRAMS) > LIMIT:
        _PROGRAMS.popitem(last=False)
    return program


def shared(key: Hashable, build: Callable[[], Any]) -> Any:
    """A program that reads no relation (the sweeps' seed words), kept in this process under
    ``key`` with the others (:func:`clear` forgets it): built by ``build()`` the first time."""
    return _kept(("shared", key), build)


def aot(name: str, relation, config, jitted, *args, extra: tuple = (),
        program: Hashable = None) -> Any:
    """``jitted.lower(*args).compile()`` for ``relation``'s program ``name`` under ``config`` (and
    ``extra``; ``program`` as :func:`cached`'s), loaded from disk where a previous process kept
    it and kept there after compiling where it may be
    (:func:`jaxpriv.engines.program_cache.compile`)."""
    return program_cache.compile(name, relation, config_key(config), jitted, *args, extra=extra,
                                 program=program)


def kept(name: str, relation, config, jitted: Callable[[], Any], *args, extra: tuple = (),
         program: Hashable = None) -> Any:
    """:func:`aot` of ``jitted()`` on ``args``, kept in this process by :func:`cached` (key:
    ``name``, the claim — or ``program``, what the program reads of the relation — ``config``,
    ``extra`` and the arguments' shapes and types) and on disk by
    :func:`jaxpriv.engines.program_cache.compile`: the one way an engine's program is built
    and found again. ``jitted`` is called only where neither holds the program."""
    return cached(name, relation, config,
                  lambda: aot(name, relation, config, jitted(), *args, extra=extra,
                              program=program),
                  *extra, program_cache.signature(args), program=program)


def compiler(relation, config) -> Callable[..., Any]:
    """``compile_program(name, jitted, *args)``: :func:`aot` for ``relation`` under ``config``."""
    return lambda name, jitted, *args: aot(name, relation, config, jitted, *args)


def remember(key: Hashable, result: Any) -> None:
    """Keep what a deterministic run of a kept program ended with (host arrays), under ``key``:
    the program's key and everything else its run was given. Another run with that key would
    end the same, bit for bit (:func:`remembered`)."""
    _RESULTS[key] = result
    _RESULTS.move_to_end(key)
    while len(_RESULTS) > RESULTS_LIMIT:
        _RESULTS.popitem(last=False)


def remembered(key: Hashable) -> Any:
    """What :func:`remember` kept under ``key``, or ``None``."""
    if key in _RESULTS:
        _RESULTS.move_to_end(key)
        return _RESULTS[key]
    return None


def clear() -> None:
    """Forget every kept program and remembered run (tests; a relation re-registered under the
    same id keys a new record, so this is never needed for correctness)."""
    _PROGRAMS.clear()
    _RESULTS.clear()
