"""scripts/profile_suite.py: the suite's time per test beside JAX's trace, lower and compile
events (docs/development.md) — its summary of recorded events, and the plugin in a pytest run."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import profile_suite  # noqa: E402


def test_the_summary_adds_each_kind_per_file_test_and_program():
    records = [
        {"test": "tests/a.py::t1", "kind": "test-setup", "s": 1.0, "name": ""},
        # a rootdir above the checkout: the same test, named from tests/ on
        {"test": "ci_clone/tests/a.py::t1", "kind": "test-call", "s": 4.0, "name": ""},
        {"test": "tests/a.py::t1", "kind": "trace", "s": 0.5, "name": "f"},
        {"test": "tests/a.py::t1", "kind": "compile", "s": 2.0, "name": "jit(segment)"},
        {"test": "tests/a.py::t1", "kind": "compile", "s": 0.05, "name": "jit(add)"},
        {"test": "tests/b.py::t2", "kind": "test-call", "s": 3.0, "name": ""},
        {"test": "tests/b.py::t2", "kind": "compile", "s": 1.0, "name": "jit(segment)"},
        {"test": "tests/b.py::t2", "kind": "load", "s": 0.25, "name": ""},
    ]
    text = profile_suite.summarize(records, top=10)
    assert text.splitlines()[0] == (
        "tests 8 s; in them: trace 0 s, lower 0 s, XLA compile 3 s (1 small programs < 0.2 s: "
        "0 s; 2 large: 3 s), cache loads 0 s")
    assert "     5.0     0.5     0.0      2.0        1  tests/a.py\n" in text
    assert "      3.0      2   1.50  jit(segment)" in text


def test_a_recorded_run_is_summarized_and_a_missing_directory_is_one_line(tmp_path):
    test = tmp_path / "test_tiny.py"
    test.write_text("import jax.numpy as jnp\n\ndef test_add():\n"
                    "    assert float(jnp.arange(3.0).sum()) == 3.0\n")
    record = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
         "-p", "profile_suite", "--compile-profile", str(tmp_path / "profile"),
         "--rootdir", str(tmp_path), "-c", "/dev/null", str(test)],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT / "scripts")})
    assert record.returncode == 0, record.stdout + record.stderr
    lines = [json.loads(line) for path in (tmp_path / "profile").glob("*.jsonl")
             for line in path.open()]
    assert {r["kind"] for r in lines} >= {"test-call", "trace", "lower", "compile"}
    assert all(r["test"].endswith("test_tiny.py::test_add") for r in lines
               if r["kind"] == "compile")
    summary = subprocess.run([sys.executable, str(ROOT / "scripts" / "profile_suite.py"),
                              str(tmp_path / "profile")], capture_output=True, text=True)
    assert summary.returncode == 0 and "test_tiny.py::test_add" in summary.stdout
    missing = subprocess.run([sys.executable, str(ROOT / "scripts" / "profile_suite.py"),
                              str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"profile_suite: {tmp_path / 'nowhere'} is not a directory"]
