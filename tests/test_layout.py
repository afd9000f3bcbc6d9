"""The package's shape: imports form no cycle, stages depend one way, nothing imports the package
`__init__`, and notebooks are stored without outputs."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "microctx"

# Lower layers never import higher ones, in the order of the flow. The one home of the order is
# the table in docs/architecture.md: a folder (or module) may import only those in rows above its
# own or in its own row. `_scm_version` (written by setuptools-scm, untracked) is base; the package
# `__init__` is above everything (and nothing imports it).
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def documented_layers(text: str) -> dict[str, int]:
    """Folder or module name -> its row in the architecture table (0 = base)."""
    rows = [line for line in text.split("\n## ")[0].splitlines() if line.startswith("| `")]
    layers = {"_scm_version": 0}
    for number, row in enumerate(rows):
        for name in re.findall(r"`([^`]+)`", row.split("|")[1]):
            layers[name.removesuffix(".py").removesuffix("/")] = number
    layers["__init__"] = len(rows)
    return layers


LAYERS = documented_layers(ARCHITECTURE.read_text())


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
                found.add(
                    candidate
                    if (ROOT / Path(*candidate.split("."))).with_suffix(".py").exists()
                    or (ROOT / Path(*candidate.split("."))).is_dir()
                    else node.module
                )
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
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(dep) :] + [dep]))
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
    assert set(LAYERS) >= {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists())
    }


def test_the_layers_are_the_architecture_tables_rows_in_the_flows_order():
    flow = ["errors", "contract", "corpus", "grading", "candidates", "tuning", "reports", "lab", "semantic", "service"]
    assert [LAYERS[name] for name in flow] == list(range(len(flow)))
    assert LAYERS["_io"] == LAYERS["display"] == LAYERS["_version"] == 0
    assert LAYERS["api"] == LAYERS["demo"] < LAYERS["cli"] == LAYERS["__main__"] < LAYERS["__init__"]


def test_an_import_against_the_documented_order_is_found(monkeypatch):
    """lab sits above semantic in the table: lab importing semantic is against the flow (the
    reverse is allowed)."""
    planted = {"microctx.lab.explorer": {"microctx.semantic.items"}, "microctx.semantic.items": {"microctx.lab.renderer"}}
    monkeypatch.setattr(sys.modules[__name__], "graph", lambda: planted)
    try:
        test_stages_depend_one_way_and_never_on_the_package_init()
    except AssertionError as exc:
        assert str(exc).splitlines()[0] == "microctx.lab.explorer (layer 7) imports microctx.semantic.items (layer 8)"
    else:
        raise AssertionError("the planted import was not found")


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


def _imported_microctx_modules(code: str, cwd: Path = ROOT) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('\\n'.join(m for m in sys.modules if m.startswith('microctx')))"],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    return [line for line in out.stdout.splitlines() if line == "microctx" or line.startswith("microctx.")]


def test_the_version_command_imports_few_microctx_modules():
    """`microctx --version` needs the argument parser and the version, not the stages."""
    modules = _imported_microctx_modules(
        "import sys; sys.argv = ['microctx', '--version']\n"
        "from microctx.cli import main\ntry:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert len(modules) < 10, modules
    assert "microctx.candidates.builtins.llm" not in modules


def test_the_sandboxed_exact_sql_child_imports_few_microctx_modules(synthetic, tmp_path):
    """The child the runner starts for exact-sql (`python -m microctx.candidates.child ENTRY`), run
    for real on the synthetic corpus: it imports its own module and the contract it needs."""
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['registry', 'microctx.candidates.builtins.exact_sql:run', '--public', {str(synthetic.public)!r}, "
        f"'--output', {str(tmp_path / 'sub.json')!r}]\n"
        "try:\n    runpy.run_module('microctx.candidates.child', run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code"
    )
    modules = _imported_microctx_modules(code, cwd=tmp_path)  # the child writes counters.json in its folder
    assert (tmp_path / "sub.json").stat().st_size > 1000  # it really ran
    modules = [m for m in modules if m != "microctx.candidates.child"]  # the child's __main__
    assert len(modules) < 10, modules


def test_import_microctx_changes_no_global_state():
    """No renderer switched, no umask touched, no logger level changed, nothing heavy imported."""
    code = (
        "import logging, os, sys\n"
        "import altair as alt\n"
        "def levels():  # every logger's level and the root's handlers; a logger made later starts at NOTSET\n"
        "    named = logging.root.manager.loggerDict.items()\n"
        "    found = {n: (x.level, x.disabled) for n, x in named if isinstance(x, logging.Logger)}\n"
        "    return {n: v for n, v in found.items() if v != (0, False)}, logging.root.level, len(logging.root.handlers)\n"
        "before = (alt.renderers.active, os.umask(0o022), levels())\n"
        "os.umask(0o022)\n"
        "heavy = {m for m in ('pandas', 'numpy', 'ipywidgets', 'httpx', 'duckdb', 'sklearn') if m in sys.modules}\n"
        "import microctx\n"
        "microctx.__version__\n"
        "after = (alt.renderers.active, os.umask(0o022), levels())\n"
        "new_heavy = {m for m in ('ipywidgets', 'httpx', 'duckdb', 'sklearn') if m in sys.modules} - heavy\n"
        "print(before == after, sorted(new_heavy), len([m for m in sys.modules if m.startswith('microctx')]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert out[0] == "True", out
    assert out[1] == "[]", out
    assert int(out[2]) <= 3, out  # microctx, microctx._version (nothing else until used)


def test_load_ext_enables_the_offline_renderer():
    code = (
        "import altair as alt\nimport microctx\nassert alt.renderers.active != 'microctx'\n"
        "microctx.load_ipython_extension(None)\nprint(alt.renderers.active)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "microctx"


MAX_MODULE_LINES, MAX_FUNCTION_CODE_LINES = 500, 60


def code_lines(source: str, function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines of code: its body without the docstring, blank lines and comment-only
    lines (nested functions count in their parent too)."""
    body = function.body
    if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return 0
    lines = source.splitlines()[body[0].lineno - 1 : function.end_lineno]
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#"))


def oversized(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text()
        where = path.relative_to(package.parent)
        if len(source.splitlines()) > MAX_MODULE_LINES:
            found.append(f"{where}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and code_lines(source, node) > MAX_FUNCTION_CODE_LINES:
                found.append(f"{where}:{node.lineno} {node.name}: {code_lines(source, node)} lines of code")
    return found


def test_no_module_over_500_lines_and_no_function_over_60_lines_of_code():
    assert oversized() == []


def test_the_size_check_finds_a_long_module_and_a_long_function(tmp_path):
    package = tmp_path / "microctx"
    package.mkdir()
    (package / "long.py").write_text("x = 1\n" * 501)
    statements = "".join(f"    y{i} = {i}  # a comment\n\n    # only a comment\n" for i in range(61))
    (package / "fn.py").write_text(f'def f():\n    """A docstring\n\n    of lines."""\n{statements}')
    (package / "fine.py").write_text('def g():\n    """Doc."""\n' + "".join(f"    y{i} = {i}\n" for i in range(60)))
    assert oversized(package) == ["microctx/fn.py:1 f: 61 lines of code", "microctx/long.py: 501 lines"]
