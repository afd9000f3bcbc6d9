"""Sweeps of candidates that are projects (`[candidate] project = "candidate.toml"`): a project with a
helper module, its own virtual environment holding a package microctx does not install, and a data
file is swept over a parameter on train/tune, sandboxed, selected, and evaluated once; selected.json
round-trips through its typed reader, and a project changed since the sweep is refused by evaluate."""

from __future__ import annotations

import json
import subprocess
import sys

import orjson
import pytest

from microctx.cli import main
from microctx.contract.canonical import dumps
from microctx.contract.records import Selected, SelectedProject, read_record
from microctx.tuning.sweep import config_key, load_sweep, run_sweep

MAIN = """\
import hashlib, json, sys
import helper                      # a sibling module: the code folder is bound whole
import mxtinypkg                   # only in the project's own venv
public, submission, params = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
settings = json.load(open(helper.DATA))
corpus = json.load(open(public, "rb"))
answers = [helper.answer(r, params["miss"], settings) for r in corpus["records"]]
digest = hashlib.sha256(open(public, "rb").read()).hexdigest()
doc = {"schema": "fak-microcontext-submission/1", "corpus_sha256": digest, "answers": answers,
       "made_by": [helper.NAME, mxtinypkg.VERSION, sys.prefix]}
json.dump(doc, open(submission, "w"))
"""

HELPER = """\
NAME = "helper"
DATA = {data!r}

def answer(record, miss, settings):
    keep = settings["labels"] and record["number"] % 10 >= miss
    return {{"id": record["id"], "split": record["split"], "state": record["state"],
            "labels": sorted(record["labels"] or []) if keep else [],
            "references": [], "duplicate_targets": [], "scope_contradictions": []}}
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep-project")
    project = root / "project"
    (project / "src").mkdir(parents=True)
    (project / "data").mkdir()
    (project / "src" / "main.py").write_text(MAIN)
    (project / "data" / "settings.json").write_text(json.dumps({"labels": True}))
    (project / "src" / "helper.py").write_text(HELPER.format(data=str(project / "data" / "settings.json")))
    venv = project / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "mxtinypkg").mkdir()
    (site / "mxtinypkg" / "__init__.py").write_text("VERSION = 'tiny-0.2'\n")  # built here, not installed by microctx
    (project / "candidate.toml").write_text(
        '[candidate]\nname = "swept-project"\ncommand = "{python} main.py {public} {submission} {params}"\n'
        'code = ["src"]\nvenv = "venv"\ndata = ["data"]\nmemory = "1G"\n'
    )
    (root / "sweeps").mkdir()
    (root / "elsewhere").mkdir()
    sweep = root / "sweeps" / "SWEEP.toml"  # the project path is relative to the sweep file, not the cwd
    sweep.write_text(
        '[candidate]\nproject = "../project/candidate.toml"\n[grid]\nmiss = [5, 0, 9]\n'
        '[select]\nmetric = "f1"\nrule = "max"\n[sandbox]\nmax_processes = 128\n'
    )
    return root


@pytest.fixture(scope="module")
def swept(project, s8f, devkit):
    import os

    cwd = os.getcwd()
    os.chdir(project / "elsewhere")
    try:
        spec = load_sweep(project / "sweeps" / "SWEEP.toml")
        result = run_sweep(spec, s8f.public, devkit, project / "out", workers=2, progress=False)
    finally:
        os.chdir(cwd)
    return spec, result


def test_a_project_candidate_is_swept_sandboxed_and_selected(swept, project):
    spec, result = swept
    assert spec.kind == "project" and spec.name == "swept-project" and spec.entry.startswith("{python} main.py")
    assert spec.version == f"sha256:{spec.project_digest}" and spec.project_file == str(project / "project" / "candidate.toml")
    # the candidate file's limit, and the sweep's own key beside it
    assert spec.sandbox.memory_bytes == 1 << 30 and spec.sandbox.max_processes == 128
    assert result.failed == 0, [r["error"] for r in result.rows]
    f1 = {row["param.miss"]: row["f1"] for row in result.rows}
    assert f1[0] > f1[5] > f1[9]  # the parameter works through the helper and the data file
    for row in result.rows:
        manifest = orjson.loads((project / "out" / "runs" / row["key"] / "run.json").read_bytes())
        assert manifest["isolation"] == "sandbox" and manifest["project"]["venv"] == str(project / "project" / "venv")
        assert manifest["limits"]["memory_bytes"] == 1 << 30 and manifest["limits"]["max_processes"] == 128
    assert result.selected["row"]["param.miss"] == 0


def test_selected_json_round_trips_through_its_typed_reader(swept, project):
    spec, _ = swept
    path = project / "out" / "selected.json"
    record = read_record(path, Selected)
    assert isinstance(record.project, SelectedProject)
    assert dumps(record.as_dict()) == path.read_bytes()  # whole: nothing lost, nothing added
    assert record.project.file == spec.project_file and record.project.digest == spec.project_digest
    assert record.project.code == [str(project / "project" / "src")] and record.project.data == [
        str(project / "project" / "data")
    ]
    assert record.candidate["kind"] == "project" and record.parameters == {"miss": 0}
    assert record.sandbox["memory_bytes"] == 1 << 30


def test_the_selected_project_is_evaluated_once_sandboxed_and_a_changed_one_is_refused(swept, project, s8f, tmp_path, capsys):
    selected = str(project / "out" / "selected.json")
    base = ["evaluate", selected, "--public", str(s8f.public), "--answers", str(s8f.answers)]
    assert main([*base, "--out", str(tmp_path / "eval")]) in (0, 1)  # graded on its merits (no aggregates: may not pass)
    evaluation = orjson.loads((tmp_path / "eval" / "evaluation.json").read_bytes())
    assert evaluation["run_ok"] and evaluation["grade"] is not None and evaluation["isolation"] == "sandbox"
    manifest = orjson.loads((tmp_path / "eval" / "submission.run.json").read_bytes())
    assert manifest["project"]["code"] == [str(project / "project" / "src")]
    made_by = orjson.loads((tmp_path / "eval" / "submission.json").read_bytes())["made_by"]
    assert made_by == ["helper", "tiny-0.2", str(project / "project" / "venv")]
    # the project's code changes after the sweep: evaluate refuses it (exit 2, one line, nothing run)
    helper = project / "project" / "src" / "helper.py"
    kept = helper.read_text()
    capsys.readouterr()
    try:
        helper.write_text(kept + "\n# changed\n")
        assert main([*base, "--out", str(tmp_path / "changed")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "changed since the sweep" in err
        assert not (tmp_path / "changed").exists()
        # and a sweep keys it as another configuration
        spec = load_sweep(project / "sweeps" / "SWEEP.toml")
        before = orjson.loads((project / "out" / "selected.json").read_bytes())
        assert config_key(spec, {"miss": 0}, before["corpus_sha256"], before["devkit_sha256"], "x") != config_key(
            swept[0], {"miss": 0}, before["corpus_sha256"], before["devkit_sha256"], "x"
        )
    finally:
        helper.write_text(kept)


def test_a_bad_project_key_names_the_sweep_file(tmp_path):
    from microctx.errors import InputError

    sweep = tmp_path / "SWEEP.toml"
    sweep.write_text('[candidate]\nproject = "missing/candidate.toml"\n[grid]\nmiss = [0]\n[select]\n')
    with pytest.raises(InputError) as info:
        load_sweep(sweep)
    assert info.value.field == "candidate.project" and str(tmp_path / "missing" / "candidate.toml") in str(info.value)
    sweep.write_text('[candidate]\nproject = "c.toml"\ncmd = "x"\n[grid]\nmiss = [0]\n[select]\n')
    with pytest.raises(InputError) as info:
        load_sweep(sweep)
    assert info.value.field == "candidate" and "project" in str(info.value)
