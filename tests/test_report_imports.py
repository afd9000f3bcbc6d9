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
