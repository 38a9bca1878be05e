"""How a parallel audit shares its relations among its workers: relations that share a compiled
program in one job (:func:`jobs`), jobs of at most :data:`JOB_LIMIT` relations (:func:`split`),
and the longest jobs first where an earlier audit says how long they take
(:func:`longest_first`, :func:`remember_seconds`)."""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path
from typing import Any

from jaxpriv import registry
from jaxpriv.core.errors import InputError
from jaxpriv.engines import io

__all__ = ["JOB_LIMIT", "SECONDS_FILE", "jobs", "longest_first", "remember_seconds", "split"]


def jobs(ids: list[str]) -> list[list[str]]:
    """The relations in jobs for the workers: relations that share a compiled program go to
    one worker, which compiles it once — the instances of a claim
    (:func:`jaxpriv.registry.programs.program_key`: spread over two workers, D6's eight
    instances compiled everything twice), and relations of any claim whose search segments are
    one program (:func:`jaxpriv.registry.programs.objective_key`: D6 and D7, C1, C2, C4 and
    C7), in jobs of at most :data:`JOB_LIMIT` where they share only the segment (:func:`split`);
    every other relation is a job of its own. A job lists its relations in the audit's order;
    jobs start in the order of their first relation (a parallel audit reorders them:
    :func:`longest_first`)."""
    from jaxpriv.registry import programs

    job_of: dict[Any, int] = {}  # a shared program's key -> its job
    groups: list[list[str]] = []
    for rid in ids:
        relation = registry.get(rid)
        keys = []
        if getattr(relation, "kind", None) == "mechanism":
            claim = programs.program_key(relation)
            keys = [programs.objective_key(relation)] + ([claim] if claim[0] == "claim" else [])
        found = sorted({job_of[key] for key in keys if key in job_of})
        if found:  # into the first job sharing a program; any other such job joins it
            into = found[0]
            for other in found[1:]:
                groups[into] += groups[other]
                groups[other] = []
                job_of.update({key: into for key, job in job_of.items() if job == other})
        else:
            into = len(groups)
            groups.append([])
        groups[into].append(rid)
        job_of.update({key: into for key in keys})
    order = {rid: i for i, rid in enumerate(ids)}
    return [part for job in groups if job
            for part in split(sorted(job, key=order.__getitem__), programs.program_key)]


SECONDS_FILE = "audit-seconds.json"
"""Beside the kept programs (``$JAXPRIV_PROGRAM_CACHE``): ``{budget: {relation: seconds}}``, what
each relation's runs took when last run from scratch, for :func:`longest_first`."""


def _seconds_file() -> Path | None:
    from jaxpriv.engines import program_cache

    root = os.environ.get(program_cache.ENV, "").strip()
    return None if not root or root.lower() in ("off", "0", "no") else \
        Path(root).expanduser() / SECONDS_FILE


def _seconds_known(path: Path | None) -> dict:
    try:
        found = io.read_json(path) if path is not None and path.exists() else {}
    except (InputError, OSError):
        return {}
    return found if isinstance(found, dict) else {}


def longest_first(jobs: list[list[str]], budget: str) -> list[list[str]]:
    """``jobs`` in decreasing order of what their relations took in an earlier audit at this
    budget (:data:`SECONDS_FILE`; a relation not there counts as the median one), so that the
    last jobs to start are short ones: in audit order a warm quick audit ended on C6's 6 s
    while the other worker idled. Without a record (a first audit), the audit's order."""
    known = _seconds_known(_seconds_file()).get(budget)
    if not isinstance(known, dict):
        return jobs
    took = {rid: float(v) for rid, v in known.items()
            if isinstance(v, (int, float)) and math.isfinite(v) and v >= 0}
    if not took:
        return jobs
    typical = statistics.median(took.values())
    return sorted(jobs, key=lambda job: -sum(took.get(rid, typical) for rid in job))


def remember_seconds(budget: str, took: dict[str, float]) -> None:
    """Adds what this audit's relations took (those run from scratch) to :data:`SECONDS_FILE`."""
    path = _seconds_file()
    if path is None or not took:
        return
    found = _seconds_known(path)
    mine = found.get(budget)
    found[budget] = {**(mine if isinstance(mine, dict) else {}),
                     **{rid: round(seconds, 3) for rid, seconds in took.items()}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        io.atomic_write(path, lambda f: json.dump(found, f, indent=1))
    except OSError:
        pass  # only a schedule's hint


JOB_LIMIT = 16
"""The most relations a job of relations that share only a search segment takes (D6 and D7:
16); a larger one — with the accountants' extra, 32 relations share the segment of D_α ⇒ ε(δ) —
is split between claims, so that one worker does not run them all while the others idle."""


def split(job: list[str], program_key) -> list[list[str]]:
    """``job`` in parts of at most :data:`JOB_LIMIT` relations, a claim's instances never
    apart (a claim larger than that is a part of its own)."""
    blocks: list[list[str]] = []
    for rid in job:  # a claim's instances, or one relation, as blocks
        key = program_key(registry.get(rid))
        same = blocks and key[0] == "claim" and program_key(registry.get(blocks[-1][0])) == key
        if same:
            blocks[-1].append(rid)
        else:
            blocks.append([rid])
    parts: list[list[str]] = []
    for block in blocks:
        if parts and len(parts[-1]) + len(block) <= JOB_LIMIT:
            parts[-1] += block
        else:
            parts.append(list(block))
    return parts
