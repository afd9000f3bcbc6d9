"""The model judge: through the record-mode proxy to a local OpenAI-compatible fake, measured on
tune items against adjudicated gold, used only above the study's bar; PPI checked against ppi_python."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_openai import FakeOpenAI
from semantic_sim import adjudicate, good, simulate, truth_for

from microctx.semantic import events as ev
from microctx.semantic.freeze import semantic_document
from microctx.semantic.items import StudyFolder, init_folder
from microctx.semantic.judge import ppi_mean
from tests.tls import self_signed

ROOT = Path(__file__).resolve().parents[1]
SECRET_KEY = "sk-judge-secret-4e1d"


@pytest.fixture(scope="module")
def base_study(s8f, tmp_path_factory):
    out = tmp_path_factory.mktemp("judge") / "s8f"
    init_folder(ROOT / "studies" / "s8f-conflicts.toml", s8f.public, s8f.answers, out)
    return out


def _complete(folder: StudyFolder, truth: dict) -> None:
    simulate(folder, truth, {"ann": good(0.9), "ben": good(0.9), "cat": good(0.9)}, seed=3)
    adjudicate(folder, truth, "simulated")


def _judge_of(folder: StudyFolder, truth: dict, right: bool):
    """A judge that knows the truth (right) or answers `no` to everything; pool records by a hash."""
    by_title = {}
    for name, item in folder.items.items():
        by_title[(item["question"], folder.records[item["record_id"]]["title"])] = truth[name]

    def judge(item: dict) -> str:
        if not right:
            return "no"
        question = "duplicate" if "duplicate_of" in item else "conflict"
        known = by_title.get((question, item["title"]))
        return known or ("yes" if hashlib.sha256(item["title"].encode()).digest()[0] < 13 else "no")

    return judge


def _run(folder: StudyFolder, server: FakeOpenAI) -> subprocess.CompletedProcess:
    argv = [
        "study",
        "judge",
        str(folder.path),
        "--base-url",
        server.base_url,
        "--model",
        "fake-judge",
        "--api-key-env",
        "MCTX_KEY",
    ]
    return subprocess.run(
        [sys.executable, "-m", "microctx", *argv], capture_output=True, text=True, env={**os.environ, "MCTX_KEY": SECRET_KEY}
    )


@pytest.mark.parametrize("right", [True, False])
def test_a_judge_is_used_only_when_its_tune_interval_clears_the_bar(base_study, tmp_path, right):
    shutil.copytree(base_study, tmp_path / "study")
    folder = StudyFolder(tmp_path / "study")
    truth = truth_for(folder, 61)
    _complete(folder, truth)
    with FakeOpenAI(judge=_judge_of(folder, truth, right)) as server:
        run = _run(folder, server)
    assert run.returncode == 0, run.stderr
    asked = len(server.requests)
    assert asked == 132 + 1000 - 120  # every item, and every record outside the conflict question's items
    assert f"counted {asked} calls" in run.stdout  # the record-mode proxy's count, not the judge's
    assert {r["authorization"] for r in server.requests} == {f"Bearer {SECRET_KEY}"}  # the key reached the endpoint only
    written = (folder.path / "judge-fake-judge.json").read_text() + run.stdout + run.stderr + str(ev.read(folder.events_path))
    assert SECRET_KEY not in written
    summary = json.loads((folder.path / "judge-fake-judge.json").read_text())
    assert summary["input_tokens"] == server.totals()["input_tokens"] > 0
    section = semantic_document(folder, n_boot=500)["judge"]
    assert len(section) == 1 and section[0]["annotator"] == "judge:fake-judge"
    entry = section[0]
    tune = entry["tune_agreement"]
    assert tune["items"] == sum(1 for i in folder.items.values() if i["split"] == "tune")
    if right:
        assert tune["value"] == 1.0 and tune["ci_low"] == 1.0 and entry["used"] is True
        [estimate] = entry["estimates"]
        assert estimate["unlabelled"] == 880 and estimate["labelled"] == 30
        assert estimate["ci_low"] <= estimate["estimate"] <= estimate["ci_high"]
    else:
        assert entry["used"] is False and entry["estimates"] == [] and "below the study's bar 0.6" in entry["reason"]


def test_ppi_mean_matches_ppi_python():
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    rng = np.random.default_rng(7)
    gold = (rng.random(40) < 0.3).astype(float)
    judged = np.where(rng.random(40) < 0.85, gold, 1 - gold)
    pool = (rng.random(900) < 0.28).astype(float)
    mine = ppi_mean(list(gold), list(judged), list(pool))
    assert mine["estimate"] == pytest.approx(float(np.ravel(ppi_mean_pointestimate(gold, judged, pool, lam=1))[0]), abs=1e-12)
    low, high = ppi_mean_ci(gold, judged, pool, alpha=0.05, lam=1)
    assert (mine["ci_low"], mine["ci_high"]) == pytest.approx((float(np.ravel(low)[0]), float(np.ravel(high)[0])), abs=1e-9)


def test_an_https_judge_goes_through_the_proxy_as_a_tunnel(base_study, tmp_path, monkeypatch):
    import ssl

    from microctx.semantic.judge import run_judge

    shutil.copytree(base_study, tmp_path / "study")
    cert, key = self_signed(tmp_path, datetime.timedelta(hours=1))
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    with FakeOpenAI(judge=lambda item: "no") as server:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.server.socket = context.wrap_socket(server.server.socket, server_side=True)
        base = server.base_url.replace("http://", "https://")
        summary = run_judge(tmp_path / "study", base, "tls-judge", limit=5)
    assert summary["items"] == 5 and summary["calls"] == 5 and summary["unusable"] == 0 and len(server.requests) == 5
    network = json.loads((tmp_path / "study" / "judge-tls-judge.json").read_text())["network"]
    assert {r["method"] for r in network["requests"]} == {"CONNECT"}  # a tunnel: TLS end to end, bytes opaque
    assert [e["label"] for e in ev.read(tmp_path / "study" / "events.sqlite")] == ["no"] * 5
