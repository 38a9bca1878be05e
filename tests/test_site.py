"""The documentation: the site builds without a warning, and every Python example runs.

The site (``mkdocs.yml``, pages under ``docs/``, the API reference read from the docstrings by
mkdocstrings) is built with ``--strict``, so a broken link, a page missing from the navigation or
a docstring griffe cannot parse fails here. Every fenced ``python`` block of ``README.md`` and of
the pages under ``docs/`` runs as written (each asserts what it shows); shell blocks do not run
(the Quickstart's commands are the ones CI runs: ``tests/test_cli.py``).
"""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

# what the examples run for minutes: covered elsewhere (tests/test_audit.py runs audit.run)
SLOW = ("run_audit(", "audit.run(")


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


EXAMPLES = [(path, i, block) for path in markdown_files()
            for i, block in enumerate(python_blocks(path))]


def test_the_readme_and_the_docs_have_python_examples():
    files = {path.relative_to(ROOT).as_posix() for path, _, _ in EXAMPLES}
    assert {"README.md", "docs/getting-started.md", "docs/plugins.md"} <= files
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path,index,example", EXAMPLES,
                         ids=[f"{p.relative_to(ROOT).as_posix()}:{i}" for p, i, _ in EXAMPLES])
def test_python_example_runs(path, index, example, tmp_path, monkeypatch):
    """The block runs as written, in a scratch directory (what it writes lands there); what it
    registers is removed afterwards."""
    if any(slow in example for slow in SLOW):
        pytest.skip("runs an audit (minutes); tests/test_audit.py covers the audit")
    from jaxpriv import registry

    monkeypatch.chdir(tmp_path)
    relations, notions = set(registry.REGISTRY), set(registry.NOTIONS)
    claims = set(registry.CLAIMS)
    try:
        exec(compile(example, f"{path.relative_to(ROOT)} (block {index})", "exec"), {})
        # a claim the docs teach has a bound that is a number or ±inf wherever its premise
        # may be (docs/plugins.md's TVD was ∞/∞ = NaN at ε(δ) = ∞, a mechanism with a zero)
        for name in set(registry.REGISTRY) - relations:
            relation = registry.get(name)
            if isinstance(relation, registry.Relation) and relation.kind != "statistical":
                at = np.asarray(registry.bound_at(relation, np.array([0.0, 1.0, np.inf])))
                assert not np.isnan(at).any(), (name, at)
    finally:
        for name in set(registry.REGISTRY) - relations:
            registry.unregister(name)
        for name in set(registry.NOTIONS) - notions:
            registry.unregister(name)
        for name in set(registry.CLAIMS) - claims:
            del registry.CLAIMS[name]


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install '.[test]')")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed (pip install '.[test]')")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(site)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    for page in ("index.html", "getting-started/index.html", "audit/index.html",
                 "plugins/index.html", "findings/index.html", "cli/index.html",
                 "notions/index.html", "certified/index.html", "performance/index.html",
                 "multihost/index.html", "audit_grid.png"):
        assert (site / page).is_file(), page
    # the API reference is rendered from the docstrings, the lazy names' targets included
    api = {name: (site / "api" / name / "index.html").read_text()
           for name in ("jaxpriv", "registry", "core", "engines", "audit")}
    assert 'id="jaxpriv.register"' in api["jaxpriv"] and 'id="jaxpriv.Relation"' in api["jaxpriv"]
    # griffe reads `jaxpriv.check` as whatever `jaxpriv.registry.check` is: a submodule of that
    # name would shadow the re-exported function and drop it from the reference
    assert 'id="jaxpriv.check"' in api["jaxpriv"], "jaxpriv.check is missing from the reference"
    assert 'id="jaxpriv.core.families.randomized_response"' in api["core"]
    assert 'id="jaxpriv.engines.sweep.run"' in api["engines"]
    assert 'id="jaxpriv.engines.search.make_config"' in api["engines"]
    assert 'id="jaxpriv.audit.Budget"' in api["audit"]
