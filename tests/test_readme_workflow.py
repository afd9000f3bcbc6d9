"""The README's workflow, run as written: the code block under "With the published snapshot" is
taken from README.md and run by bash (`set -e`) in an empty folder holding only a `.venv` link to
this checkout's environment, as a reader would after `make setup`. Slow: it runs both candidates
and three reports."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def workflow_block() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("With the published snapshot")
    lines = text[start:].splitlines()[1:]
    block = []
    for line in lines:
        if line.startswith("    "):
            block.append(line[4:])
        elif block and not line.strip():
            break
    return "\n".join(block)


def test_the_block_is_the_workflow():
    block = workflow_block()
    assert block.startswith("source .venv/bin/activate") and "mkdir -p out" in block
    assert len(re.findall(r"^microctx ", block, re.M)) == 8  # verify, 2 runs, devkit, grade, 3 reports


@pytest.mark.slow
def test_readme_workflow_runs_as_written(s8f, tmp_path):
    venv = Path(sys.prefix)
    (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    script = "set -euo pipefail\n" + workflow_block() + "\n"
    env = {**os.environ, "MICROCTX_DATA_DIR": str(s8f.public.parent)}
    env.pop("VIRTUAL_ENV", None)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(venv)))
    run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    for path in (
        "out/sql.json",
        "out/sql.run.json",
        "out/devkit.json",
        "out/text.json",
        "out/sql-grade.json",
        "out/sql-grade.facts.csv",
        "reports/text/grade_report.html",
        "reports/compare/compare_candidates.html",
        "reports/corpus/corpus_overview.html",
    ):
        assert (tmp_path / path).is_file(), path
