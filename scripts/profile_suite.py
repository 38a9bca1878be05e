"""Where the test suite's time goes: JAX's tracing, lowering and XLA compiling per test, beside
each test's time (docs/development.md, "Where the suite's time goes").

A pytest plugin and its summary in one file. Record (any pytest options; the workers each
write their own file)::

    PYTHONPATH=scripts python -m pytest -q -p profile_suite --compile-profile runs/profile

then summarize::

    python scripts/profile_suite.py runs/profile [--top 25]

It listens to JAX's public monitoring events (``jax.monitoring``): every jaxpr trace, every
lowering to MLIR and every XLA backend compile (with the program's name), and every
persistent-cache load, in the pytest processes. Processes that tests start (the CLI, audit
workers, process groups) are not seen: their time is in their test's time only — except a
pytest that a test starts (tests/test_default_compilation.py), which inherits
``PYTEST_ADDOPTS`` and records its own tests too, so its time counts twice.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from pathlib import Path

# JAX's event names (jax._src.dispatch and jax._src.compiler), what the summary calls them
EVENTS = {"/jax/core/compile/jaxpr_trace_duration": "trace",
          "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
          "/jax/core/compile/backend_compile_duration": "compile",
          "/jax/compilation_cache/cache_retrieval_time_sec": "load"}
SMALL = 0.2  # seconds: a compile below it is a small program (mostly one eager operation)

_state = {"test": "<collection>", "out": None}


# ---------------------------------------------------------------------------- the plugin

def pytest_addoption(parser):
    parser.addoption("--compile-profile", metavar="DIR", default=None,
                     help="write JAX's trace/lower/compile events per test to DIR "
                          "(scripts/profile_suite.py summarizes them)")


def pytest_configure(config):
    directory = config.getoption("--compile-profile")
    if not directory:
        return
    import jax.monitoring

    Path(directory).mkdir(parents=True, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    _state["out"] = open(Path(directory) / f"{worker}-{os.getpid()}.jsonl", "a")

    def listener(event, duration, **kwargs):
        kind = EVENTS.get(event)
        if kind is not None:
            _write({"test": _state["test"], "kind": kind, "s": duration,
                    "name": kwargs.get("fun_name", "")})

    jax.monitoring.register_event_duration_secs_listener(listener)


def _write(record):
    _state["out"].write(json.dumps(record) + "\n")
    _state["out"].flush()


def pytest_runtest_logstart(nodeid, location):
    _state["test"] = nodeid


def pytest_runtest_logreport(report):
    # under pytest-xdist the controller sees every worker's reports too (``report.node``): the
    # worker that ran the test records it
    if _state["out"] is not None and getattr(report, "node", None) is None:
        _write({"test": report.nodeid, "kind": f"test-{report.when}", "s": report.duration,
                "name": ""})


# ---------------------------------------------------------------------------- the summary

def load(directory: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(directory.glob("*.jsonl"))
            for line in path.open() if line.strip()]


def summarize(records: list[dict], top: int) -> str:
    by_file = collections.defaultdict(collections.Counter)
    by_test = collections.defaultdict(collections.Counter)
    programs = collections.defaultdict(lambda: [0, 0.0])
    totals = collections.Counter()
    for r in records:
        # a node id is relative to pytest's rootdir, which a path among the options can move
        # above the checkout (``ci_clone/tests/...``): named from ``tests/`` on
        start = r["test"].find("tests/")
        r = {**r, "test": r["test"][start:] if start > 0 else r["test"]}
        test_file = r["test"].split("::")[0]
        kind = "test" if r["kind"].startswith("test-") else r["kind"]
        if kind == "compile":
            kind_size = "compile small" if r["s"] < SMALL else "compile large"
            for bucket in (by_file[test_file], by_test[r["test"]], totals):
                bucket[f"{kind_size} n"] += 1
                bucket[kind_size] += r["s"]
            programs[r["name"]][0] += 1
            programs[r["name"]][1] += r["s"]
        for bucket in (by_file[test_file], by_test[r["test"]], totals):
            bucket[kind] += r["s"]
    lines = [f"tests {totals['test']:.0f} s; in them: trace {totals['trace']:.0f} s, lower "
             f"{totals['lower']:.0f} s, XLA compile {totals['compile']:.0f} s "
             f"({totals['compile small n']:.0f} small programs < {SMALL} s: "
             f"{totals['compile small']:.0f} s; {totals['compile large n']:.0f} large: "
             f"{totals['compile large']:.0f} s), cache loads {totals['load']:.0f} s",
             "", f"{'test s':>8} {'trace':>7} {'lower':>7} {'compile':>8} {'small n':>8}  file"]

    def row(c, name):
        return (f"{c['test']:8.1f} {c['trace']:7.1f} {c['lower']:7.1f} {c['compile']:8.1f} "
                f"{c['compile small n']:8.0f}  {name}")

    for name, c in sorted(by_file.items(), key=lambda kv: -kv[1]["test"])[:top]:
        lines.append(row(c, name))
    lines += ["", f"{'test s':>8} {'trace':>7} {'lower':>7} {'compile':>8} {'small n':>8}  test"]
    for name, c in sorted(by_test.items(), key=lambda kv: -kv[1]["test"])[:top]:
        lines.append(row(c, name))
    lines += ["", f"{'compile s':>9} {'count':>6} {'each':>6}  program"]
    for name, (count, seconds) in sorted(programs.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"{seconds:9.1f} {count:6d} {seconds / count:6.2f}  {name}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--top", type=int, default=25, help="rows per table (default 25)")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"profile_suite: {args.directory} is not a directory", file=sys.stderr)
        return 2
    records = load(args.directory)
    if not records:
        print(f"profile_suite: no recorded events in {args.directory} (record with `pytest -p "
              f"profile_suite --compile-profile {args.directory}`)", file=sys.stderr)
        return 2
    print(summarize(records, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
