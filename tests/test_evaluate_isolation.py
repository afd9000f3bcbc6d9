"""`evaluate` never runs a candidate where it could find the answers: a selected configuration with
`isolation = "process"` is refused unless explicitly allowed, and then the manifest and
evaluation.json say the look was unprotected."""

from __future__ import annotations

import orjson

from microctx.cli import main
from microctx.grading.ledger import entries
from microctx.tuning.sweep import load_sweep, run_sweep
from tests.test_sweep_fixes import sweep_file


def test_a_process_isolated_configuration_is_refused_unless_allowed(tmp_path, s8f, devkit, capsys, monkeypatch):
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "ledger.db"))
    spec = load_sweep(sweep_file(tmp_path, "miss = [0]", sandbox='isolation = "process"'))
    assert run_sweep(spec, s8f.public, devkit, tmp_path / "out", workers=1, progress=False).failed == 0
    selected = str(tmp_path / "out" / "selected.json")
    base = ["evaluate", selected, "--public", str(s8f.public), "--answers", str(s8f.answers)]
    before = len(entries())
    assert main([*base, "--out", str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sandbox.isolation" in err and "--allow-process-isolation" in err
    assert not (tmp_path / "refused").exists() and len(entries()) == before  # nothing ran, no look recorded
    code = main([*base, "--out", str(tmp_path / "allowed"), "--allow-process-isolation"])
    assert code in (0, 1)
    assert "WARNING: process isolation, allowed by --allow-process-isolation" in capsys.readouterr().err
    manifest = orjson.loads((tmp_path / "allowed" / "submission.run.json").read_bytes())
    assert manifest["isolation"] == "process" and manifest["isolation_allowed_by"] == "--allow-process-isolation"
    evaluation = orjson.loads((tmp_path / "allowed" / "evaluation.json").read_bytes())
    assert evaluation["isolation"] == "process" and "not protected" in evaluation["isolation_warning"]
