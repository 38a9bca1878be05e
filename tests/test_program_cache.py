"""Compiled programs kept on disk between processes (jaxpriv.engines.program_cache): a program
loaded gives the results of one compiled, only the catalog's own relations are kept (never a
session's, a plugin's or a replaced record), and a broken file is a miss."""

import dataclasses
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv.engines import program_cache, programs, search, sweep
from jaxpriv.registry import programs as claim_programs
from test_programs import _envelope

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def kept(monkeypatch, tmp_path):
    """Programs kept under ``tmp_path`` for the test (the suite runs with them off:
    tests/conftest.py)."""
    from jaxpriv.registry import plugins

    monkeypatch.setenv(program_cache.ENV, str(tmp_path / "programs"))
    # no plugin loaded, whatever an earlier test of this worker loaded (the suite shares one
    # process per worker; a loaded plugin turns the kept programs off)
    monkeypatch.setattr(plugins, "LOADED_PLUGINS", [])
    monkeypatch.setattr(plugins, "LOADED_ENTRY_POINTS", [])
    programs.clear()
    program_cache.clear_stats()
    yield tmp_path / "programs"
    programs.clear()


def _files(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in root.rglob("*.pkl")}


def test_only_the_catalogs_own_records_are_builtin():
    assert claim_programs.is_builtin(registry.get("R1"))
    assert claim_programs.is_builtin(registry.get("D6.a2.d1e-5"))
    # the same id with another bound in its place (a test's, a user's): not the catalog's
    replaced = dataclasses.replace(registry.get("R1"), bound=lambda x, *p: 0.5 * x)
    assert not claim_programs.is_builtin(replaced)
    claim_instance = registry.get("D6.a2.d1e-5")
    assert not claim_programs.is_builtin(dataclasses.replace(claim_instance,
                                                             bound=lambda x, *p: x))
    # a relation registered in a session under a new id
    mine = registry.register(dataclasses.replace(registry.get("R1"), id="MINE-R1"))
    try:
        assert not claim_programs.is_builtin(mine)
    finally:
        registry.unregister("MINE-R1")


def test_a_replaced_notion_makes_its_relations_not_builtin():
    relation = registry.get("R1")
    key = sorted(relation.notions)[0]
    original = registry.notion(key)
    registry.register(dataclasses.replace(original), replace=True)
    try:
        assert not claim_programs.is_builtin(relation)
    finally:
        registry.register(original, replace=True)
    assert claim_programs.is_builtin(relation)


def test_a_sweep_loaded_from_disk_equals_one_compiled(kept):
    config = sweep.make_config("D6.a4.d1e-2", 3, 3, 6000, seed=5, chunk=2000)
    compiled = sweep.run(config, progress=False)
    saved = program_cache.stats()["saved"]
    assert saved >= 2 and len(_files(kept)) == saved  # the step (and seeds) and the screen
    before = _files(kept)
    programs.clear()  # what a new process meets: nothing in memory
    loaded = sweep.run(config, progress=False)
    stats = program_cache.stats()
    # every program loaded; one found broken on its first run (an executable serialized without
    # a function this busy process had compiled before) was compiled instead and its file removed
    assert stats["loaded"] == saved and len(_files(kept)) == saved - stats["broken"]
    assert set(_files(kept)) <= set(before)
    a, b = _envelope(compiled), _envelope(loaded)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert compiled.worst_slack == loaded.worst_slack


def test_a_claims_program_kept_by_one_instance_serves_another_exactly(kept):
    """D7.a2's search segment, kept, then loaded by a new process's D7.a16 run: the same rows as
    D7.a16 compiled on its own with nothing kept."""
    def config(rid):
        return search.make_config(rid, 2, 3, (1.0, 3.0), restarts=4, steps=100, segment=50)

    search.run(config("D7.a2.d1e-5"), progress=False)
    programs.clear()
    program_cache.clear_stats()
    shared = search.run(config("D7.a16.d1e-2"), progress=False)
    assert program_cache.stats()["loaded"] >= 1
    programs.clear()
    os.environ[program_cache.ENV] = "off"
    alone = search.run(config("D7.a16.d1e-2"), progress=False)
    for a, b in zip(alone.rows, shared.rows):
        for field in ("premise", "conclusion", "bound", "slack"):
            np.testing.assert_array_equal(a[field], b[field], err_msg=field)


def test_a_search_loaded_from_disk_equals_one_compiled(kept):
    config = search.make_config("D7.a2.d1e-5", 2, 3, (1.0, 3.0), restarts=4, steps=100,
                                segment=50)
    compiled = search.run(config, progress=False)
    saved = program_cache.stats()["saved"]
    assert saved >= 2  # the segment and the float64 check of the best
    programs.clear()
    loaded = search.run(config, progress=False)
    assert program_cache.stats()["loaded"] == saved
    for a, b in zip(compiled.rows, loaded.rows):
        for field in ("premise", "conclusion", "bound", "slack"):
            np.testing.assert_array_equal(a[field], b[field], err_msg=field)


def test_a_session_relation_is_never_kept(kept):
    mine = registry.register(dataclasses.replace(registry.get("R2"), id="MINE-R2"))
    try:
        sweep.run(sweep.make_config("MINE-R2", 3, 3, 2000, seed=1, chunk=2000), progress=False)
    finally:
        registry.unregister("MINE-R2")
    # nothing of its own: at most the sweeps' seed-word program, which reads no relation
    # (one file for every relation: program_cache.compile_shared)
    files = list(kept.rglob("*.pkl"))
    assert program_cache.stats()["saved"] == len(files) <= 1
    assert all(b"jit_seeds" in pickle.loads(f.read_bytes())[2][:200_000] for f in files)


def test_the_seed_program_is_kept_once_for_every_relation(kept):
    """The sweeps' seed words read no relation: one kept program serves every sweep (it was
    saved by each of an audit's 36 sweeps, 1.1 MB each, and each warm sweep loaded its own)."""
    def seed_files():
        return [f for f in kept.rglob("*.pkl")
                if b"jit_seeds" in pickle.loads(f.read_bytes())[2][:200_000]]

    # a program JAX compiled earlier in this process is fetched, not compiled, and so never kept
    # (program_cache._compile_fresh): forget what earlier tests of this worker compiled
    jax.clear_caches()
    sweep.run(sweep.make_config("R2", 3, 3, 2000, seed=1, chunk=2000), progress=False)
    programs.clear()  # a new process
    jax.clear_caches()
    sweep.run(sweep.make_config("D3", 4, 4, 2000, seed=1, chunk=2000), progress=False)
    assert len(seed_files()) == 1
    # another number of blocks a chunk is another program (its output's shape): its own file,
    # and the sweep that loads it equals one that compiled it
    config = sweep.make_config("R2", 3, 3, 4000, seed=3, chunk=4000)
    assert config.chunk // config.block != 2000 // sweep.make_config(
        "R2", 3, 3, 2000, seed=1, chunk=2000).block
    programs.clear()
    jax.clear_caches()
    compiled = sweep.run(config, progress=False)
    assert len(seed_files()) == 2
    programs.clear()
    loaded = sweep.run(config, progress=False)
    assert compiled.worst_slack == loaded.worst_slack


def test_a_broken_file_is_compiled_again_and_rewritten(kept):
    config = sweep.make_config("R2", 3, 3, 2000, seed=2, chunk=2000)
    first = sweep.run(config, progress=False)
    for path in kept.rglob("*.pkl"):
        path.write_bytes(b"not a program")
    programs.clear()
    program_cache.clear_stats()
    again = sweep.run(config, progress=False)
    stats = program_cache.stats()
    assert stats["loaded"] == 0 and stats["saved"] == stats["compiled"] >= 2
    assert all(p.stat().st_size > 1000 for p in kept.rglob("*.pkl"))
    np.testing.assert_array_equal(_envelope(first)["count"], _envelope(again)["count"])


def test_old_fingerprints_are_pruned_and_nothing_else(tmp_path):
    root = tmp_path / "programs"
    names = [f"{i:024x}" for i in range(4)]
    for age, name in enumerate(names + ["mine", "f" * 24]):
        (root / name).mkdir(parents=True)
        if name != "mine" and name != "f" * 24:  # a folder of this cache holds its mark
            (root / name / program_cache._MARK).write_text("x")
        os.utime(root / name, (1_000_000 + age, 1_000_000 + age))
    new = root / ("e" * 24)
    new.mkdir()
    program_cache._prune(root, keep=new)
    kept = names[-(program_cache.KEEP - 1):]
    assert sorted(p.name for p in root.iterdir()) == sorted(kept + ["mine", "f" * 24, new.name])


def test_a_payload_that_is_not_the_one_written_is_a_miss(kept):
    config = sweep.make_config("R2", 3, 3, 2000, seed=2, chunk=2000)
    sweep.run(config, progress=False)
    import pickle
    for path in kept.rglob("*.pkl"):
        fields = list(pickle.loads(path.read_bytes()))
        fields[2] = fields[2][:-1] + bytes([fields[2][-1] ^ 1])  # one bit of the executable
        path.write_bytes(pickle.dumps(tuple(fields)))
    programs.clear()
    program_cache.clear_stats()
    sweep.run(config, progress=False)
    assert program_cache.stats()["loaded"] == 0


def test_a_plugin_turns_the_kept_programs_off(kept, monkeypatch):
    from jaxpriv.registry import plugins

    assert program_cache.directory() is not None
    monkeypatch.setattr(plugins, "LOADED_PLUGINS", ["/somewhere/plugin.py"])
    assert program_cache.directory() is None


def test_a_source_changed_since_import_turns_them_off_and_a_clock_ahead_does_not(monkeypatch):
    """The package's files are compared with their state at import, not with the clock: a file
    changed, added or removed since turns the kept programs off; files whose times are ahead of
    this machine's clock (a checkout copied from another machine) do not."""
    from jaxpriv.core import version

    now = version.source_files()
    assert now == version.SOURCES_AT_IMPORT and program_cache.fingerprint.__wrapped__()
    first = next(iter(now))
    changed = dict(now, **{first: (now[first][0] + 1, now[first][1])})
    monkeypatch.setattr(version, "SOURCES_AT_IMPORT", changed)
    assert program_cache.fingerprint.__wrapped__() is None
    monkeypatch.setattr(version, "SOURCES_AT_IMPORT", {k: now[k] for k in list(now)[1:]})
    assert program_cache.fingerprint.__wrapped__() is None  # a file added since import
    ahead = {name: (mtime + 10**9 * 86_400 * 365, size) for name, (mtime, size) in now.items()}
    monkeypatch.setattr(version, "source_files", lambda: ahead)
    monkeypatch.setattr(version, "SOURCES_AT_IMPORT", ahead)
    assert program_cache.fingerprint.__wrapped__() == program_cache.fingerprint.__wrapped__()
    assert program_cache.fingerprint.__wrapped__() is not None


def test_a_second_process_loads_what_the_first_compiled(tmp_path):
    """Two ``jaxpriv sweep`` processes: the second writes nothing (it loaded every program the
    first kept) and its envelope is the first's, to the bit."""
    env = dict(os.environ, **{program_cache.ENV: str(tmp_path / "programs")})
    outs = []
    for run in ("first", "second"):
        out = tmp_path / run
        proc = subprocess.run([sys.executable, "-m", "jaxpriv.cli", "sweep", "--relation",
                               "D7.a4.d1e-5", "--n", "3", "--m", "3", "--count", "4000",
                               "--seed", "3", "--out", str(out), "--quiet"],
                              capture_output=True, text=True, cwd=ROOT, env=env)
        assert proc.returncode == 0, proc.stderr
        outs.append(out)
        if run == "first":
            kept = _files(tmp_path / "programs")
            assert len(kept) >= 2
    assert _files(tmp_path / "programs") == kept
    assert (outs[0] / "envelope.csv").read_text() == (outs[1] / "envelope.csv").read_text()
    first, second = (json.loads((o / "summary.json").read_text()) for o in outs)
    assert first["worst"] == second["worst"]


def test_a_killed_writes_leftovers_are_swept_and_a_fresh_one_is_left(kept):
    """A ``*.tmp`` file older than :data:`program_cache.ORPHAN_SECONDS` is a killed process's
    partial write: the next process that saves there removes it; one being written now stays."""
    config = sweep.make_config("R2", 3, 3, 2000, seed=2, chunk=2000)
    sweep.run(config, progress=False)
    folder = next(kept.iterdir())
    stale, fresh = folder / "stale.tmp", folder / "fresh.tmp"
    for path in (stale, fresh):
        path.write_bytes(b"half a program")
    old = stale.stat().st_mtime - 2 * program_cache.ORPHAN_SECONDS
    os.utime(stale, (old, old))
    for path in folder.glob("*.pkl"):  # a program to save again
        path.unlink()
    programs.clear()
    program_cache._sweep_orphans.cache_clear()
    sweep.run(config, progress=False)
    assert program_cache.stats()["saved"] >= 1
    assert not stale.exists() and fresh.exists()


def test_a_write_that_fails_leaves_no_temporary_file(kept, monkeypatch):
    """A program whose write fails (here: the rename into place) is not kept, and its temporary
    file is removed: nothing partial stays in the folder."""
    def refuse(*args):
        raise OSError("disk full")

    monkeypatch.setattr(program_cache.os, "replace", refuse)
    sweep.run(sweep.make_config("R2", 3, 3, 2000, seed=2, chunk=2000), progress=False)
    assert program_cache.stats()["compiled"] >= 2 and program_cache.stats()["saved"] == 0
    assert not list(kept.rglob("*.tmp")) and not list(kept.rglob("*.pkl"))


def test_a_kept_program_that_fails_its_first_run_is_compiled_instead(kept, monkeypatch):
    """A program loaded from disk runs its first call to completion before it is trusted; one
    that fails there (XLA:CPU can serialize an executable without a function the process had
    compiled before: "Function ... not found" on dispatch) is compiled instead, gives the
    compiled result, and its file is removed."""
    config = sweep.make_config("R2", 3, 3, 2000, seed=2, chunk=2000)
    first = sweep.run(config, progress=False)
    kept_files = _files(kept)
    assert kept_files
    programs.clear()
    program_cache.clear_stats()

    def broken(*args):
        raise RuntimeError("INTERNAL: Error dispatching computation: Function f not found")

    monkeypatch.setattr(program_cache, "_load", lambda path: broken if path.exists() else None)
    again = sweep.run(config, progress=False)
    stats = program_cache.stats()
    assert stats["loaded"] >= 1 and stats["broken"] == stats["loaded"]
    assert not _files(kept)  # every broken file removed (none saved again in this process)
    a, b = _envelope(first), _envelope(again)
    assert set(a) == set(b)
    for field in a:
        np.testing.assert_array_equal(a[field], b[field])
