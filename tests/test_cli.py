"""The command line: output contract, exit codes, and one-line errors for bad input."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import reference
from jaxpriv import cli

ROOT = Path(__file__).resolve().parents[1]


def run_cli(capsys, *args):
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


BAD_FILES = {
    "malformed": ("{\"K\": [[0.5, 0.5]", "malformed JSON"),
    "negative": ('{"K": [[1.2, -0.2], [0.5, 0.5]]}', "negative entry"),
    "row-sum": ('{"K": [[0.5, 0.4], [0.5, 0.5]]}', "must sum to 1"),
    "ragged": ('{"K": [[0.5, 0.5], [1.0]]}', "equal length"),
    "prior-shape": ('{"K": [[0.5, 0.5], [0.5, 0.5]], "prior": [1.0]}', "prior has 1 entries"),
    "nan": ('{"K": [[NaN, 1.0], [0.5, 0.5]]}', "NaN"),
    "vector": ('{"K": [0.5, 0.5]}', "must be a matrix"),
    "strings": ('{"K": [["0.5", "0.5"]]}', "array of numbers"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["eval", "check"])
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, name, command):
    content, message = BAD_FILES[name]
    path = tmp_path / f"{name}.json"
    path.write_text(content)
    args = ["eval", str(path)] if command == "eval" else ["check", "R1", str(path)]
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("jaxpriv: error: ") and message in err


@pytest.mark.parametrize("args, message", [
    (["eval", "/nonexistent.json"], "no such file"),
    (["check", "R42", "examples/krr4.json"], "unknown relation"),
    (["check", "R6", "examples/krr4.json"], "need output values"),  # R6's own μ, α, d_true fill in
    (["check", "R6", "examples/krr4.json", "--mu", "0", "--alpha", "1", "--d-true", "0"],
     "need output values"),
    # seed 2^32 ran as seed 0 (JAX's key keeps 32 bits); 2^63 was an OverflowError traceback
    (["sweep", "--relation", "R2", "--seed", str(2**32), "--out", "x"], "--seed must be"),
    (["search", "--relation", "R2", "--seed", str(2**63), "--out", "x"], "--seed must be"),
    (["audit", "--relations", "R1", "--seed", str(2**32), "--out", "x"], "--seed must be"),
    # checked after the banner and the directory before
    (["audit", "--relations", "R1", "--workers", "0", "--out", "x"], "--workers must be a"),
    # options the relation's check does not read: refused (before: dropped, exit 0)
    (["check", "R2", "examples/krr4.json", "--law", "output"], "R2 takes no --law"),
    (["check", "R2", "examples/krr4.json", "--mu", "0.3"], "R2 takes no --mu"),
    (["check", "D6", "examples/krr4.json", "--alpha", "2", "--delta", "1e-5", "--d-true", "1"],
     "D6.a2.d1e-5 takes no --d-true"),
    # R2's condition fixes its parameter (a uniform prior): "bound taken at 0.3" meant nothing
    (["check", "R2", "examples/krr4.json", "--parameter", "0.3"], "its condition fixes it"),
    (["check", "D9", "examples/krr4.json", "--epsilon", "1", "--parameter", "0.3"],
     "(it has none)"),
])
def test_other_errors_exit_2(capsys, args, message):
    os.chdir(ROOT)
    code, out, err = run_cli(capsys, *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_usage_errors_are_one_line_in_a_real_process(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"K": [[0.5, 0.6]]}')
    for args in (["eval", str(bad)], ["frobnicate"], ["eval"], ["check", "R1"]):
        proc = subprocess.run([sys.executable, "-m", "jaxpriv.cli", *args], capture_output=True,
                              text=True, cwd=ROOT)
        assert proc.returncode == 2, args
        assert "Traceback" not in proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr


def test_eval_json_contract(capsys):
    os.chdir(ROOT)
    code, out, _ = run_cli(capsys, "eval", "examples/krr4.json", "--json")
    assert code == 0
    data = json.loads(out)
    for key in ("ldp", "mbp", "abp", "abp_record", "abp_output", "eps_unif", "eps_bel", "mi"):
        assert key in data
    with open(ROOT / "examples/krr4.json") as f:
        spec = json.load(f)
    expected = reference.levels(spec["K"], spec["prior"], spec["belief"])
    for key, value in expected.items():
        assert data[key] == pytest.approx(value, rel=1e-9, abs=1e-14), key


def test_eval_writes_infinity_for_infinite_levels(tmp_path, capsys):
    path = tmp_path / "id.json"
    path.write_text('{"K": [[1, 0], [0, 1]]}')
    code, out, _ = run_cli(capsys, "eval", str(path), "--json")
    assert code == 0 and '"ldp": Infinity' in out and json.loads(out)["mbp"] == float("inf")
    code, out, _ = run_cli(capsys, "eval", str(path))
    assert code == 0 and re.search(r"LDP level .* inf", out)


def test_eval_says_which_file_option_does_not_fit(tmp_path, capsys):
    """A file's ``q`` or ``d_true`` that does not fit the mechanism: the levels still print,
    then one line per notion it kept out, and exit 2 (the ABP and PAC lines vanished in
    silence, exit 0); a fitting ``q`` prints its details, exit 0."""
    rows = [[0.6, 0.2, 0.2], [0.2, 0.6, 0.2], [0.2, 0.2, 0.6]]
    path = tmp_path / "q.json"
    path.write_text(json.dumps({"K": rows, "q": [0.5, 0.5]}))
    code, out, err = run_cli(capsys, "eval", str(path))
    assert code == 2 and "LDP level" in out
    assert re.search(r"error: .*q\.json: abp: observation law q must have shape", err)
    path.write_text(json.dumps({"K": rows, "d_true": 7}))
    code, out, err = run_cli(capsys, "eval", str(path))
    assert code == 2 and "q.json: pac_beta: " in err
    path.write_text(json.dumps({"K": rows, "q": [0.2, 0.3, 0.5]}))
    code, out, err = run_cli(capsys, "eval", str(path))
    assert code == 0 and "error" not in err


def test_show_of_a_witness_its_relation_refuses_prints_one_line_and_nothing_before(
        tmp_path, capsys):
    """A witness whose relation refuses it (a condition parameter out of range; a statistical
    claim without its fields) is one error line, exit 2: the level table (or an empty
    ``setting:`` line) used to print first."""
    rows = json.loads((ROOT / "examples" / "krr4.json").read_text())["K"]
    path = tmp_path / "w.json"
    for witness, message in [({"K": rows, "relation": "R3", "parameter": -1}, "must lie in"),
                             ({"K": rows, "relation": "R14"}, "R14 needs")]:
        path.write_text(json.dumps(witness))
        code, out, err = run_cli(capsys, "show", str(path))
        assert (code, out) == (2, "") and message in err and err.count("\n") == 1
    path.write_text(json.dumps({"K": rows, "relation": "R4"}))
    code, out, err = run_cli(capsys, "show", str(path))
    assert code == 0 and "LDP level" in out and "holds" in out and err == ""


def test_show_reads_a_claim_witness_at_its_own_parameters(tmp_path, capsys):
    """A witness naming a claim (``"relation": "D6"``) with its parameters as fields is shown at
    them, as ``check D6 FILE`` reads it; ``show`` said to give --alpha and --delta, flags it
    does not take."""
    rows = json.loads((ROOT / "examples" / "krr4.json").read_text())["K"]
    path = tmp_path / "d6.json"
    path.write_text(json.dumps({"K": rows, "relation": "D6", "order": 2, "delta": 1e-5}))
    code, out, err = run_cli(capsys, "show", str(path))
    assert code == 0 and "D6.a2.d1e-5:" in out and "holds" in out, err
    code, out, err = run_cli(capsys, "check", "D6", str(path))
    assert code == 0 and "D6.a2.d1e-5:" in out
    path.write_text(json.dumps({"K": rows, "relation": "D6", "order": 1, "delta": 1e-5}))
    code, out, err = run_cli(capsys, "show", str(path))
    assert (code, out) == (2, "") and "α = 1 must be a finite order > 1" in err
    # a parameter missing from the file: said of the file (before: "give --alpha X --delta X",
    # flags show does not take)
    path.write_text(json.dumps({"K": rows, "relation": "D6", "order": 2}))
    code, out, err = run_cli(capsys, "show", str(path))
    assert (code, out) == (2, "") and "--" not in err and err.count("\n") == 1
    assert "without its 'delta': add it to the file" in err


def test_check_exit_codes(capsys):
    os.chdir(ROOT)
    code, out, _ = run_cli(capsys, "check", "R6", "examples/r6_counterexample.json")
    assert code == 1 and "VIOLATED" in out
    code, out, _ = run_cli(capsys, "check", "R6", "examples/r6_counterexample.json", "--json")
    data = json.loads(out)
    assert code == 1 and data["violated"] and data["slack"] < 1
    code, out, _ = run_cli(capsys, "check", "R4", "examples/krr4.json")
    assert code == 0 and "holds" in out
    code, out, _ = run_cli(capsys, "check", "R1", "examples/krr4.json")
    assert code == 0 and "condition fails" in out


def test_relations_listing(capsys):
    code, out, _ = run_cli(capsys, "relations", "--json")
    assert code == 0 and [r["id"] for r in json.loads(out)][:6] == [f"R{i}" for i in range(1, 7)]


def test_readme_quickstart_commands_are_the_ones_ci_runs():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quickstart.*?```(?:bash|sh)?\n(.*?)```", readme, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2
    assert "jaxpriv eval examples/" in commands[0] or "jaxpriv audit" in commands[0]
    assert "pytest" in commands[1]
    assert "pytest" in (ROOT / ".ci" / "run").read_text()


# the README's and the docs' Python examples run in tests/test_site.py


def test_sweep_splits_the_cpu_into_the_devices_asked_for(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "jaxpriv.cli", "sweep", "--relation", "R2",
                           "--n", "3", "--m", "3", "--count", "6000", "--cpu-devices", "3",
                           "--out", str(out), "--quiet"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads((out / "summary.json").read_text())["devices"]) == 3
    proc = subprocess.run([sys.executable, "-m", "jaxpriv.cli", "sweep", "--relation", "R2",
                           "--count", "10", "--cpu-devices", "0", "--out", str(tmp_path / "x")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--cpu-devices" in proc.stderr


def test_a_reader_that_closes_the_pipe_early_gets_no_traceback():
    """``jaxpriv eval FILE | head``: a reader that goes away is not an error of ours. The read end
    is closed before the command prints (it first starts JAX), so every write meets EPIPE."""
    proc = subprocess.Popen([sys.executable, "-m", "jaxpriv.cli", "eval", "examples/krr4.json"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait() == 0
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_search_plot_where_the_certified_slack_is_zero(capsys, tmp_path):
    """R12's certified least slack is 0 (a prior with zeros): the certified curve there is
    unbounded, drawn as a gap, not computed as claim / 0 (a RuntimeWarning before)."""
    code, out, _ = run_cli(capsys, "search", "--relation", "R12", "--n", "4", "--m", "3",
                           "--r", "2", "--steps", "10", "--restarts", "2", "--grid", "0.5,1.0",
                           "--quiet", "--out", str(tmp_path))
    assert code == 0, out
    assert (tmp_path / "envelope.png").stat().st_size > 0


def test_cache_directory_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.delenv("JAXPRIV_COMPILATION_CACHE", raising=False)
    monkeypatch.setenv("JAXPRIV_CACHE", str(tmp_path / "mine"))
    assert cli.cache_directory() == tmp_path / "mine" / "jax-compilation"
    monkeypatch.delenv("JAXPRIV_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cli.cache_directory() == tmp_path / "xdg" / "jaxpriv" / "jax-compilation"
    monkeypatch.setenv("JAXPRIV_COMPILATION_CACHE", "off")
    assert cli.cache_directory() is None
    monkeypatch.delenv("JAXPRIV_COMPILATION_CACHE")
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax-own"))
    assert cli.cache_directory() is None  # JAX's own setting wins


def seed_native_library(cache):
    """Copies this machine's built native library into the cache root ``cache`` (under the
    name it would be built as there), so that a process started with ``JAXPRIV_CACHE=cache``
    loads it instead of compiling it again."""
    import shutil
    from jaxpriv.kernels import native
    try:
        built = native.build(native.march())
    except RuntimeError:
        return  # no compiler: the processes fall back to the XLA kernel either way
    (cache / "native").mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, cache / "native" / built.name)


def _cached_cli(tmp_path):
    """A runner of ``jaxpriv ARGS`` in a subprocess whose cache root is ``tmp_path/cache`` and
    whose JAX cache settings are jaxpriv's own (every program kept, however quick), and the
    folder of its compilation cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_PERSISTENT_CACHE")
           and k != "JAX_COMPILATION_CACHE_DIR"}
    env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # every program, however quick
    cache = tmp_path / "cache"
    seed_native_library(cache)  # what is tested is XLA's cache, not a 5-16 s native build

    def run(args, **settings):
        done = subprocess.run([sys.executable, "-m", "jaxpriv.cli", *map(str, args)],
                              capture_output=True, text=True, cwd=tmp_path, timeout=300,
                              env={**env, "JAXPRIV_CACHE": str(cache), **settings})
        assert done.returncode == 0, done.stderr
        return done.stdout
    return run, cache / "jax-compilation"


def test_a_second_sweep_loads_its_programs_from_the_compilation_cache(tmp_path):
    """The persistent compilation cache is on by default (``JAXPRIV_CACHE`` moves jaxpriv's
    cache root): the first run fills it, a second run with the same shapes adds nothing.
    (``JAXPRIV_COMPILATION_CACHE=off`` writing nothing: the next test, on ``check``.)"""
    run, compiled = _cached_cli(tmp_path)

    def sweep(out, **settings):
        run(["sweep", "--relation", "R2", "--n", "3", "--m", "3", "--count", "5000", "--quiet",
             "--out", tmp_path / out], **settings)

    sweep("first")
    entries = sorted(p.name for p in compiled.iterdir())
    assert entries
    sweep("second")
    assert sorted(p.name for p in compiled.iterdir()) == entries
    first, second = ((tmp_path / name / "envelope.csv").read_text() for name in ("first", "second"))
    assert first == second


def test_a_command_that_starts_no_run_uses_the_compilation_cache_too(tmp_path):
    """``check`` (like ``eval``, ``show`` and ``compose``) compiles its float64 programs into the
    same cache: the first call fills it, a second adds nothing and prints the same; with
    ``JAXPRIV_COMPILATION_CACHE=off`` nothing is written. (``eval`` of a 4×4 mechanism: 81
    programs, ~13 s every time without the cache, ~5 s warm on a 2-core EPYC.)"""
    run, compiled = _cached_cli(tmp_path)
    check = ["check", "R5", ROOT / "examples" / "krr4.json"]
    off = run(check, JAXPRIV_COMPILATION_CACHE="off")
    assert not compiled.exists()
    first = run(check)
    entries = sorted(p.name for p in compiled.iterdir())
    assert entries
    assert run(check) == first == off
    assert sorted(p.name for p in compiled.iterdir()) == entries


def test_show_json_carries_the_levels_the_text_shows(capsys):
    """`show --json` printed the check alone, where the text prints every level first."""
    os.chdir(ROOT)
    code, out, _ = run_cli(capsys, "show", "examples/r6_counterexample.json", "--json")
    shown = json.loads(out)
    code_eval, out_eval, _ = run_cli(capsys, "eval", "examples/r6_counterexample.json", "--json")
    assert code == 1 and shown["violated"] and shown["relation"] == "R6"
    assert shown["levels"] == json.loads(out_eval)


def test_a_slack_of_0_over_0_says_why_it_reads_inf(tmp_path, capsys):
    """Bound and conclusion both 0 (one output: every level is 0): the slack reads inf, so a
    point that says nothing never reads tight, and the text says why (it read as if the bound
    were infinitely loose)."""
    path = tmp_path / "one_output.json"
    path.write_text(json.dumps({"K": [[1.0], [1.0], [1.0]]}))
    code, out, _ = run_cli(capsys, "check", "R2", str(path))
    assert code == 0 and "slack       inf  (bound = conclusion = 0: nothing to compare)" in out
