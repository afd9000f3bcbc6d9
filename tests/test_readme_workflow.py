"""The README's workflow, run as written: the code block under "With the published snapshot" is
taken from README.md and run by bash (`set -e`) in a fresh plain shell, in a folder laid out as a
checkout after `make setup`: a `.venv` link to this environment, and the `microctx.toml` that the
Makefile's own `data-setting` rule writes because the published files sit in ../shared/s8f. The
environment is clean: no MICROCTX_* variable, an empty HOME (so an empty cache); nothing is set by
the test. Slow: it runs both candidates and three reports."""

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
    assert "eval" not in block  # an eval of a failed command substitution would hide the failure
    assert len(re.findall(r"^microctx ", block, re.M)) == 9  # data, verify, 2 runs, devkit, grade, 3 reports


def clean_environment(home: Path, venv: Path) -> dict[str, str]:
    """A plain shell's environment: PATH without the test's venv, the locale, an empty HOME (and
    PYTHONPATH when the caller runs a worktree over a shared environment)."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "PYTHONPATH")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not p.startswith(str(venv)))
    env["HOME"] = str(home)
    return env


def checkout_after_setup(place: Path, s8f_folder: Path, venv: Path) -> Path:
    """place/shared/s8f (the published files) beside place/checkout, where the Makefile's
    data-setting rule (run by `make setup`) writes microctx.toml."""
    (place / "shared").mkdir(parents=True)
    (place / "shared" / "s8f").symlink_to(s8f_folder, target_is_directory=True)
    checkout = place / "checkout"
    checkout.mkdir()
    (checkout / "Makefile").write_bytes((ROOT / "Makefile").read_bytes())
    (checkout / ".venv").symlink_to(venv, target_is_directory=True)
    subprocess.run(["make", "-s", "data-setting"], cwd=checkout, check=True, capture_output=True)
    return checkout


def test_make_setup_writes_the_data_setting_only_beside_the_data(s8f, tmp_path):
    venv = Path(sys.prefix)
    checkout = checkout_after_setup(tmp_path / "beside", s8f.public.parent, venv)
    setting = (checkout / "microctx.toml").read_text()
    assert 'data_dir = "../shared/s8f"' in setting
    from microctx.corpus.snapshot import project_data_dir

    assert project_data_dir(checkout / "notebooks") == (tmp_path / "beside" / "shared" / "s8f").resolve()
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "Makefile").write_bytes((ROOT / "Makefile").read_bytes())
    subprocess.run(["make", "-s", "data-setting"], cwd=alone, check=True, capture_output=True)
    assert not (alone / "microctx.toml").exists()


def test_data_fails_loudly_where_the_workflow_would_go_on(tmp_path):
    """No setting, no cache, no network: `microctx data s8f --env F && source F` stops at `data`,
    with exit 2 and one line, and F is not written (so nothing stale is sourced)."""
    venv = Path(sys.prefix)
    env = clean_environment(tmp_path / "home", venv)
    env["MICROCTX_S8F_BASE_URL"] = "http://127.0.0.1:9"  # the discard port: nothing answers
    script = "set -u\nsource .venv/bin/activate\nmicroctx data s8f --env s8f.env && source s8f.env\necho status=$?"
    (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    run = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "status=2" in run.stdout and not (tmp_path / "s8f.env").exists()
    assert run.stderr.count("\n") == 1 and "offline? set MICROCTX_DATA_DIR" in run.stderr, run.stderr


@pytest.mark.slow
def test_readme_workflow_runs_as_written(s8f, tmp_path):
    venv = Path(sys.prefix)
    checkout = checkout_after_setup(tmp_path, s8f.public.parent, venv)
    (tmp_path / "home").mkdir()
    script = "set -euo pipefail\n" + workflow_block() + "\n"
    env = clean_environment(tmp_path / "home", venv)
    run = subprocess.run(["bash", "-c", script], cwd=checkout, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stderr[-3000:]
    assert not (tmp_path / "home" / ".cache" / "microctx").exists()  # found through microctx.toml, not downloaded
    tmp_path = checkout
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
