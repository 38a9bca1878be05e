"""Run a benchmark once per instruction-set level, side by side (imported by the bench scripts).

NumPy, XLA and jaxpriv's native kernel each pick their code by the CPU's widest vectors, so a
figure measured on an AVX-512 machine says little about an AVX2 one (most AMD EPYC generations,
most laptops). ``--isa native avx2`` (the default) runs the benchmark in one child process per
level — ``native``: the CPU's full width; ``avx2``: all three capped at AVX2 the way ``.ci/run``
caps them (``NPY_DISABLE_CPU_FEATURES``, XLA's ``--xla_cpu_max_isa``, ``JAXPRIV_NATIVE_MARCH``),
NumPy baseline included — and prints their figures in one table. On a CPU without AVX-512 the
two levels are the same code, so the benchmark runs once and says so.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile

from jaxpriv.kernels.native import AVX2_ENVIRONMENT, cpu_flags

_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_IMPORTED = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["jaxpriv"].__file__)))
if _IMPORTED != _TREE:  # a worktree's script measuring the editable install's jaxpriv
    print(f"benchmarks: jaxpriv is imported from {_IMPORTED}, not from this checkout {_TREE}: "
          f"set PYTHONPATH={_TREE} to measure this checkout", file=sys.stderr)

LEVELS = {"native": {}, "avx2": AVX2_ENVIRONMENT}
CHILD = "JAXPRIV_BENCH_ISA"
"""Set in a child's environment to the level it runs at."""


def cpu_name() -> str:
    """The CPU's model name and widest vector extension (figures differ between machines)."""
    name = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and name in ("", "unknown CPU", "x86_64"):
                    name = line.split(":", 1)[1].strip()
    except OSError:
        pass
    flags = cpu_flags()
    vector = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{os.cpu_count()}-core {name} ({vector})"


def level_here() -> str:
    """The level this process runs at: its parent's choice, else ``native``."""
    return os.environ.get(CHILD, "native")


def add_argument(parser) -> None:
    parser.add_argument("--isa", nargs="+", choices=sorted(LEVELS), default=["native", "avx2"],
                        help="instruction-set levels to run at, each in its own process and "
                             "reported side by side (default: native avx2)")


def needs_children(args) -> bool:
    """Whether this process is the parent that runs one child per level."""
    return not (len(args.isa) == 1 and level_here() == args.isa[0])


def run_levels(args, argv: list[str]) -> dict[str, dict]:
    """Runs ``sys.argv[0]`` once per level in ``args.isa`` (each with ``--json``), streaming its
    output; returns ``{level: its JSON}``. A level that is the same code as one already run
    (``avx2`` on a CPU without AVX-512) is not run again: its entry is that level's, with
    ``"same_as"`` naming it."""
    results: dict[str, dict] = {}
    avx512 = "avx512f" in cpu_flags()
    own = _strip(argv)
    for level in args.isa:
        if level == "avx2" and not avx512 and "native" in results:
            results[level] = dict(results["native"], same_as="native")
            print("--- isa avx2: this CPU has no AVX-512, so its native run is the AVX2 run")
            continue
        if level == "native" and not avx512 and "avx2" in results:
            results[level] = dict(results["avx2"], same_as="avx2")
            continue
        env = dict(os.environ, **{CHILD: level})
        for key, value in LEVELS[level].items():
            env[key] = f"{env[key]} {value}" if key == "XLA_FLAGS" and env.get(key) else value
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "result.json")
            print(f"--- isa {level}: " + " ".join(f"{k}={v!r}" for k, v in LEVELS[level].items()),
                  flush=True)
            subprocess.run([sys.executable, sys.argv[0], *own, "--isa", level, "--json", path],
                           env=env, check=True)
            with open(path) as f:
                results[level] = json.load(f)
    return results


def _strip(argv: list[str]) -> list[str]:
    """``argv`` without its ``--isa …`` and ``--json FILE`` (the parent sets them per child)."""
    out, i = [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--json":
            i += 2
        elif arg == "--isa":
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                i += 1
        elif arg.startswith(("--json=", "--isa=")):
            i += 1
        else:
            out.append(arg)
            i += 1
    return out
