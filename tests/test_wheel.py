"""A built wheel stands alone: installed outside the checkout, it runs a report from another folder
(the notebooks travel inside the package)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_installed_elsewhere_runs_a_grade_report(tmp_path, s8f):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("microctx-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = sorted(n for n in names if n.startswith("microctx/reports/notebooks/"))
    assert [Path(n).name for n in shipped] == sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)
    sweeps = sorted(Path(n).name for n in names if n.startswith("microctx/tuning/sweeps/"))
    assert sweeps == sorted(p.name for p in (ROOT / "sweeps").glob("*.toml")) and "microctx/py.typed" in names

    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [sys.executable, "-c", "import microctx.reports.build as b; print(b.__file__, b.NOTEBOOKS_DIR)"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert all(Path(w).is_relative_to(site) for w in where), where  # the wheel's copy, not the checkout

    answers = json.loads(Path(s8f.answers).read_text())
    submission = elsewhere / "oracle.json"
    submission.write_text(
        json.dumps(
            {
                "schema": "fak-microcontext-submission/1",
                "corpus_sha256": answers["corpus_sha256"],
                "answers": answers["answers"],
                "aggregates": answers["aggregates"],
            }
        )
    )
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "microctx",
            "report",
            "grade",
            "--public",
            str(s8f.public),
            "--answers",
            str(s8f.answers),
            "--submission",
            str(submission),
            "--out",
            "report",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert (elsewhere / "report" / "grade_report.html").stat().st_size > 10_000
    grade = json.loads((elsewhere / "report" / "grade.json").read_text())
    assert grade["quality_pass"] is True and grade["exact_records"] == 680
