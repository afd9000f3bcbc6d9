"""The package's shape: imports form no cycle, stages depend one way, nothing imports the package
`__init__`, and notebooks are stored without outputs."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "microctx"

# Lower layers never import higher ones. `errors`, `files` and `_version` are the base every stage uses.
LAYERS = {"_version": 0, "errors": 0, "files": 0, "display": 0, "contract": 1, "grading": 2, "corpus": 3,
          "candidates": 4, "semantic": 4, "reports": 5, "api": 6, "demo": 6, "notebook": 6, "explorer": 6, "lab": 6, "cli": 7, "__main__": 8, "__init__": 8}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """The microctx modules a file imports (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "microctx":
            assert node.level == 0, f"{path}: relative import"
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if (ROOT / Path(*candidate.split("."))).with_suffix(".py").exists()
                          or (ROOT / Path(*candidate.split("."))).is_dir() else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "microctx")
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def test_no_import_cycle():
    edges = graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges.get(node, ())):
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(dep):] + [dep]))
            if dep in edges and not state.get(dep):
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if not state.get(node):
            visit(node)


def test_the_cycle_detector_finds_a_planted_cycle(tmp_path, monkeypatch):
    planted = {"microctx.a": {"microctx.b"}, "microctx.b": {"microctx.c"}, "microctx.c": {"microctx.a"}}
    monkeypatch.setattr(sys.modules[__name__], "graph", lambda: planted)
    try:
        test_no_import_cycle()
    except AssertionError as exc:
        assert "microctx.a -> microctx.b -> microctx.c -> microctx.a" in str(exc)
    else:
        raise AssertionError("the planted cycle was not found")


def test_stages_depend_one_way_and_never_on_the_package_init():
    wrong = []
    for module, deps in graph().items():
        for dep in deps:
            if dep == "microctx" and module != "microctx.__main__":
                wrong.append(f"{module} imports the package __init__")
            elif dep != "microctx" and layer(dep) > layer(module):
                wrong.append(f"{module} (layer {layer(module)}) imports {dep} (layer {layer(dep)})")
    assert not wrong, "\n".join(sorted(wrong))
    assert set(LAYERS) >= {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
                           if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())}


def test_python_dash_m_and_version():
    from microctx._version import __version__

    out = subprocess.run([sys.executable, "-m", "microctx", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"microctx {__version__}"


def test_notebooks_are_stored_without_outputs():
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert len(notebooks) >= 3
    for path in notebooks:
        cells = json.loads(path.read_text())["cells"]
        dirty = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
        assert not dirty, f"{path.name}: cells {dirty} carry outputs; clear them before committing"
