"""Process groups (jaxpriv.engines.group): one sweep, search or audit over two local processes gives
what one process gives, resumes across the group, and every way of starting a group wrongly is
one line and exit 2, within the timeout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jaxpriv.engines import group
from jaxpriv.core.errors import InputError

SWEEP = ["sweep", "--relation", "R6", "--n", "3", "--m", "3", "--count", "49152", "--seed", "3",
         "--chunk", "8192", "--quiet"]
SEARCH = ["search", "--relation", "R5", "--n", "3", "--m", "3", "--grid", "0.5:2:3",
          "--restarts", "16", "--steps", "120", "--seed", "1", "--quiet"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jaxpriv(args, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "jaxpriv.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "JAX_PLATFORMS": "cpu"}, **kwargs)


def _finish(process: subprocess.Popen, timeout: float = 300) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def _in_group(args, out: Path, size: int = 2, extra=(), port: int | None = None):
    """``jaxpriv ARGS`` started as a group of ``size`` local processes (one CPU device each),
    all writing ``--out out``: their ``(returncode, stdout, stderr)``."""
    port = port or _free_port()
    processes = [_jaxpriv([*args, "--out", out, "--cpu-devices", 1, "--coordinator",
                           f"127.0.0.1:{port}", "--num-processes", size, "--process-id", rank,
                           *extra]) for rank in range(size)]
    return [_finish(p) for p in processes]


def _alone(args, out: Path, devices: int = 2):
    return _finish(_jaxpriv([*args, "--out", out, "--cpu-devices", devices]))


def _files(directory: Path, pattern: str) -> dict[str, str]:
    return {str(p.relative_to(directory)): p.read_text()
            for p in sorted(directory.glob(pattern))}


def _same_run(a: Path, b: Path) -> None:
    """Envelope, witnesses and verdict of two run directories are equal (times aside)."""
    assert (a / "envelope.csv").read_text() == (b / "envelope.csv").read_text()
    assert _files(a, "witnesses/**/*.json") == _files(b, "witnesses/**/*.json")
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    for key in ("worst_slack", "violations", "violation_count", "count", "config"):
        assert sa.get(key) == sb.get(key), key


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    base = tmp_path_factory.mktemp("alone")
    assert _alone(SWEEP, base / "sweep")[0] == 1  # R6 is false: violations, exit 1
    assert _alone(SEARCH, base / "search")[0] == 0
    return base


def test_a_group_sweep_finishes_what_one_process_began_as_one_process_would(alone, tmp_path):
    """A sweep killed after two chunks (here: stopped by max_chunks) is finished by a group of
    two processes with --resume (four chunks split over the group), to exactly the uninterrupted
    one-process result; process 0 prints, process 1 writes nothing. (One test for both: a
    fresh group sweep computed the same chunks the same way, 25 s more.)"""
    code = subprocess.run([sys.executable, "-c", (
        "import jax; jax.config.update('jax_num_cpu_devices', 2)\n"
        "from jaxpriv.engines import sweep\n"
        "c = sweep.make_config('R6', 3, 3, 49152, seed=3, chunk=8192)\n"
        f"sweep.run(c, {str(tmp_path / 'sweep')!r}, progress=False, max_chunks=2)\n")],
        env={**os.environ, "JAX_PLATFORMS": "cpu"}, timeout=300).returncode
    assert code == 0
    results = _in_group([*SWEEP, "--resume"], tmp_path / "sweep")
    assert [code for code, _, _ in results] == [1, 1], results  # both report the violation
    (_, out0, err0), (_, out1, err1) = results
    assert "resuming sweep R6" in err0
    assert "R6: 49,152 mechanisms" in out0 and out1 == ""  # process 0 prints, 1 writes nothing
    assert "process 1 of 2 joined" in err1
    summary = json.loads((tmp_path / "sweep" / "summary.json").read_text())
    assert summary["violation_count"] > 0 and summary["violations"]
    _same_run(tmp_path / "sweep", alone / "sweep")


def test_a_directory_process_0_refuses_stops_the_whole_group(alone, tmp_path):
    """Process 0 cannot use its --out (it holds a finished sweep; no --resume): it says why, and
    the other process stops too instead of waiting for it."""
    import shutil
    shutil.copytree(alone / "sweep", tmp_path / "sweep")
    (code0, _, err0), (code1, _, err1) = _in_group(SWEEP, tmp_path / "sweep")
    assert code0 == code1 == 2
    assert "already holds a sweep R6; use --resume, or a new --out" in err0
    assert err1.strip().splitlines()[-1] == ("jaxpriv: error: process 0 could not open its run "
                                             "directory for the sweep R6 (see its message)")


def test_a_group_audit_resumes_and_refuses_another_plan_on_every_process(tmp_path):
    """An audit run twice into one --out by a group: the second finds every task done (process
    0's directory decides; the others hold nothing to assess) and reports the same verdict; a
    third with another seed is refused by process 0, and the other process stops too."""
    audit = ["audit", "--budget", "quick", "--relations", "R2", "--quiet"]
    first = _in_group(audit, tmp_path / "audit")
    assert [code for code, _, _ in first] == [0, 0], first
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text())
    again = _in_group(audit, tmp_path / "audit")
    assert [code for code, _, _ in again] == [0, 0], again
    assert json.loads((tmp_path / "audit" / "summary.json").read_text())["relations"] == \
        summary["relations"]
    (code0, _, err0), (code1, _, err1) = _in_group([*audit, "--seed", "4"], tmp_path / "audit")
    assert code0 == code1 == 2
    assert "holds an audit with budget 'quick', seed 0" in err0
    assert err1.strip().splitlines()[-1] == ("jaxpriv: error: process 0 could not open its "
                                             "audit directory (see its message)")


def test_a_two_process_search_equals_one_process(alone, tmp_path):
    results = _in_group(SEARCH, tmp_path / "search")
    assert [code for code, _, _ in results] == [0, 0], results
    a, b = tmp_path / "search", alone / "search"
    assert (a / "envelope.csv").read_text() == (b / "envelope.csv").read_text()
    assert _files(a, "witnesses/**/*.json") == _files(b, "witnesses/**/*.json")


def test_a_group_that_does_not_fill_is_one_line_within_the_timeout(tmp_path):
    port = _free_port()
    began = time.monotonic()
    lone = [_jaxpriv([*SWEEP, "--out", tmp_path / str(rank), "--coordinator",
                      f"127.0.0.1:{port + rank}", "--num-processes", 2, "--process-id", rank,
                      "--coordinator-timeout", 2]) for rank in (0, 1)]
    (code0, _, err0), (code1, _, err1) = (_finish(p, 60) for p in lone)
    assert time.monotonic() - began < 50
    assert code0 == code1 == 2
    assert err0.strip().splitlines()[-1].startswith("jaxpriv: error: only 1 of 2 processes")
    assert "cannot reach the coordinator at 127.0.0.1:" in err1
    assert "Traceback" not in err0 + err1 and len(err1.strip().splitlines()) == 1


def test_a_group_started_with_different_commands_is_refused_on_every_process(tmp_path):
    port = _free_port()
    first = _jaxpriv([*SWEEP, "--out", tmp_path / "a", "--coordinator", f"127.0.0.1:{port}",
                      "--num-processes", 2, "--process-id", 0, "--coordinator-timeout", 60])
    other = [*SWEEP, "--out", tmp_path / "b", "--coordinator", f"127.0.0.1:{port}",
             "--num-processes", 2, "--process-id", 1, "--coordinator-timeout", 60]
    other[other.index("--seed") + 1] = "4"
    second = _jaxpriv(other)
    for code, _, err in (_finish(first, 120), _finish(second, 120)):
        assert code == 2
        assert err.strip().splitlines()[-1] == (
            "jaxpriv: error: process 1 was started with a different command than process 0 "
            "(--seed); every process of a group runs the same command (only --process-id, "
            "--out and --cpu-devices may differ)")
    assert not (tmp_path / "a" / "summary.json").exists()


@pytest.mark.parametrize("flags, environ, needle", [
    (dict(coordinator="h:1"), {}, "needs --num-processes, --process-id as well"),
    ({}, {"JAX_NUM_PROCESSES": "2"}, "needs JAX_COORDINATOR_ADDRESS, JAX_PROCESS_ID as well"),
    (dict(coordinator="h", num_processes=2, process_id=0), {}, "give the coordinator as HOST"),
    (dict(coordinator="h:70000", num_processes=2, process_id=0), {}, "HOST:PORT"),
    (dict(coordinator="h:1", num_processes=2, process_id=2), {}, "is not below"),
    (dict(coordinator="h:1", num_processes=0, process_id=0), {}, "must be >= 1"),
    ({}, {"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "two",
          "JAX_PROCESS_ID": "0"}, "JAX_NUM_PROCESSES must be an integer"),
    (dict(coordinator="h:1", num_processes=2, process_id=0, timeout=0.0), {}, "timeout"),
])
def test_group_settings_name_what_is_wrong(flags, environ, needle):
    with pytest.raises(InputError, match=needle):
        group.settings(**flags, environ=environ)


def test_group_settings_from_flags_or_environment():
    assert group.settings(environ={}) is None
    assert group.settings("h:1", 1, 0, environ={}) is None  # one process is no group
    found = group.settings(environ={"JAX_COORDINATOR_ADDRESS": "[::1]:23456",
                                    "JAX_NUM_PROCESSES": "4", "JAX_PROCESS_ID": "3"})
    assert found == group.Group("::1", 23456, 4, 3, group.DEFAULT_TIMEOUT)
    assert found.address == "[::1]:23456"  # as JAX takes an IPv6 address
    flags = group.settings("10.0.0.1:99", 2, 1, timeout=5.0,
                           environ={"JAX_COORDINATOR_ADDRESS": "ignored:1"})
    assert (flags.address, flags.size, flags.rank, flags.timeout) == ("10.0.0.1:99", 2, 1, 5.0)


def test_outside_a_group_the_group_functions_are_the_identity():
    assert (group.size(), group.rank(), group.is_writer()) == (1, 0, True)
    assert group.agree(7) == 7 and group.share_bytes(b"x") == b"x"
    assert group.share_bytes(None) is None


def test_a_connection_to_itself_is_not_a_coordinator():
    # Linux completes a connect to a free local port from that same port ("self-connect"); the
    # lone process 1 of the test above once met it in CI, read its own hello back as an answer
    # and went on into JAX, which aborted (exit -6). Such a connection is seen and refused.
    with socket.socket() as alone:
        alone.bind(("127.0.0.1", 0))
        port = alone.getsockname()[1]
        alone.connect(("127.0.0.1", port))
        assert group._connected_to_itself(alone)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        with socket.create_connection(listener.getsockname()) as client:
            assert not group._connected_to_itself(client)


def test_a_coordinator_that_is_not_a_jaxpriv_lobby_is_one_line(tmp_path):
    # an echo server on the coordinator's port answers the hello with the hello itself: no
    # error in it, and still no admission; the process stops before JAX is started
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def echo():
        connection, _ = listener.accept()
        with connection:
            connection.sendall(connection.recv(4096))

    threading.Thread(target=echo, daemon=True).start()
    try:
        port = listener.getsockname()[1]
        with pytest.raises(InputError, match="something other than a jaxpriv lobby's answer"):
            group.join(group.Group("127.0.0.1", port, 2, 1, 5.0), "{}")
    finally:
        listener.close()
