"""Hostile inputs and faults: every failure a user can cause is one line on stderr and exit 2,
nothing finished is lost, and one run directory has one writer.

Each test injects one fault — a path that cannot be created or written, a file where a directory
is expected, a truncated, foreign or old checkpoint, a full disk in the middle of a run, a second
run into a locked directory, a lock left by a killed run, a broken plugin, a witness edited by
hand — and checks the one-line error, and, where work was under way, that resuming reproduces
the uninterrupted run exactly. The property tests feed random argument lists to every
subcommand and random edits of a witness file to ``show``. (The ``kill -9`` of an audit's
parent is in ``tests/test_audit.py``, beside the serial audit it is compared with.)
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jaxpriv import InputError, cli
from jaxpriv.cli import listings as cli_listings, runs as cli_runs
from jaxpriv.engines import io, runstate, search, sweep

FORBIDDEN = "/proc/jaxpriv-cannot-be-created"
FUZZ = int(os.environ.get("JAXPRIV_FUZZ", "1"))  # more examples: JAXPRIV_FUZZ=20 pytest ...  # /proc refuses mkdir, even to root


def run_cli(argv, capsys) -> tuple[int, str, str]:
    """``jaxpriv ARGV`` in this process: (exit status, stdout, stderr)."""
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as stop:  # argparse: --help (0) and usage errors (2)
        code = stop.code if isinstance(stop.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("jaxpriv: error:")]
    assert len(errors) == 1, err
    for needle in needles:
        assert needle in errors[0], errors[0]


# --------------------------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------------------------

SWEEP = ["sweep", "--relation", "R2", "--n", "3", "--m", "3", "--count", "50000", "--chunk",
         "8192", "--quiet"]
SWEEP_R2 = SWEEP[:9] + ["--seed", "4", "--chunk", "8192", "--quiet"]  # as sweep_runs' config
SEARCH = ["search", "--relation", "R1", "--n", "2", "--m", "2", "--grid", "0.5,1",
          "--restarts", "2", "--steps", "40", "--quiet"]


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("not a directory\n")
    return path


@pytest.mark.parametrize("argv, needle", [
    (SWEEP + ["--out", FORBIDDEN], "cannot create the directory"),
    (SWEEP[:2] + ["R1,R2"] + SWEEP[3:] + ["--out", FORBIDDEN + "/deeper"], "cannot create"),
    (SEARCH + ["--out", FORBIDDEN], "cannot create the directory"),
    (["audit", "--budget", "quick", "--quiet", "--out", FORBIDDEN], "cannot create"),
])
def test_paths_that_cannot_be_created_are_refused_before_any_work(argv, needle, capsys):
    code, _, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, needle, FORBIDDEN)


@pytest.mark.parametrize("command", ["sweep", "search", "audit", "sweep-all"])
def test_a_file_where_a_directory_belongs_is_refused(command, a_file, capsys):
    argv = {"sweep": SWEEP, "search": SEARCH, "audit": ["audit", "--quiet"],
            "sweep-all": SWEEP[:2] + ["R1,R2"] + SWEEP[3:]}[command]
    code, _, err = run_cli(argv + ["--out", a_file], capsys)
    assert_one_line_error(code, err, "a file is there, not a directory")
    code, _, err = run_cli(argv + ["--out", a_file / "inside"], capsys)
    assert_one_line_error(code, err, str(a_file))
    assert a_file.read_text() == "not a directory\n"


def test_a_directory_that_cannot_be_written_is_refused(tmp_path, capsys, monkeypatch):
    # root may write anywhere, so the operating system's refusal is injected
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(runstate.tempfile, "mkstemp", refuse)
    code, _, err = run_cli(SWEEP + ["--out", tmp_path / "run"], capsys)
    assert_one_line_error(code, err, "cannot write there (Permission denied)")


@pytest.mark.parametrize("argv, needle", [
    (["eval", "/no/such/mechanism.json"], "no such file"),
    (["show", "/no/such/witness.json"], "no such file"),
    (["check", "R1", "/no/such/mechanism.json"], "no such file"),
    (SEARCH + ["--out", "{tmp}/s", "--sweep", "/no/such/sweep"], "--sweep /no/such/sweep"),
    (["relations", "--plugin", "/no/such/plugin.py"], "no such file"),
    (["search", "--relation", "R5", "--grid", "3:1:5", "--out", "{tmp}/g"], "below low"),
    (["search", "--relation", "R5", "--grid", "0:1:0", "--out", "{tmp}/g"], "count must be"),
    (["search", "--relation", "R5", "--grid", "0.1,nan", "--out", "{tmp}/g"], "finite"),
    (["search", "--relation", "R5", "--grid", "0:1:99999999", "--out", "{tmp}/g"], "at most"),
    # (an empty --grid took the default grid; a negative timeout was accepted)
    (["search", "--relation", "R5", "--grid", "", "--out", "{tmp}/g"], "--grid is empty"),
    (SWEEP + ["--coordinator-timeout", "-1", "--out", "{tmp}/t"], "must be a number > 0"),
])
def test_missing_inputs_and_bad_grids_are_one_line(argv, needle, tmp_path, capsys):
    code, _, err = run_cli([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert_one_line_error(code, err, needle)


def test_a_tilde_in_out_is_the_home_directory(tmp_path, capsys, monkeypatch):
    """``--out=~/x`` reaches jaxpriv unexpanded (the shell expands only a word-initial ~)."""
    from jaxpriv.kernels import native

    # jaxpriv's cache root (the native kernel's library) stays where it is
    monkeypatch.setenv("JAXPRIV_CACHE", str(native.cache_root()))
    monkeypatch.setenv("HOME", str(tmp_path))
    code, _, err = run_cli(SWEEP + ["--out=~/runs/r2"], capsys)
    assert code == 0, err
    assert (tmp_path / "runs" / "r2" / "summary.json").exists()


def test_a_sweep_directory_that_is_not_one_is_one_line(tmp_path, capsys):
    fake = tmp_path / "fake-sweep"
    fake.mkdir()
    code, _, err = run_cli(SEARCH + ["--out", tmp_path / "s", "--sweep", fake], capsys)
    assert_one_line_error(code, err, "not a finished sweep run directory")
    (fake / "envelope.csv").write_text("x,slack\nabc,1\n")
    code, _, err = run_cli(SEARCH + ["--out", tmp_path / "s2", "--sweep", fake], capsys)
    assert_one_line_error(code, err, "not an envelope jaxpriv wrote")
    (fake / "summary.json").write_text('{"relation": "R5"}')  # another relation's sweep: taken
    code, _, err = run_cli(SEARCH + ["--out", tmp_path / "s3", "--sweep", fake], capsys)
    assert_one_line_error(code, err, f"{fake} is a sweep of R5, not of R1")


def test_an_audit_worker_that_dies_is_one_line(tmp_path, capsys):
    """A worker process that dies (here: as it starts, in a plugin only workers run)."""
    plugin = tmp_path / "dies_in_workers.py"
    plugin.write_text("import multiprocessing, os\n"
                      "if multiprocessing.current_process().name != 'MainProcess':\n"
                      "    os._exit(1)\n")
    code, _, err = run_cli(["audit", "--quiet", "--relations", "R1,R2", "--workers", "2",
                            "--plugin", plugin, "--out", tmp_path / "audit"], capsys)
    from jaxpriv import registry
    registry.LOADED_PLUGINS[:] = [p for p in registry.LOADED_PLUGINS
                                  if p != str(plugin.resolve())]
    assert_one_line_error(code, err, "an audit worker died", "run the same audit again")


# --------------------------------------------------------------------------------------------
# checkpoints
# --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sweep_runs(tmp_path_factory):
    """An uninterrupted sweep, and the configuration to interrupt."""
    config = sweep.make_config("R2", 3, 3, 50_000, seed=4, chunk=8192)
    whole = tmp_path_factory.mktemp("whole")
    result = sweep.run(config, whole, progress=False)
    return config, result


def same_sweep(a, b) -> None:
    for x, y in zip(np.asarray(a.state.envelope.score), np.asarray(b.state.envelope.score)):
        assert x == y
    np.testing.assert_array_equal(np.asarray(a.state.cell_count), np.asarray(b.state.cell_count))
    assert a.violation_count == b.violation_count
    assert [v["index"] for v in a.violations] == [v["index"] for v in b.violations]
    assert a.rows == b.rows or [r["slack"] for r in a.rows] == [r["slack"] for r in b.rows]


def truncate(path: Path, keep: int = 300) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def test_a_run_of_another_kind_never_writes_over_a_directory_s_results(tmp_path, capsys):
    """A search into a finished sweep's --out replaced its summary and envelope (exit 0), and
    the reverse; --resume there said 'no checkpoint to resume (run without --resume first)'."""
    R14 = ["sweep", "--relation", "R14", "--count", "500", "--quiet"]
    # (keeps no checkpoint: its summary says it; it reads no --restarts or --steps)
    R14_SEARCH = ["search", "--relation", "R14", "--grid", "0.5,1", "--t-max", "100",
                  "--quiet"]
    for i, (first, second) in enumerate([(SWEEP, SEARCH), (SEARCH, SWEEP), (R14, SWEEP),
                                         (SWEEP, R14), (R14_SEARCH, SWEEP)]):
        out = tmp_path / f"{i}-{first[2]}-{second[2]}"
        code, _, err = run_cli([*first, "--out", out], capsys)
        assert code in (0, 1), err
        summary = (out / "summary.json").read_bytes()
        for resume in ([], ["--resume"]):
            code, _, err = run_cli([*second, "--out", out, *resume], capsys)
            assert_one_line_error(code, err, f"{out} holds a", "use a new --out")
        assert (out / "summary.json").read_bytes() == summary
        again = [*first, "--out", out] + ([] if first is R14_SEARCH else ["--resume"])
        code, _, err = run_cli(again, capsys)  # its own kind: resumes (or, a search, reruns)
        assert code in (0, 1), err


def test_a_truncated_checkpoint_resumes_from_the_previous_good_one(sweep_runs, tmp_path, capsys):
    config, whole = sweep_runs
    sweep.run(config, tmp_path, progress=False, max_chunks=4)
    assert (tmp_path / "checkpoint.previous.npz").exists()
    truncate(tmp_path / sweep.CHECKPOINT)
    capsys.readouterr()
    resumed = sweep.run(config, tmp_path, resume=True, progress=False)
    err = capsys.readouterr().err
    assert "unreadable checkpoint" in err and "previous good checkpoint" in err
    assert "resuming sweep R2" in err and "at chunk 3 of 7" in err
    same_sweep(resumed, whole)


def test_a_truncated_checkpoint_never_displaces_the_good_previous_one(sweep_runs, tmp_path):
    config, whole = sweep_runs
    sweep.run(config, tmp_path, progress=False, max_chunks=3)
    truncate(tmp_path / sweep.CHECKPOINT)
    good = (tmp_path / "checkpoint.previous.npz").read_bytes()
    # the next checkpoint replaces the damaged file and keeps the good previous one
    sweep.run(config, tmp_path, resume=True, progress=False, max_chunks=1)
    assert zipfile.is_zipfile(tmp_path / "checkpoint.previous.npz")
    assert (tmp_path / "checkpoint.previous.npz").read_bytes() == good
    same_sweep(sweep.run(config, tmp_path, resume=True, progress=False), whole)


def test_both_checkpoints_damaged_is_one_line(sweep_runs, tmp_path, capsys):
    config, _ = sweep_runs
    sweep.run(config, tmp_path, progress=False, max_chunks=3)
    truncate(tmp_path / sweep.CHECKPOINT)
    truncate(tmp_path / "checkpoint.previous.npz", 0)
    argv = SWEEP_R2 + ["--out", tmp_path, "--resume"]
    code, _, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, "unreadable checkpoint", "checkpoint.npz")
    # both said, and what is left to do (it named the latest one's problem alone)
    assert "checkpoint.previous.npz, cannot be used either" in err
    assert "start the run again with a new --out" in err


def test_foreign_and_old_checkpoints_are_refused(sweep_runs, tmp_path, capsys):
    config, _ = sweep_runs
    argv = SWEEP_R2 + ["--out", tmp_path, "--resume"]
    sweep.run(config, tmp_path, progress=False, max_chunks=2)
    (tmp_path / "checkpoint.previous.npz").unlink()
    checkpoint = tmp_path / sweep.CHECKPOINT
    with np.load(checkpoint) as data:
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays["meta"]))

    # a search's state saved where a sweep's belongs
    s_config = search.make_config("R1", 2, 2, (0.5,), restarts=2, steps=20)
    search.run(s_config, tmp_path / "s", progress=False, max_segments=1)
    checkpoint.write_bytes((tmp_path / "s" / search.STATE_FILE).read_bytes())
    code, _, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, "different settings")

    # an npz that is not a checkpoint at all
    np.savez(checkpoint.with_suffix(".tmp.npz"), x=np.zeros(3))
    os.replace(checkpoint.with_suffix(".tmp.npz"), checkpoint)
    code, _, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, "not a jaxpriv checkpoint")

    # the same settings, other arrays (edited, or another version's state layout)
    bad = dict(arrays)
    bad["a0"] = np.zeros(5)
    np.savez(checkpoint.with_suffix(".tmp.npz"), **bad)
    os.replace(checkpoint.with_suffix(".tmp.npz"), checkpoint)
    code, _, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, "arrays differ")

    # an older checkpoint format
    old = dict(arrays)
    old["meta"] = np.asarray(json.dumps({k: v for k, v in meta.items() if k != "format"}))
    np.savez(checkpoint.with_suffix(".tmp.npz"), **old)
    os.replace(checkpoint.with_suffix(".tmp.npz"), checkpoint)
    code, _, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, "format 1", f"format {io.CHECKPOINT_FORMAT}")

    # a bare array where the archive belongs
    np.save(checkpoint.with_suffix(".tmp.npy"), np.zeros(3))
    os.replace(checkpoint.with_suffix(".tmp.npy"), checkpoint)
    code, _, err = run_cli(argv, capsys)
    assert_one_line_error(code, err, "an array, not an archive")

    # other settings
    checkpoint.write_bytes(b"")
    np.savez(checkpoint.with_suffix(".tmp.npz"), **arrays)
    os.replace(checkpoint.with_suffix(".tmp.npz"), checkpoint)
    code, _, err = run_cli([a if a != "4" else "5" for a in argv], capsys)
    assert_one_line_error(code, err, "different settings (--seed)")
    # named by the options that set them: the block by --memory-mb (it said "block")
    code, _, err = run_cli(argv + ["--memory-mb", "0.01"], capsys)
    assert_one_line_error(code, err, "different settings (--memory-mb)")


def test_a_search_checkpoint_of_the_earlier_state_layout_is_refused_in_one_line(tmp_path):
    """Before each restart kept the mechanism its best parameters build (``best_built``), a
    search's checkpoint held three arrays fewer: resuming one says why, never misreads it."""
    config = search.make_config("R1", 2, 2, (0.5,), restarts=2, steps=20, segment=10)
    search.run(config, tmp_path, progress=False, max_segments=1)
    checkpoint = tmp_path / search.STATE_FILE
    with np.load(checkpoint) as data:
        arrays = {k: data[k] for k in data.files}
    leaves = sorted((k for k in arrays if k != "meta"), key=lambda k: int(k[1:]))
    for key in leaves[-3:]:  # best_built: the state's last three leaves
        del arrays[key]
    np.savez(checkpoint.with_suffix(".tmp.npz"), **arrays)
    os.replace(checkpoint.with_suffix(".tmp.npz"), checkpoint)
    io.previous_path(checkpoint).unlink(missing_ok=True)
    with pytest.raises(InputError) as error:
        search.run(config, tmp_path, resume=True, progress=False)
    message = str(error.value)
    assert "arrays differ" in message and "the version that started it" in message
    assert "\n" not in message


def test_a_search_checkpoint_whose_scores_held_the_bound_is_refused_in_one_line(tmp_path,
                                                                                monkeypatch):
    """Before a search's segment served several claims, its best scores held the bound's log
    (the objective); the resumed steps score without it, so such a checkpoint — same arrays,
    another scale — is refused, never resumed into a mixed ranking."""
    config = search.make_config("R1", 2, 2, (0.5,), restarts=2, steps=20, segment=10)
    with monkeypatch.context() as patched:
        patched.setattr(search, "SCORE", None)  # what an earlier jaxpriv's progress lacked
        search.run(config, tmp_path, progress=False, max_segments=1)
    with pytest.raises(InputError) as error:
        search.run(config, tmp_path, resume=True, progress=False)
    message = str(error.value)
    assert "held the bound" in message and "the version that started it" in message
    assert "\n" not in message
    # and a checkpoint of this version resumes
    search.run(config, tmp_path / "now", progress=False, max_segments=1)
    assert search.run(config, tmp_path / "now", resume=True, progress=False).steps == 20


def test_a_damaged_statistical_checkpoint_falls_back_too(tmp_path, capsys):
    config = sweep.make_config("R14", None, None, 4096, 1, 1024, t_max=200, draws=50)
    whole = sweep.run(config, tmp_path / "whole", progress=False)
    part = tmp_path / "part"
    sweep.run(config, part, progress=False, max_chunks=2)
    (part / "checkpoint.json").write_text('{"config": ')
    capsys.readouterr()
    resumed = sweep.run(config, part, resume=True, progress=False)
    assert "previous good checkpoint" in capsys.readouterr().err
    assert resumed.violation_count == whole.violation_count
    assert [r["slack"] for r in resumed.rows] == [r["slack"] for r in whole.rows]


def test_a_full_disk_mid_run_is_one_line_and_the_run_resumes_exactly(sweep_runs, tmp_path,
                                                                      capsys, monkeypatch):
    config, _ = sweep_runs
    argv = SWEEP_R2
    code, _, _ = run_cli(argv + ["--out", tmp_path / "whole"], capsys)
    assert code == 0
    calls = {"n": 0}
    real_fsync = os.fsync

    def full_disk(fd):
        calls["n"] += 1
        if calls["n"] >= 5:  # a few checkpoints in: the disk fills
            raise OSError(errno.ENOSPC, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(io.os, "fsync", full_disk)
    code, _, err = run_cli(argv + ["--out", tmp_path / "cut"], capsys)
    assert_one_line_error(code, err, "No space left on device", "--resume")
    monkeypatch.setattr(io.os, "fsync", real_fsync)
    leftovers = [p.name for p in (tmp_path / "cut").glob(".*.tmp")]
    assert leftovers == []  # the failed write left no half file
    code, _, err = run_cli(argv + ["--out", tmp_path / "cut", "--resume"], capsys)
    assert code == 0, err
    assert "resuming sweep R2" in err
    for name in ("summary.json", "envelope.csv"):
        a = (tmp_path / "whole" / name).read_text()
        b = (tmp_path / "cut" / name).read_text()
        if name == "summary.json":
            a, b = (_without_timing(json.loads(t)) for t in (a, b))
        assert a == b, name


def _without_timing(summary: dict) -> dict:
    return {k: v for k, v in summary.items()
            if k not in ("seconds", "compile_seconds", "mechanisms_per_second", "versions")}


# --------------------------------------------------------------------------------------------
# one writer per run directory
# --------------------------------------------------------------------------------------------

HOLD = ("import sys, time\nfrom pathlib import Path\nfrom jaxpriv.engines import runstate\n"
        "with runstate.lock(Path(sys.argv[1]), 'test holder'):\n"
        "    print('held', flush=True)\n    time.sleep(120)\n")


def hold_lock(directory: Path) -> subprocess.Popen:
    directory.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_run_into_a_locked_directory_is_refused_and_a_dead_holder_taken_over(
        tmp_path, capsys):
    out = tmp_path / "run"
    holder = hold_lock(out)
    try:
        for argv in (SWEEP + ["--out", out], SEARCH + ["--out", out],
                     ["audit", "--quiet", "--out", out, "--relations", "R1"]):
            code, _, err = run_cli(argv, capsys)
            assert_one_line_error(code, err, "is in use by test holder", f"pid {holder.pid}")
        assert not (out / "summary.json").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # the kernel released the dead holder's lock; its lock file says who it was
    assert runstate.holder(out)["pid"] == holder.pid
    code, _, err = run_cli(SWEEP + ["--out", out], capsys)
    assert code == 0, err
    assert f"taking over the lock of test holder (pid {holder.pid}" in err
    assert not (out / runstate.LOCK).exists()  # released at the end of the run


def test_locks_are_reentrant_within_a_process_and_exclusive_across(tmp_path):
    with runstate.lock(tmp_path, "outer"):
        with runstate.lock(tmp_path, "inner"):
            assert runstate.holder(tmp_path)["what"] == "outer"
        assert (tmp_path / runstate.LOCK).exists()
        other = subprocess.run([sys.executable, "-c", HOLD, str(tmp_path)], capture_output=True,
                               text=True, timeout=120)
        assert other.returncode == 1 and "is in use by outer" in other.stderr
    assert not (tmp_path / runstate.LOCK).exists()


# --------------------------------------------------------------------------------------------
# plugins
# --------------------------------------------------------------------------------------------

RAISING_PLUGIN = '''
from jaxpriv import Notion, Source, register

def level(mech, **params):
    raise ZeroDivisionError("the plugin's own bug")

register(Notion("broken_level", level, doc="raises", source=Source("test"), unit="nats"))
'''


def test_a_plugin_that_raises_while_running_is_named_with_its_line(tmp_path, capsys):
    plugin = tmp_path / "raising.py"
    plugin.write_text(RAISING_PLUGIN)
    mech = tmp_path / "m.json"
    mech.write_text(json.dumps({"K": [[0.6, 0.4], [0.3, 0.7]]}))
    from jaxpriv import registry
    try:
        code, _, err = run_cli(["eval", mech, "--plugin", plugin], capsys)
    finally:
        registry.NOTIONS.pop("broken_level", None)
        registry.LOADED_PLUGINS[:] = [p for p in registry.LOADED_PLUGINS
                                      if p != str(plugin.resolve())]
    assert_one_line_error(code, err, f"plugin {plugin}", "line 5", "ZeroDivisionError",
                          "the plugin's own bug")


def test_a_plugin_that_raises_in_an_audit_worker_is_the_same_one_line(tmp_path):
    """An audit worker hands a plugin's exception back as the InputError the parent prints
    (run here in this process: the worker function itself)."""
    from jaxpriv import audit, registry
    from jaxpriv.audit.runner import _relation_worker

    plugin = tmp_path / "raising.py"
    plugin.write_text(RAISING_PLUGIN + '''
from jaxpriv import Relation
register(Relation(id="BROKEN1", statement="eps-LDP => broken_level <= eps", premise="ldp",
                  conclusion="broken_level", bound=lambda x, *p: x, sources=(Source("test"),)))
''')
    try:
        registry.load_plugin(plugin)
        tasks = [t for t in audit.plan(audit.BUDGETS["quick"], ["BROKEN1"])
                 if t.kind == "sweep"]
        with pytest.raises(InputError, match=r"plugin .*raising.py \(line 5, in level\): "
                                             r"ZeroDivisionError"):
            _relation_worker([tasks], str(tmp_path / "audit"))
    finally:
        registry.unregister("BROKEN1")
        registry.NOTIONS.pop("broken_level", None)
        registry.LOADED_PLUGINS[:] = [p for p in registry.LOADED_PLUGINS
                                      if p != str(plugin.resolve())]


def test_a_bug_in_jaxpriv_shows_a_traceback_and_asks_for_a_report(capsys, monkeypatch):
    def bug(args):
        raise KeyError("an internal bug")

    monkeypatch.setattr(cli_listings, "_relations", bug)
    code, _, err = run_cli(["relations"], capsys)
    assert code == 3
    assert "Traceback" in err and "KeyError" in err
    assert "this is a bug in jaxpriv" in err.splitlines()[-1]


# --------------------------------------------------------------------------------------------
# property tests: random argument lists, hand-edited witnesses
# --------------------------------------------------------------------------------------------

VALUES = st.sampled_from(["0", "1", "2", "3", "-1", "8", "1e3", "0.5", "nan", "inf", "-inf",
                          "abc", "", "R1", "R5", "R14", "all", "R1*", "R99", ",", "3:1:5",
                          "0.1:1:3", "0:1:0", "0.5,1", "record", "output", "quick", "bogus",
                          "99999999999999999999", "--", "-", "{file}", "{dir}", "{missing}",
                          "{forbidden}", "{mechanism}", "{witness}", "{broken_json}"])

FLAGS = {
    "sweep": ["--relation", "--n", "--m", "--count", "--seed", "--chunk", "--memory-mb",
              "--bins", "--k", "--r", "--t-max", "--draws", "--out", "--resume",
              "--cpu-devices", "--quiet", "--plugin"],
    "search": ["--relation", "--n", "--m", "--grid", "--param", "--law", "--restarts",
               "--steps", "--lr", "--seed", "--k", "--r", "--t-max", "--sweep", "--out",
               "--resume", "--cpu-devices", "--quiet", "--plugin"],
    "audit": ["--budget", "--out", "--relations", "--seed", "--memory-mb", "--workers",
              "--cpu-devices", "--quiet", "--plugin"],
    "eval": ["--json", "--plugin"], "check": ["--parameter", "--law", "--mu", "--alpha",
                                              "--d-true", "--json", "--plugin"],
    "show": ["--json", "--plugin"], "relations": ["--json", "--plugin"],
    "notions": ["--json", "--plugin"], "": ["--version", "--help", "--bogus"],
}
SWITCHES = {"--resume", "--quiet", "--json", "--version", "--help"}


VALID = {  # a command line that works, for mutations to start from
    "sweep": ["sweep", "--relation", "R2", "--n", "3", "--m", "3", "--count", "1000", "--out",
              "{dir}/sweep"],
    "search": ["search", "--relation", "R1", "--n", "2", "--m", "2", "--grid", "0.5,1",
               "--out", "{dir}/search"],
    "audit": ["audit", "--relations", "R1", "--out", "{dir}/audit"],
    "eval": ["eval", "{mechanism}"], "check": ["check", "R3", "{witness}"],
    "show": ["show", "{witness}"], "relations": ["relations"], "notions": ["notions"],
    "": [],
}


GOOD = {  # values each flag accepts (half the time a flag gets one of these)
    "--n": ["2", "3"], "--m": ["2", "3"], "--count": ["100", "5000"], "--seed": ["0", "7"],
    "--chunk": ["64"], "--memory-mb": ["64"], "--bins": ["5"], "--k": ["2", "3"],
    "--r": ["1", "2"], "--t-max": ["100"], "--draws": ["10"], "--grid": ["0.5,1", "0.1:1:3"],
    "--param": ["0", "0.5"], "--law": ["record", "output"], "--restarts": ["2"],
    "--steps": ["10"], "--lr": ["0.01"], "--budget": ["quick", "standard"],
    "--relations": ["R1", "R2,R3", "R1*"], "--relation": ["R1", "R5", "R9", "R14", "all"],
    "--workers": ["1", "2"], "--parameter": ["0.3"], "--mu": ["1"], "--alpha": ["0.5"],
    "--d-true": ["0", "1"],
}


@st.composite
def argument_lists(draw):
    """A valid command line with up to five mutations (a flag set to a random value — the last
    one given wins —, a token dropped or a random token inserted), or random flags alone."""
    command = draw(st.sampled_from(sorted(FLAGS, key=lambda c: c == "")))  # "": no command
    argv = list(VALID[command]) if draw(st.integers(0, 2)) else ([command] if command else [])
    first = 1 if command else 0  # mutations keep the command (a wrong one is tried too)
    for _ in range(draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3, 5]))):
        what = draw(st.sampled_from(["flag", "flag", "drop", "insert"]))
        if what == "flag":
            flag = draw(st.sampled_from(FLAGS[command] + ["--nope"]))
            argv.append(flag)
            if flag not in SWITCHES and draw(st.integers(0, 9)):
                good = GOOD.get(flag)
                argv.append(draw(st.sampled_from(good)) if good and draw(st.booleans())
                            else draw(VALUES))
        elif what == "drop" and len(argv) > first:
            del argv[draw(st.integers(first, len(argv) - 1))]
        elif what == "insert":
            argv.insert(draw(st.integers(first, len(argv))), draw(VALUES))
    return argv


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    (root / "file").write_text("just text\n")
    (root / "mechanism.json").write_text(json.dumps({"K": [[0.7, 0.3], [0.2, 0.8]]}))
    (root / "witness.json").write_text(json.dumps({"K": [[0.7, 0.3], [0.2, 0.8]],
                                                   "relation": "R3", "eps": 0.1}))
    (root / "broken.json").write_text('{"K": [[0.5, ')
    (root / "dir").mkdir()
    return root


@pytest.fixture
def no_work(monkeypatch, tmp_path):
    """The work a valid command line starts (sweeps, searches, audits: tested on their own)
    replaced by a stand-in, so the property test runs every check made before the work; run in
    a scratch directory (relative --out values are created there)."""
    from jaxpriv import audit

    monkeypatch.chdir(tmp_path)

    started = []
    monkeypatch.setattr(cli_runs, "_sweep_runs", lambda args, configs: started.append(args) or 0)
    monkeypatch.setattr(cli_runs, "_search_runs", lambda args, configs: started.append(args) or 0)
    monkeypatch.setattr(audit, "run", lambda *a, **k: started.append(a) or {
        "relations": [], "seconds": 0.0})
    return started


@settings(max_examples=150 * FUZZ, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(argv=argument_lists())
def test_random_argument_lists_never_show_a_traceback(argv, hostile_files, no_work, capsys):
    files = {"{file}": hostile_files / "file", "{dir}": hostile_files / "dir",
             "{missing}": hostile_files / "missing", "{forbidden}": FORBIDDEN,
             "{mechanism}": hostile_files / "mechanism.json",
             "{witness}": hostile_files / "witness.json",
             "{broken_json}": hostile_files / "broken.json"}
    concrete = []
    for arg in argv:
        for key, value in files.items():
            arg = arg.replace(key, str(value))
        concrete.append(arg)
    started = len(no_work)
    code, _, err = run_cli(concrete, capsys)
    event(f"exit {code}" + (" (passed every check)" if len(no_work) > started else ""))
    assert code in (0, 1, 2), (concrete, err)
    assert "Traceback" not in err, (concrete, err)
    if code == 2:
        assert err.strip(), concrete
        assert len([ln for ln in err.splitlines() if "error" in ln]) == 1, (concrete, err)


WITNESS = {"K": [[0.55, 0.25, 0.2], [0.2, 0.5, 0.3], [0.25, 0.25, 0.5]],
           "prior": [0.5, 0.3, 0.2], "belief": [0.4, 0.3, 0.3], "relation": "R6", "eps": 0.2,
           "values": [0.0, 1.0, 2.0], "mu": 1.0, "alpha": 0.5, "d_true": 0, "index": 3}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10) | st.sampled_from(
        [0.0, 0.5, -1.0, 1e308, float("inf"), float("nan")]) | st.sampled_from(
        ["R1", "R5", "R6", "R9", "R14", "R15", "record", "output", "x", ""]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["k", "r", "default", "x"]), inner, max_size=3),
    max_leaves=6)


@settings(max_examples=30 * FUZZ, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.dictionaries(st.sampled_from(sorted(WITNESS) + ["records", "values", "law",
                                                                "T", "kappa1", "kappa2"]),
                             JSON_VALUES, min_size=1, max_size=3),
       drop=st.lists(st.sampled_from(sorted(WITNESS)), max_size=2))
def test_hand_edited_witnesses_are_rechecked_or_refused_in_one_line(edits, drop, tmp_path,
                                                                     capsys):
    data = {k: v for k, v in {**WITNESS, **edits}.items() if k not in drop}
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    for argv in (["show", path], ["check", "R3", path]):
        code, _, err = run_cli(argv, capsys)
        event(f"{argv[0]} {'(R3)' if argv[0] == 'check' else ''}: exit {code}")
        assert code in (0, 1, 2), (data, err)
        assert "Traceback" not in err, (data, err)
        if code == 2:
            assert len([ln for ln in err.splitlines() if ln.startswith("jaxpriv: error:")]) \
                == 1, err


@st.composite
def small_runs(draw):
    """A small sweep or search that really runs: random relation, shape, counts and options
    (some of them refused, e.g. a layout a relation cannot take)."""
    command = draw(st.sampled_from(["sweep", "search"]))
    relation = draw(st.sampled_from(["R1", "R3", "R5", "R6", "R8", "R11", "R14", "R15"]))
    argv = [command, "--relation", relation, "--quiet", "--seed", str(draw(st.integers(0, 3))),
            "--n", draw(st.sampled_from(["2", "3", "4"])), "--m", draw(st.sampled_from(["2", "3"]))]
    if draw(st.booleans()):
        argv += ["--k", "2", "--r", draw(st.sampled_from(["1", "2"]))]
    if command == "sweep":
        argv += ["--count", draw(st.sampled_from(["1", "7", "300"])),
                 "--bins", draw(st.sampled_from(["1", "3"])), "--t-max", "50", "--draws", "20"]
        if draw(st.booleans()):
            argv += ["--chunk", draw(st.sampled_from(["1", "64", "5000"]))]
    else:
        argv += ["--grid", draw(st.sampled_from(["0.5", "0.2,0.9", "0.1:0.8:2"])),
                 "--restarts", draw(st.sampled_from(["1", "2"])),
                 "--steps", draw(st.sampled_from(["1", "20"])), "--t-max", "50",
                 "--law", draw(st.sampled_from(["record", "output"]))]
        if draw(st.booleans()):
            argv += ["--param", draw(st.sampled_from(["0", "0.3"]))]
    return argv + (["--resume"] if draw(st.integers(0, 5)) == 0 else [])


@settings(max_examples=6 * FUZZ, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(argv=small_runs())
def test_random_small_runs_finish_or_fail_in_one_line(argv, tmp_path_factory, capsys):
    """No stand-in here: the command runs (sweep or search), into a fresh directory."""
    out = tmp_path_factory.mktemp("run")
    code, _, err = run_cli(argv + ["--out", str(out / "run")], capsys)
    event(f"{argv[0]}: exit {code}")
    assert code in (0, 1, 2), (argv, err)
    assert "Traceback" not in err, (argv, err)
    if code == 2:
        assert len([ln for ln in err.splitlines() if ln.startswith("jaxpriv: error:")]) == 1
    else:
        assert (out / "run" / "summary.json").exists() or "skipped" in err


def test_a_checkpoint_from_before_a_setting_was_added_still_resumes():
    """A config saved before ``prior`` existed equals today's default one (io.ADDED_SETTINGS),
    and a real difference is still named."""
    from jaxpriv.engines import io as jio
    config = {"relation": "R5", "n": 3, "prior": ""}
    assert jio.same_config({"relation": "R5", "n": 3}, config)
    assert not jio.same_config({"relation": "R5", "n": 3}, {**config, "prior": "uniform"})
    jio.check_same_config(Path("run"), {"relation": "R5", "n": 3}, config)
    with pytest.raises(InputError, match=r"different settings \(--prior\)"):
        jio.check_same_config(Path("run"), {"relation": "R5", "n": 3},
                              {**config, "prior": "uniform"})
    with pytest.raises(InputError, match="another kind of run"):
        jio.check_same_config(Path("run"), ["not", "a", "config"], {})


def test_a_statistical_sweep_smaller_than_its_monte_carlo_set_runs(tmp_path, capsys):
    """R14's Monte Carlo check takes 32 settings per chunk; a 7-setting sweep checks those 7
    (found by the random-runs property test: it was a broadcasting traceback)."""
    code, _, err = run_cli(["sweep", "--relation", "R14", "--quiet", "--count", "7",
                            "--t-max", "50", "--draws", "20", "--out", str(tmp_path / "r")],
                           capsys)
    assert code == 0, err


def test_a_resume_with_other_settings_is_one_plain_line_where_a_previous_checkpoint_exists(
        tmp_path, capsys):
    """With a previous checkpoint beside the latest, a resume with other settings read both,
    and said "the previous checkpoint cannot be used either ... start the run again with a new
    --out" (the run resumes fine with its own arguments)."""
    argv = ["sweep", "--relation", "R2", "--n", "3", "--m", "3", "--count", "4000", "--chunk",
            "1000", "--quiet", "--out", str(tmp_path)]
    assert run_cli(argv, capsys)[0] == 0
    (tmp_path / "summary.json").unlink()  # as if killed before the end: a checkpoint to resume
    assert (tmp_path / "checkpoint.previous.npz").exists()
    code, _, err = run_cli(argv + ["--resume", "--memory-mb", "1"], capsys)
    assert_one_line_error(code, err, "different settings (--memory-mb); resume with the same")
    assert "cannot be used either" not in err and err.count("different settings") == 1


def test_sigterm_ends_a_run_as_ctrl_c_does(tmp_path, capsys):
    """SIGTERM (``timeout``, a batch scheduler) ended a run silently with 143; now it unwinds as
    Ctrl-C: one line on what was kept, exit 143, the lock released (the next run in the same
    --out is told about its settings, not about a run still writing)."""
    out = tmp_path / "run"
    argv = ["sweep", "--relation", "R2", "--n", "3", "--m", "3", "--count", "400000000",
            "--chunk", "65536", "--quiet", "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "jaxpriv.cli", *argv], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(600):  # a finished chunk first (compiling takes a few seconds)
        if (out / "checkpoint.npz").exists() or proc.poll() is not None:
            break
        import time
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and err.strip().startswith("jaxpriv: terminated"), err
    assert "run again with --resume" in err and err.strip().count("\n") == 0
    code, _, err = run_cli([a if a != "400000000" else "400000001" for a in argv] + ["--resume"],
                           capsys)
    assert_one_line_error(code, err, "different settings (--count)")
