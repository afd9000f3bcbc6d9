"""No needless import in a report (issue 24): `rfc3987_syntax` (about 3 s of grammar compiling at
import, pulled in by jsonschema's format checkers through jupyter_events and nbformat) stays out of
the parent that runs papermill and out of the kernel that runs the notebook; jsonschema gets the
lighter `rfc3987` it prefers instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kernel_support import run_in_kernel

ROOT = Path(__file__).resolve().parents[1]

PARENT = """
import sys, tempfile
from pathlib import Path
import nbformat, papermill
from microctx.reports import build
with tempfile.TemporaryDirectory() as tmp:
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        "import sys, altair, jsonschema, microctx.reports.tables, microctx.reports.charts\\n"
        "jsonschema.FormatChecker()\\n"
        "print('KERNEL', sorted(m for m in sys.modules if m.startswith('rfc3987')))")])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source, done = Path(tmp, "in.ipynb"), Path(tmp, "out.ipynb")
    nbformat.write(book, source)
    papermill.execute_notebook(str(source), str(done), kernel_name="python3", progress_bar=False)
    build.html_export(done)
    print(nbformat.read(done, as_version=4).cells[0].outputs[0]["text"].strip())
print("PARENT", sorted(m for m in sys.modules if m.startswith("rfc3987")))
"""


@pytest.mark.slow
def test_rfc3987_syntax_is_imported_neither_by_the_parent_nor_by_the_kernel():
    done = subprocess.run(
        [sys.executable, "-c", PARENT], env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines() if line.startswith(("KERNEL", "PARENT")))
    assert set(lines) == {"KERNEL", "PARENT"}
    for where, modules in lines.items():
        assert "rfc3987_syntax" not in modules, f"the {where.lower()} imported rfc3987_syntax: {modules}"


# ---------------------------------------------------------------- the kernel a report starts ahead


def test_the_kernel_preloads_what_the_grade_notebook_imports_itself():
    from microctx.reports.build import NOTEBOOKS, NOTEBOOKS_DIR
    from microctx.reports.kernels import notebook_imports, preload_arguments

    grade = NOTEBOOKS_DIR / NOTEBOOKS["grade"]
    # top-level imports only: `io` and microctx.semantic sit under `if semantic:` and are left out
    assert notebook_imports(grade) == [
        "pathlib.Path",
        "pandas",
        "IPython.display.HTML",
        "IPython.display.Markdown",
        "IPython.display.display",
        "microctx.reports.charts",
        "microctx.reports.tables",
        "microctx.reports.views",
    ]
    (argument,) = preload_arguments(grade, ["scipy.special"])
    assert (
        argument.startswith("--IPKernelApp.exec_lines=") and "'scipy.special'" in argument and "del _microctx_start" in argument
    )


def _kernel_modules(km, code: str = "import sys; print(' '.join(sys.modules))") -> set[str]:
    return set(run_in_kernel(km, code).split())


@pytest.mark.slow
def test_a_preloaded_kernel_imports_nothing_the_grade_notebook_does_not(tmp_path, s8f, s8f_answers):
    """What the kernel loads as it starts (the notebook's imports, `LATER_IMPORTS`; its chart
    renderer process readies vl-convert) is a subset of what a plain kernel holds after running
    the grade notebook: no needless import."""
    from microctx.contract.canonical import dumps
    from microctx.grading.examples import demo_submissions
    from microctx.reports import build

    planted = tmp_path / "planted.json"
    planted.write_bytes(dumps(demo_submissions(s8f_answers)["planted"]))
    preloaded, plain = build.SharedKernels(), build.SharedKernels()
    try:
        preloaded.start(build.NOTEBOOKS_DIR / build.NOTEBOOKS["grade"], build.LATER_IMPORTS["grade"])
        loaded = _kernel_modules(preloaded.kernel())
        drawing = _kernel_modules(preloaded.kernel(), "from microctx.reports import renderer; print(renderer.current().alive())")
        staging = tmp_path / "plain"
        staging.mkdir()
        params = {"public": str(s8f.public), "answers": str(s8f.answers), "submission": str(planted)}
        build.execute("grade", params, staging, progress=False, kernels=plain)  # a kernel started without preloading
        used = _kernel_modules(plain.kernel())
    finally:
        preloaded.close()
        plain.close()
    assert {"pandas", "microctx.reports.renderer", "microctx.grading.ledger"} <= loaded
    # vega runs in the kernel's renderer process, started as the kernel starts (renderer.py)
    assert "vl_convert" not in loaded and drawing == {"True"}
    # the grade report's charts are Vega-Lite dicts (no altair, 0.25 s); a kernel has threads, so
    # its statistics import the whole scipy.special (grading/special.py), preloaded as it starts
    assert "altair" not in loaded | used
    assert {"scipy.special", "scipy.special._ufuncs"} <= loaded & used
    # the kernel starts OpenBLAS on one thread (kernels.kernel_environment): the bootstrap then
    # needs no threadpoolctl to limit it
    assert "threadpoolctl" not in used
    assert set(build.LATER_IMPORTS["grade"]) <= used
    needless = sorted(loaded - used - {"microctx.reports.kernel_start"})
    assert not needless, f"the preload imports what the grade notebook does not: {needless[:20]}"


def test_the_export_reuses_the_exporter_readied_while_the_kernel_boots(tmp_path, monkeypatch):
    """`ready_export` leaves this thread's exporter with its templates compiled: the report's own
    export compiles none (a new exporter compiled the lab templates again, 50 ms) and its bytes
    are a new exporter's."""
    import threading

    import jinja2
    import nbformat

    from microctx.reports import build

    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A title\n\n| a | b |\n|---|---|\n| 1 | 2 |")])
    path = tmp_path / "book.ipynb"
    nbformat.write(book, path)
    fresh: list[bytes] = []
    other = threading.Thread(target=lambda: fresh.append(build.html_export(path)))  # a thread's first exporter
    other.start()
    other.join()
    build.ready_export()
    compiled: list[object] = []
    real = jinja2.Environment.compile
    monkeypatch.setattr(jinja2.Environment, "compile", lambda env, *a, **k: compiled.append(a) or real(env, *a, **k))
    assert build.html_export(path) == fresh[0]
    assert compiled == []
