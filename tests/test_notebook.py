"""Notebook-facing objects: short reprs and HTML views, one success vocabulary, the helpers a
notebook calls (facts_frame, slices, write), the project-local data setting, `microctx lab`.

Everything here runs on the synthetic corpus in tests/data (no s8f file), except the size
bounds on s8f, which show the views stay small on a real corpus.
"""

from __future__ import annotations

import html.parser
import json
import os
import subprocess
import sys

import pytest

import microctx
from microctx.corpus import snapshot
from microctx.display import Summary
from microctx.errors import InputError
from microctx.grading.examples import oracle_submission, planted_submission


class _Parser(html.parser.HTMLParser):
    """Counts tags and checks they balance (a view must be well-formed HTML)."""

    def __init__(self):
        super().__init__()
        self.stack, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in ("br", "img", "hr", "meta"):
            self.stack.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes {self.stack[-1:]}"
        self.stack.pop()


def well_formed(markup: str) -> list[str]:
    parser = _Parser()
    parser.feed(markup)
    parser.close()
    assert not parser.stack, f"unclosed {parser.stack}"
    return parser.tags


@pytest.fixture(scope="module")
def planted(synthetic_answers):
    return microctx.grade(synthetic_answers, planted_submission(synthetic_answers))


def test_result_types_are_exported():
    for name in ("Corpus", "Frozen", "GradeResult", "Verification", "SliceFrame", "explore", "notebook_setup"):
        assert getattr(microctx, name) is not None and name in microctx.__all__
    assert microctx.charts.__name__ == "microctx.reports.charts" and microctx.slices.__name__ == "microctx.grading.slices"
    with pytest.raises(AttributeError):
        microctx.no_such_thing  # noqa: B018


def test_corpus_repr_and_html_are_short_and_say_what_it_is(synthetic_corpus):
    text = repr(synthetic_corpus)
    assert text.startswith("Corpus(60 records (train 5 / tune 11 / test 44; CLOSED 23 / OPEN 37), sha256 72043871…67fbebc")
    assert len(text) < 300 and "\n" not in text
    view = synthetic_corpus._repr_html_()
    tags = well_formed(view)
    assert synthetic_corpus.sha256 in view and "first 5 of 60" in view
    assert tags.count("tr") == 7 + 1 + 5  # seven fields; the header and five records
    assert len(view) < 5000


def test_views_stay_small_on_a_real_corpus(s8f_corpus, s8f_answers):
    """The issue: `corpus` printed 3.5 MB, a grade 480 KB. Now each view is a few KB at most."""
    assert len(repr(s8f_corpus)) < 400 and len(s8f_corpus._repr_html_()) < 6000
    result = microctx.grade(s8f_answers, planted_submission(s8f_answers))
    assert len(repr(result)) < 400 and len(result._repr_html_()) < 6000
    from microctx.corpus.public import corpus_to_export

    frozen = microctx.freeze(corpus_to_export(s8f_corpus), source=s8f_corpus.source)
    assert frozen.public_sha256 == s8f_corpus.sha256
    assert len(repr(frozen)) < 400 and len(frozen._repr_html_()) < 8000


def test_grade_views_and_vocabulary(planted, synthetic_answers):
    assert planted.passed is False and planted.ok is False
    assert planted.summary().startswith("FAIL: ")  # summary() everywhere: a method here, a callable string elsewhere
    text = repr(planted)
    assert text.startswith("GradeResult(FAIL: ") and len(text) < 400
    view = planted._repr_html_()
    well_formed(view)
    wrong = [r for r in planted.facts if r.outcome != "tp"]
    assert "facts in error" in view and (f"first 5 of {len(wrong):,}" in view if len(wrong) > 5 else True)
    oracle = microctx.grade(synthetic_answers, oracle_submission(synthetic_answers))
    assert oracle.passed and oracle.ok and oracle.summary().startswith("PASS: 44/44 test records exact")
    assert ">passed<" in oracle._repr_html_()


def test_facts_frame_slices_and_write(planted, synthetic_corpus, tmp_path):
    frame = planted.facts_frame()
    assert list(frame.columns) == ["record_id", "split", "kind", "value", "outcome", "detail"]
    assert len(frame) == len(planted.facts) and planted.frame is not None
    counts = frame["outcome"].value_counts()
    assert counts.get("fp", 0) == planted.grade["false_positive_facts"]
    assert counts.get("fn", 0) == planted.grade["false_negative_facts"]
    sliced = planted.slices(synthetic_corpus, n_boot=50)
    table = sliced.table
    overall = table[table["slice_kind"] == "overall"].iloc[0]
    assert overall["fp"] == planted.grade["false_positive_facts"] and overall["fn"] == planted.grade["false_negative_facts"]
    assert repr(sliced).startswith(f"SliceFrame({len(table)} slices (") and len(repr(sliced)) < 300
    view = sliced._repr_html_()
    well_formed(view)
    assert "weakest judged slices" in view and len(view) < 6000
    out = tmp_path / "deep" / "er" / "g.json"
    out.parent.mkdir(parents=True)
    planted.write(out)
    assert json.loads(out.read_text()) == planted.grade
    assert (tmp_path / "deep" / "er" / "g.facts.csv").read_text().count("\n") == len(planted.facts) + 1


def test_frozen_views_and_write_creates_parent_folders(synthetic, tmp_path):
    frozen = microctx.freeze(synthetic.raw, source="synthetic:microctx-tests/60-issues")
    assert frozen.ok and frozen.passed
    assert (
        frozen.summary()
        == frozen.summary
        == ("60 records (train 5 / tune 11 / test 44); 6/6 leak checks pass; public 72043871…67fbebc, answers c7bd18d1…5b0a65a")
    )
    view = frozen._repr_html_()
    well_formed(view)
    assert view.count(">pass</b>") == 6 and frozen.public_sha256 in view
    target = tmp_path / "new" / "folder"
    frozen.write(target / "p.json", target / "a.json", target / "r.json")
    assert (target / "p.json").read_bytes() == synthetic.public.read_bytes()  # byte for byte the committed file
    assert (target / "a.json").read_bytes() == synthetic.answers.read_bytes()


def test_verification_views_and_vocabulary(synthetic, tmp_path):
    good = microctx.verify(synthetic.public, synthetic.answers, synthetic.report)
    assert good.ok and good.passed and isinstance(good.summary, Summary) and good.summary() == good.summary
    assert repr(good).startswith("Verification(ok; 60 records; ") and "every check holds" in good._repr_html_()
    report = json.loads(synthetic.report.read_text())
    report["open_records"] += 1  # planted: a wrong count
    bad_report = tmp_path / "r.json"
    bad_report.write_text(json.dumps(report))
    bad = microctx.verify(synthetic.public, synthetic.answers, bad_report)
    assert not bad.ok and not bad.passed
    assert repr(bad).startswith(f"Verification({len(bad.problems)} problems, first: ")
    view = bad._repr_html_()
    well_formed(view)
    assert "open_records" in view and f"{len(bad.problems)} problems" in view


def test_html_views_escape_hostile_text(synthetic_corpus):
    from microctx.corpus.public import Corpus

    document = json.loads(json.dumps(synthetic_corpus.document))
    document["records"][0]["title"] = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    document["source"] = "<b>source</b>"
    view = Corpus(document, "0" * 64, "<i>path</i>")._repr_html_()
    assert "<script" not in view and "<img" not in view and "<b>source" not in view and "<i>path" not in view
    assert "&lt;script&gt;" in view


# ---- data found the same way from every entry point


def test_project_local_data_dir(tmp_path, monkeypatch):
    project = tmp_path / "project"
    (project / "notebooks" / "deep").mkdir(parents=True)
    (project / "microctx.toml").write_text('data_dir = "../data/s8f"\n')
    monkeypatch.delenv(snapshot.DATA_DIR_ENV, raising=False)
    monkeypatch.chdir(project / "notebooks" / "deep")  # a notebook's folder, two levels down
    assert snapshot.data_dir() == (tmp_path / "data" / "s8f").resolve()
    monkeypatch.setenv(snapshot.DATA_DIR_ENV, str(tmp_path / "env"))  # the variable wins
    assert snapshot.data_dir() == tmp_path / "env"
    monkeypatch.delenv(snapshot.DATA_DIR_ENV)
    (project / "microctx.toml").unlink()
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.microctx]\ndata_dir = "/srv/s8f"\n')
    assert snapshot.data_dir() == snapshot.Path("/srv/s8f")
    (project / "pyproject.toml").write_text('[project]\nname = "x"\n')  # no [tool.microctx]: keep looking, find none
    assert snapshot.project_data_dir(project / "notebooks") is None
    (project / "microctx.toml").write_text("data_dir = [1]\n")
    with pytest.raises(InputError, match=r"microctx.toml: field 'data_dir': expected a folder path"):
        snapshot.data_dir()
    (project / "microctx.toml").write_text("data_dir = \n")
    with pytest.raises(InputError, match=r"microctx.toml: not readable TOML"):
        snapshot.data_dir()


def test_project_setting_finds_the_files_offline(synthetic, s8f, tmp_path, monkeypatch):
    (tmp_path / "microctx.toml").write_text(f'data_dir = "{s8f.public.parent}"\n')
    monkeypatch.delenv(snapshot.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv(snapshot.CACHE_DIR_ENV, str(tmp_path / "empty-cache"))
    monkeypatch.chdir(tmp_path)
    found = snapshot.s8f(download=False).public  # the same file, whether or not a symlink leads to it
    assert found.resolve() == (s8f.public.parent / snapshot.S8F["public"].name).resolve()
    assert not (tmp_path / "empty-cache").exists()


def test_offline_download_failure_says_which_variable_to_set(tmp_path, monkeypatch, capsys):
    import socket

    from microctx.cli import main

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}/files"
    monkeypatch.delenv(snapshot.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv(snapshot.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(snapshot.BASE_URL_ENV, dead)
    monkeypatch.chdir(tmp_path)
    assert main(["data", "s8f"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "network failure" in err and f"offline? set {snapshot.DATA_DIR_ENV} to a folder holding the three s8f files" in err


def test_microctx_lab_prepares_copies_and_passes_the_data_dir(tmp_path, monkeypatch):
    from microctx.reports.build import NOTEBOOKS, NOTEBOOKS_DIR

    monkeypatch.chdir(tmp_path)
    (tmp_path / "microctx.toml").write_text('data_dir = "data"\n')
    env = {k: v for k, v in os.environ.items() if k != snapshot.DATA_DIR_ENV}
    out = subprocess.run(
        [sys.executable, "-m", "microctx", "lab", "--dir", "a/b/lab", "--dry-run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    lab = tmp_path / "a" / "b" / "lab"
    assert sorted(p.name for p in lab.iterdir()) == sorted([*NOTEBOOKS.values(), "workbench.ipynb"])
    for name in NOTEBOOKS.values():
        assert (lab / name).read_bytes() == (NOTEBOOKS_DIR / name).read_bytes()
    assert f"MICROCTX_DATA_DIR={tmp_path / 'data'}" in out.stderr
    root = " --allow-root" if os.geteuid() == 0 else ""
    assert out.stdout.strip().endswith(f"-m jupyterlab --ServerApp.root_dir={lab}{root}")
    (lab / "workbench.ipynb").write_text("mine")  # the user's edits are never overwritten
    subprocess.run(
        [sys.executable, "-m", "microctx", "lab", "--dir", str(lab), "--dry-run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        check=True,
    )
    assert (lab / "workbench.ipynb").read_text() == "mine"


def test_microctx_lab_passes_port_browser_and_jupyterlab_options_through(tmp_path):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "microctx",
            "lab",
            "--dir",
            "lab",
            "--port",
            "8899",
            "--no-browser",
            "--dry-run",
            "--ServerApp.token=abc",
            "--ip",
            "127.0.0.1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    command = out.stdout.split()
    assert command[command.index("--ServerApp.port=8899") + 1] == "--no-browser"
    assert command[-3:] == ["--ServerApp.token=abc", "--ip", "127.0.0.1"]
    assert ("--allow-root" in command) == (os.geteuid() == 0)
    wrong = subprocess.run([sys.executable, "-m", "microctx", "data", "s8f", "--bogus"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "unrecognized arguments: --bogus" in wrong.stderr  # only lab passes options on


@pytest.mark.slow
def test_microctx_lab_starts_and_serves_as_this_user(tmp_path):
    """A real JupyterLab from `microctx lab` (as root here: it must add --allow-root), on a free
    port, with a token passed through; it answers /api/status with that token."""
    import socket
    import time
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "HOME": str(tmp_path / "home"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "microctx",
            "lab",
            "--dir",
            str(tmp_path / "lab"),
            "--port",
            str(port),
            "--no-browser",
            "--ServerApp.token=t0k3n",
            "--ip",
            "127.0.0.1",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        status = None
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token=t0k3n", timeout=2) as response:
                    status = response.status
                break
            except OSError:
                if server.poll() is not None:
                    break
                time.sleep(0.5)
        assert status == 200, server.stderr.read() if server.poll() is not None else "no answer"
    finally:
        server.terminate()
        server.wait(timeout=30)
    # nothing left running: no JupyterLab serving this test's folder outlives `microctx lab`
    time.sleep(0.5)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if str(tmp_path / "lab").encode() in cmdline.read():
                    left.append(pid)
        except OSError:
            continue
    assert not left, f"still running after microctx lab was terminated: {left}"
