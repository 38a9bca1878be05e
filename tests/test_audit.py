"""``jaxpriv audit``: verdicts against the certified values and the known findings, the report
files, resuming, ``jaxpriv show`` and the scripts that redraw the figures."""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxpriv import registry
from jaxpriv import InputError, audit, cli, report
from jaxpriv.engines import certify
from jaxpriv.report.audit_report import _details

ROOT = Path(__file__).resolve().parents[1]

# the quick budget, trimmed: compilation is most of the cost either way
SMALL = dataclasses.replace(audit.BUDGETS["quick"], name="small-test", sweep_count=8192,
                            restarts=8, steps=200, stat_count=2048, stat_grid=4,
                            stat_restarts=8, stat_steps=200)
IDS = ["R2", "R5", "R6", "R7", "R14"]


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    out = tmp_path_factory.mktemp("audit")
    lines: list[str] = []
    summary = report.run_audit(SMALL, IDS, out, progress=False, log=lines.append)
    return out, summary, lines


def verdicts(summary):
    return {v["relation"]: v for v in summary["relations"]}


def test_verdicts_match_the_certified_values_and_known_findings(audited):
    out, summary, _ = audited
    v = verdicts(summary)
    assert list(v) == IDS
    # R2 (003 Lemma 5.2): certified tight, least slack exactly 1 for x ≤ log(n−1)
    assert v["R2"]["verdict"] == "tight" and v["R2"]["kind"] == "certified"
    assert v["R2"]["worst_slack"] == pytest.approx(1.0, abs=1e-6)
    assert v["R2"]["violation_count"] == 0
    # R6 (002 Thm IV.7) is false for ξ > 0.628: verified witnesses, slack below 1
    assert v["R6"]["verdict"] == "violated" and v["R6"]["violation_count"] > 0
    assert v["R6"]["worst_slack"] < 1 and v["R6"]["where"]["premise"] > 0.628
    assert (v["R6"]["certified_slack"] or 1) < 1
    # the worst is the lowest verified slack of either run, even past the saved-file cap, and
    # its witness re-checks as violated
    assert v["R6"]["worst_slack"] == pytest.approx(
        min(v["R6"]["sweep_worst_slack"], v["R6"]["search_worst_slack"]), rel=1e-9)
    assert certify.check_witness(out / v["R6"]["witness"]).violated
    # R7 (004 Thm 1): holds, loose; the exact least slack (e^{2x}−1)/tanh(x/2) (docs/certified.md)
    # falls to 4 as x → 0: the certified region reaches 6 decades below the grid's lowest
    # point, where it is least; the worst mechanism found sits above it
    x = SMALL.grid[0] * 1e-6
    r7 = v["R7"]
    assert r7["kind"] == "certified" and r7["violation_count"] == 0
    assert r7["certified_slack"] == pytest.approx(np.expm1(2 * x) / np.tanh(x / 2), rel=1e-9)
    assert r7["where"]["premise"] == pytest.approx(x, rel=1e-9)
    assert r7["worst_slack"] == r7["certified_slack"] and 4 < r7["worst_slack"] < 4 + 1e-5
    assert r7["slack_bracket"] == [r7["certified_slack"]] * 3
    assert r7["verdict"] == "loose by ×4" and r7["witness"] is None
    assert r7["sweep_worst_slack"] >= r7["certified_slack"] * (1 - 1e-9)
    # R5 (003 Thm 5.4): certified now (docs/certified.md#r5): least slack → 2 as ξ, ε → 0
    r5 = v["R5"]
    assert r5["kind"] == "certified" and r5["violation_count"] == 0
    assert 2 < r5["certified_slack"] < 2.01 and r5["verdict"] == "loose by ×2"
    assert r5["slack_bracket"][0] == pytest.approx(r5["certified_slack"], rel=1e-9)
    # no certificate: nothing bounds the least slack from below
    assert v["R14"]["kind"] == "lower bound" and v["R14"]["slack_bracket"][0] is None
    # R14 (003 Lemma C.1) is false for large ε; its slack underflows, its log does not
    assert v["R14"]["verdict"] == "violated" and v["R14"]["kind"] == "lower bound"
    assert v["R14"]["worst_log_slack"] < 0
    for rid in IDS:
        for path in v[rid]["violations"]:
            assert (out / path).exists()


def test_audit_summary_and_report_files(audited):
    out, summary, _ = audited
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["relations"] == json.loads(json.dumps(summary["relations"]))
    assert on_disk["budget"] == "small-test" and "versions" in on_disk
    md = (out / "report.md").read_text()
    for rid in IDS:
        assert re.search(rf"^\| {rid} \|", md, re.M), rid
        assert (out / "figures" / f"{rid}.png").stat().st_size > 10_000
        assert f"figures/{rid}.png" in md
    assert "**violated**" in md or "| violated |" in md
    html = (out / "report.html").read_text()
    sources = re.findall(r"src='([^']*)'", html)
    assert len(sources) == len(IDS) + 1 and all(s.startswith("data:image/png;base64,")
                                                  for s in sources)
    assert "class='violated'" in html
    for rid in IDS:
        for kind in ("sweep", "search"):
            run = json.loads((out / rid / kind / "summary.json").read_text())
            assert run["relation"] == rid


def test_resumed_audit_runs_nothing_again(audited):
    out, summary, _ = audited
    lines: list[str] = []
    again = report.run_audit(SMALL, IDS, out, progress=False, log=lines.append)
    states = [line.split()[2] for line in lines if line.split()[1] in ("sweep", "search")]
    assert states and set(states) == {"done"}
    strip = lambda s: [{k: v for k, v in r.items() if k != "seconds"} for r in s["relations"]]
    assert strip(again) == strip(summary)


def test_a_killed_run_is_resumed_from_its_checkpoint(tmp_path):
    from jaxpriv.engines import sweep
    budget = dataclasses.replace(SMALL, sweep_count=3 * 4096)
    task = next(t for t in audit.plan(budget, ["R1"]) if t.kind == "sweep")
    task = task._replace(config=dataclasses.replace(task.config, chunk=4096, block=1024))
    sweep.run(task.config, audit.run_dir(tmp_path, task), progress=False, max_chunks=1, write=report.write_sweep)
    assert audit.run_task(task, tmp_path, progress=False,
                          outputs=report.AUDIT_OUTPUTS) == "resumed"
    assert audit.run_task(task, tmp_path, progress=False, outputs=report.AUDIT_OUTPUTS) == "done"
    straight = tmp_path / "straight"
    sweep.run(task.config, straight, progress=False, write=report.write_sweep)
    resumed = audit.run_dir(tmp_path, task)
    assert (resumed / "envelope.csv").read_text() == (straight / "envelope.csv").read_text()
    for key in ("worst_slack", "violation_count", "count"):
        assert json.loads((resumed / "summary.json").read_text())[key] == \
            json.loads((straight / "summary.json").read_text())[key]


def test_another_budget_in_the_same_directory_is_refused(audited):
    out, _, _ = audited
    with pytest.raises(InputError, match="holds an audit with budget"):
        report.run_audit(audit.BUDGETS["quick"], IDS, out, progress=False, log=lambda _: None)


KILLED_AUDIT = """
import dataclasses, sys
from jaxpriv import audit, report
small = dataclasses.replace(audit.BUDGETS["quick"], **{settings!r})
report.run_audit(small, ["R2", "R6"], sys.argv[1], workers=2, progress=False, log=lambda _: None)
"""


def test_a_parallel_audit_killed_with_sigkill_stops_its_workers_and_resumes_to_the_serial_verdicts(
        audited, tmp_path):
    """The audit's parent is killed (``kill -9``) while its two workers write their relations'
    runs: the workers notice and stop (nothing keeps writing the directory), and the resumed
    parallel audit gives exactly the verdicts of the uninterrupted serial one."""
    import os
    import signal
    import time

    from jaxpriv.engines import runstate

    _, serial, _ = audited
    settings = {k: v for k, v in dataclasses.asdict(SMALL).items()
                if v != getattr(audit.BUDGETS["quick"], k)}
    parent = subprocess.Popen([sys.executable, "-c", KILLED_AUDIT.format(settings=settings),
                               str(tmp_path)])
    workers: set[int] = set()
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and parent.poll() is None:
        # the workers' run-directory locks name them; kill once a run has checkpointed
        workers |= {runstate.holder(lock.parent).get("pid") for lock in
                    tmp_path.glob("R*/*/" + runstate.LOCK)} - {None}
        if workers and (any(tmp_path.glob("R*/*/checkpoint*.npz")) or
                        any(tmp_path.glob("R*/*/search_state*.npz"))):
            break
        time.sleep(0.05)
    assert parent.poll() is None, "the audit finished before it could be killed"
    assert workers
    parent.send_signal(signal.SIGKILL)
    parent.wait()

    def alive(pid):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        try:  # a zombie (exited, not yet reaped by whoever adopted it) is not running
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return True

    def holders():  # every worker seen, and any that took a run lock after the last look
        return workers | {runstate.holder(lock.parent).get("pid") for lock in
                          tmp_path.glob("R*/*/" + runstate.LOCK)} - {None}

    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in holders()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in holders()), "an orphaned worker kept running"
    import fcntl
    # no run is still held by anyone (a worker that took a lock just before its watchdog saw
    # the parent die is named in the lock file only once it has written it: wait for the lock)
    for lock in tmp_path.glob("R*/*/" + runstate.LOCK):
        while True:
            try:
                with open(lock) as f:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except FileNotFoundError:  # released and removed by its holder meanwhile
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, \
                    f"{lock} still held: {runstate.holder(lock.parent)}"
                time.sleep(0.1)
    runs = [d for d in tmp_path.glob("R*/*") if d.is_dir()]
    assert runs and not all((d / "summary.json").exists() for d in runs)  # killed mid-way
    assert not (tmp_path / "summary.json").exists() or len(
        json.loads((tmp_path / "summary.json").read_text())["relations"]) < 2

    resumed = report.run_audit(SMALL, ["R2", "R6"], tmp_path, workers=2, progress=False,
                               log=lambda _: None)
    keep = ("verdict", "worst_slack", "where", "witness", "violation_count", "violations",
            "certified_slack", "sweep_worst_slack", "search_worst_slack", "search_max_gap")
    pick = lambda s: {v["relation"]: {k: v[k] for k in keep} for v in s["relations"]}
    assert pick(resumed) == {rid: pick(serial)[rid] for rid in ("R2", "R6")}


def test_show_rechecks_witnesses(audited, capsys):
    out, summary, _ = audited
    v = verdicts(summary)
    code = cli.main(["show", str(out / v["R6"]["witness"])])
    text = capsys.readouterr().out
    assert code == 1 and "MBP level" in text and "VIOLATED" in text
    code = cli.main(["show", str(out / v["R14"]["witness"]), "--json"])
    assert code == 1 and json.loads(capsys.readouterr().out)["violated"]
    code = cli.main(["show", str(out / v["R2"]["witness"])])
    text = capsys.readouterr().out
    assert code == 0 and "verdict     holds" in text


@pytest.mark.parametrize("args, message", [
    (["audit", "--budget", "huge", "--out", "x"], "--budget must be one of"),
    (["audit", "--relations", "R1,R99", "--out", "x"], "unknown relation"),
    (["audit", "--relations", ",", "--out", "x"], "no relation ids given"),
    (["audit", "--workers", "0", "--relations", "R1", "--out", "x"], "--workers"),
    (["show", "examples/krr4.json"], "not a witness"),
    (["show", "/nonexistent.json"], "no such file"),
])
def test_bad_audit_and_show_arguments_exit_2(capsys, monkeypatch, tmp_path, args, message):
    monkeypatch.chdir(ROOT)
    args = [str(tmp_path / a) if a == "x" else a for a in args]
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_scripts_redraw_the_report_figures(audited, tmp_path):
    out, _, _ = audited
    target = tmp_path / "r6.png"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_audit_figure.py"), str(out),
                    "R6", "--out", str(target)], check=True, capture_output=True)
    assert target.stat().st_size > 10_000
    grid = tmp_path / "grid.pdf"
    subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_audit_grid.py"), str(out),
                    "--out", str(grid)], check=True, capture_output=True)
    assert grid.read_bytes()[:4] == b"%PDF"
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_audit_figure.py"),
                          str(out), "R1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "not in the audit" in bad.stderr


def test_a_registered_false_relation_is_audited_and_reported_violated(too_tight_relation,
                                                                       tmp_path, capsys):
    rid = too_tight_relation.id
    summary = report.run_audit(SMALL, audit.relation_ids(rid), tmp_path, progress=False,
                               log=lambda _: None)
    (v,) = summary["relations"]
    assert v["relation"] == rid and v["verdict"] == "violated" and v["kind"] == "lower bound"
    assert v["worst_slack"] < 1 and v["violation_count"] > 0
    assert cli.main(["show", str(tmp_path / v["witness"])]) == 1
    assert "VIOLATED" in capsys.readouterr().out
    assert f"| {rid} |" in (tmp_path / "report.md").read_text()


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_figures_certified_curve_at_unbounded_and_infinite_points():
    """The figures' certified curve is the certified supremum (R8: finite where the claimed
    bound is infinite, x ≥ ½), ``claim / least slack`` for R6's ratio envelope (docs/certified.md:
    γ/β ≤ e^{2ξ}), and ``inf`` where the conclusion is unbounded (R12); no 0/0 or ∞/∞ on the
    way (these were RuntimeWarnings in every audit)."""
    from jaxpriv import report
    from jaxpriv.catalog import seed_papers as relations

    grid = np.linspace(0.05, 0.6, 12)
    claim, certified, slack, upper = report.claimed_and_certified(registry.get("R8"), grid, 0.0,
                                                                  4, 2)
    assert upper is None  # exact: no bracket
    cert = certify.envelope("R8", grid, n=4, r=2)
    assert np.isinf(claim[grid >= 0.5]).all()
    np.testing.assert_array_equal(certified, cert.conclusion)
    np.testing.assert_array_equal(slack, cert.min_slack)

    xi = np.linspace(0.1, 1.0, 5)
    claim, certified, _, _ = report.claimed_and_certified(registry.get("R6"), xi, 0.5, 3)
    np.testing.assert_allclose(certified, np.exp(2 * xi), rtol=1e-9)
    assert np.allclose(claim, 1 + 4 * xi)

    _, certified, slack, _ = report.claimed_and_certified(registry.get("R12"), grid, 0.0, 4, 2)
    assert (slack == 0).all() and np.isposinf(certified).all()


def test_a_certified_bracket_is_reported_as_one(audited, tmp_path):
    """A certificate that returns (attained, min_slack, upper) reads "certified bracket": the
    least slack's ends are f/upper and f/attained, in summary and report alike."""
    from jaxpriv import registry
    from jaxpriv.catalog import seed_papers as relations

    out, _, _ = audited
    base = relations.R2.certificate

    def bracket(x, eps, *, n, r=None):
        sup, _ = base(x, eps, n=n)
        return sup, None, 1.25 * sup

    registry.register(dataclasses.replace(relations.R2, id="BR1", certificate=bracket))
    try:
        import shutil
        shutil.copytree(out / "R2", tmp_path / "BR1")
        config = next(t.config for t in audit.plan(SMALL, ["R2"]) if t.kind == "search")
        v = audit.assess("BR1", tmp_path, config)._asdict()
        exact = audit.assess("R2", out, config)._asdict()
    finally:
        registry.unregister("BR1")
    assert v["kind"] == "certified bracket" and exact["kind"] == "certified"
    lower, estimate, upper = v["slack_bracket"]
    assert lower == pytest.approx(exact["certified_slack"] / 1.25, rel=1e-9)
    assert upper == pytest.approx(exact["certified_slack"], rel=1e-9)
    assert estimate <= upper * (1 + 1e-6)  # the search's own witness, if within 1e-6
    # R2 is tight (least slack 1), so a bracket [0.8, 1] no longer proves that it holds
    assert v["verdict"] == "undetermined (certified bracket straddles 1)"
    assert exact["verdict"] == "tight"
    assert report.kind_text(v) == f"certified bracket [{lower:.4g}, {upper:.4g}]"
    assert any(line.startswith("least slack (lower, estimate, upper): (0.8")
               for line in _details(v))


def test_workers_started_before_the_plan_stop_when_planning_fails(tmp_path, monkeypatch):
    """A parallel audit starts its workers while it plans; if planning fails, they stop with it
    (none is left running, or writing), and the error is the one line it was."""
    import multiprocessing
    import time as clock

    from jaxpriv.audit import runner

    def failing_plan(*args, **kwargs):
        raise InputError("planning failed here")

    monkeypatch.setattr(runner, "plan", failing_plan)
    with pytest.raises(InputError, match="planning failed here"):
        report.run_audit(SMALL, ["R2", "R6"], tmp_path / "out", workers=2, progress=False,
                         log=lambda _: None)
    deadline = clock.monotonic() + 20
    while multiprocessing.active_children() and clock.monotonic() < deadline:
        clock.sleep(0.1)
    assert not multiprocessing.active_children()


def test_jobs_start_longest_first_by_what_an_earlier_audit_took(tmp_path, monkeypatch):
    """A parallel audit starts the jobs that took longest in an earlier audit at the same
    budget first (the last to start are short: no worker idles while one finishes a long
    relation); a relation not recorded counts as the median one; without a record, or from a
    damaged file, the audit's order. Only runs from scratch are recorded."""
    from jaxpriv.audit import schedule
    from jaxpriv.engines import program_cache

    jobs = [["R1"], ["R2"], ["D6.a2.d1e-2", "D6.a4.d1e-2"], ["C6.k10.d1e-6"], ["D1"]]
    monkeypatch.setenv(program_cache.ENV, "off")
    assert schedule.longest_first(jobs, "quick") == jobs  # no record kept
    monkeypatch.setenv(program_cache.ENV, str(tmp_path / "programs"))
    assert schedule.longest_first(jobs, "quick") == jobs  # none yet
    schedule.remember_seconds("quick", {"R1": 1.0, "R2": 2.0, "D6.a2.d1e-2": 1.5,
                                        "C6.k10.d1e-6": 6.0})
    schedule.remember_seconds("standard", {"R1": 100.0})
    schedule.remember_seconds("quick", {"D6.a4.d1e-2": 1.4})  # added, the others kept
    # D6: 1.5 + 1.4; D1 unknown: the median, 1.5; ties keep the audit's order
    assert schedule.longest_first(jobs, "quick") == [
        ["C6.k10.d1e-6"], ["D6.a2.d1e-2", "D6.a4.d1e-2"], ["R2"], ["D1"], ["R1"]]
    assert schedule.longest_first(jobs, "full") == jobs
    (tmp_path / "programs" / schedule.SECONDS_FILE).write_text("{not json")
    assert schedule.longest_first(jobs, "quick") == jobs


def test_relations_sharing_a_program_go_to_one_worker_in_jobs_of_bounded_size():
    """The audit's jobs: a claim's instances together, relations of different claims whose
    search segments are one program together (D6 and D7; C1, C2, C4 and C7 at k = 10), each
    relation exactly once and in the audit's order; a job of relations that share only a
    segment takes at most JOB_LIMIT of them (one claim's instances are never split)."""
    from jaxpriv.audit import plans, schedule
    from jaxpriv.registry import programs

    quick = plans.relation_ids(None, plans.budget("quick"))
    jobs = schedule.jobs(list(quick))
    assert sorted(rid for job in jobs for rid in job) == sorted(quick)
    where = {rid: i for i, job in enumerate(jobs) for rid in job}
    assert len({where[rid] for rid in quick if rid.startswith(("D6.", "D7."))}) == 1
    assert len({where[rid] for rid in ("C1.k10.d1e-6", "C2.k10.d1e-6", "C4.k10.d1e-6",
                                       "C7.k10.d1e-3", "C7.k10.d1e-6")}) == 1
    assert where["R1"] != where["R3"]  # another prior hint: another search
    position = {rid: i for i, rid in enumerate(quick)}
    assert all(job == sorted(job, key=position.__getitem__) for job in jobs)
    everything = plans.relation_ids("all")
    jobs = schedule.jobs(list(everything))
    assert sorted(rid for job in jobs for rid in job) == sorted(everything)
    for job in jobs:
        claims = {programs.program_key(registry.get(rid)) for rid in job}
        assert len(job) <= schedule.JOB_LIMIT or len(claims) == 1, job
    for rid in everything:  # a claim's instances in one job
        key = programs.program_key(registry.get(rid))
        if key[0] == "claim":
            assert all(rid in job for job in jobs if any(
                programs.program_key(registry.get(o)) == key for o in job))


def test_the_audit_records_the_kernel_state_its_runs_recorded(tmp_path):
    """A resumed audit whose runs were all done recorded native_kernel "not used" (this process
    used nothing), though its runs had run on the kernel: it reads their own summaries."""
    import json

    from jaxpriv.audit import runner

    for rid, state in (("R5", "on"), ("R6", "not used")):
        (tmp_path / rid / "sweep").mkdir(parents=True)
        (tmp_path / rid / "sweep" / "summary.json").write_text(
            json.dumps({"versions": {"native_kernel": state}}))
    rows = [{"relation": "R5"}, {"relation": "R6"}, {"relation": "R7"}]
    assert runner._kernel_state(tmp_path, rows, "not used") == "on"
    assert runner._kernel_state(tmp_path, rows[1:], "not used") == "not used"
    (tmp_path / "R6" / "sweep" / "summary.json").write_text("{broken")
    assert runner._kernel_state(tmp_path, rows, "off: no compiler") == "on"
