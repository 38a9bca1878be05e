"""The package's layers import one way: a module imports only from its own layer or lower ones.

core (mathematics) → kernels → registry → catalog → engines → audit → report → cli; the package's
own ``__init__`` (the public API) and ``__main__`` sit on top. Imports inside functions count too:
a lazy import that points up is still a dependency that points up.
"""

import ast
import re
from pathlib import Path

import pytest

import jaxpriv

LAYERS = ("core", "kernels", "registry", "catalog", "engines", "audit", "report", "cli")
TOP = len(LAYERS)  # jaxpriv/__init__.py, jaxpriv/__main__.py


def layer_of(module: str) -> int:
    """The layer of a dotted module name inside jaxpriv (``jaxpriv`` itself is the top)."""
    parts = module.split(".")
    if parts[0] != "jaxpriv":
        raise ValueError(f"{module} is not a jaxpriv module")
    if len(parts) == 1 or parts[1] in ("__init__", "__main__"):
        return TOP
    if parts[1] not in LAYERS:
        raise ValueError(f"{module}: jaxpriv/{parts[1]} is in no layer; add it to LAYERS")
    return LAYERS.index(parts[1])


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """``(line, dotted jaxpriv module)`` of every import in ``source`` (``from jaxpriv import x``
    names the subpackage ``jaxpriv.x`` where ``x`` is one, else the package itself)."""
    package = module if module.endswith("__init__") else module.rsplit(".", 1)[0]
    package = package.removesuffix(".__init__")
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("jaxpriv")]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            if base == "jaxpriv":
                found += [(node.lineno, f"jaxpriv.{a.name}" if a.name in LAYERS else "jaxpriv")
                          for a in node.names]
            elif base.startswith("jaxpriv."):
                found.append((node.lineno, base))
    return found


def upward_imports(root: Path) -> list[str]:
    """Every import under ``root`` (the ``jaxpriv`` directory) that points to a higher layer."""
    problems = []
    for path in sorted(root.rglob("*.py")):
        module = ".".join(("jaxpriv",) + path.relative_to(root).with_suffix("").parts)
        own = layer_of(module.removesuffix(".__init__"))
        for line, target in imported_modules(path.read_text(), module):
            if layer_of(target) > own:
                problems.append(f"{path.relative_to(root.parent)}:{line}: "
                                f"{LAYERS[own] if own < TOP else 'jaxpriv'} imports {target}")
    return problems


def test_every_import_points_down_or_sideways():
    root = Path(jaxpriv.__file__).parent
    assert upward_imports(root) == []


def test_every_module_is_in_a_layer():
    root = Path(jaxpriv.__file__).parent
    loose = [p.name for p in root.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert loose == [], "modules outside the layer subpackages"
    assert sorted(p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()) \
        == sorted(LAYERS)


@pytest.mark.parametrize("line, points_up", [
    ("from jaxpriv.engines import sweep", True),
    ("from jaxpriv import report", True),
    ("from jaxpriv import Mechanism", True),  # the public API is the top
    ("import jaxpriv.cli", True),
    ("from jaxpriv.core import notions", False),
    ("from jaxpriv import registry", True),
    ("from jaxpriv.kernels import samplers", False),
    ("from jaxpriv.kernels.native import build", False),
    ("    from jaxpriv.audit.plan import Budget", True),  # a lazy import counts too
])
def test_the_check_fails_on_an_import_that_points_up(tmp_path, line, points_up):
    """A kernel module with the import ``line`` (inside a function where indented)."""
    kernels = tmp_path / "jaxpriv" / "kernels"
    kernels.mkdir(parents=True)
    (tmp_path / "jaxpriv" / "__init__.py").write_text("")
    (kernels / "__init__.py").write_text("")
    body = f"def f():\n{line}\n" if line.startswith(" ") else f"{line}\n"
    (kernels / "fast.py").write_text(body)
    problems = upward_imports(tmp_path / "jaxpriv")
    assert bool(problems) == points_up, problems


def module_graph(root: Path) -> dict[str, set[str]]:
    """``module -> the jaxpriv modules it imports`` (packages as their ``__init__``)."""
    graph = {}
    for path in sorted(root.rglob("*.py")):
        module = ".".join(("jaxpriv",) + path.relative_to(root).with_suffix("").parts)
        graph[module.removesuffix(".__init__")] = {
            target for _, target in imported_modules(path.read_text(), module)}
    return graph


def test_no_import_cycle_within_a_layer():
    """Across layers a cycle is impossible (imports point down); within one, none either — a
    package importing its own submodules (to re-export them) is not a cycle."""
    graph = module_graph(Path(jaxpriv.__file__).parent)
    state: dict[str, str] = {}

    def visit(node, path):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph or node.startswith(nxt + ".") or nxt == node:
                continue  # a submodule's import of its own package
            if state.get(nxt) == "open":
                raise AssertionError(f"import cycle: {' -> '.join(path + [nxt])}")
            if nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in graph:
        if node not in state:
            visit(node, [node])


RELATION_ID = re.compile(r"""["'][RDC]\d{1,2}[."']""")


def test_no_module_outside_the_registry_and_catalog_names_a_relation():
    """Engines, the audit, the report and the command line act on records, never on an id."""
    root = Path(jaxpriv.__file__).parent
    named = [str(p.relative_to(root.parent)) for p in sorted(root.rglob("*.py"))
             if p.relative_to(root).parts[0] not in ("registry", "catalog")
             and RELATION_ID.search(p.read_text())]
    assert named == []


def test_the_package_data_names_files_that_exist():
    """A non-editable install ships what ``pyproject.toml`` names (the native kernel's C++
    source among them: without it the kernel is silently unavailable): every pattern must match
    a file of the package."""
    import tomllib

    root = Path(jaxpriv.__file__).parent
    patterns = tomllib.loads((root.parent / "pyproject.toml").read_text()
                             )["tool"]["setuptools"]["package-data"]["jaxpriv"]
    assert [p for p in patterns if not list(root.glob(p))] == []
    assert list(root.glob("kernels/native/*.cc"))
