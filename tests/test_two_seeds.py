"""scripts/two_seeds.py: the two-seed comparison of audits (issue 35) — verdict classes, the 2%
rule for a loose verdict, and a NaN point anywhere fails it (a NaN level is a bug: the zCDP NaN of
2026-11-27 sat in two seed-1 summaries unnoticed)."""

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "two_seeds.py"


@pytest.fixture(scope="module")
def two_seeds():
    spec = importlib.util.spec_from_file_location("two_seeds", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _audit(path: Path, rows):
    path.mkdir(parents=True)
    (path / "summary.json").write_text(json.dumps({"relations": [
        {"relation": rid, "verdict": verdict, "worst_slack": slack, "nan_count": nan,
         "kind": "lower bound"} for rid, verdict, slack, nan in rows]}))
    return path


def test_classes_and_the_two_percent_rule(two_seeds, tmp_path, capsys):
    a = _audit(tmp_path / "a", [("X", "tight only towards large zcdp (≥ 489.3)", 1.006, 0),
                                ("Y", "loose by ×1.5", 1.5, 0), ("Z", "tight", 1.0, 0)])
    b = _audit(tmp_path / "b", [("X", "tight only towards large zcdp (≥ 502.3)", 1.0057, 0),
                                ("Y", "loose by ×1.52", 1.52, 0), ("Z", "tight", 1.0, 0)])
    assert two_seeds.main([str(a), str(b)]) == 0
    assert "3 of 3 relations agree" in capsys.readouterr().out
    c = _audit(tmp_path / "c", [("X", "loose by ×1.02", 1.0151, 0),
                                ("Y", "loose by ×1.6", 1.6, 0), ("Z", "tight", 1.0, 0)])
    assert two_seeds.main([str(a), str(c)]) == 1
    out = capsys.readouterr().out
    assert "1 of 3 relations agree" in out and out.count("<-- differs") == 2


def test_a_nan_point_fails_the_comparison(two_seeds, tmp_path, capsys):
    a = _audit(tmp_path / "a", [("X", "tight", 1.0, 0)])
    b = _audit(tmp_path / "b", [("X", "tight", 1.0, 2)])
    assert two_seeds.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "1 of 1 relations agree" in out and "NaN points in 1 relation(s): X (2)" in out
