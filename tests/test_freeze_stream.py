"""The streaming freeze: records in any source order come out in number order, byte for byte; a
bad record late in the export leaves the old outputs whole; memory does not grow with the texts."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import tracemalloc
from pathlib import Path

import orjson
import pytest

from microctx.cli import main
from microctx.corpus.export import parse_export
from microctx.corpus.freeze import freeze_files
from microctx.corpus.public import corpus_to_export

PUBLIC_SHA = "0740c911815eba7e44c63a14e021f418b66e8a42556d40f14b8b4cd58f173827"
ANSWERS_SHA = "af827ddca1063c602153f80b14523bda8d07e1a7e909a5c487616f2702eda05d"


def _freeze_argv(raw: Path, folder: Path, source: str) -> list[str]:
    return [
        "freeze",
        str(raw),
        "--public",
        str(folder / "public.json"),
        "--answers",
        str(folder / "answers.json"),
        "--report",
        str(folder / "report.json"),
        "--source",
        source,
    ]


def test_shuffled_export_freezes_to_the_published_bytes(tmp_path, s8f_corpus):
    rows = corpus_to_export(s8f_corpus)
    random.Random(24).shuffle(rows)  # the spill is in source order; the documents in number order
    raw = tmp_path / "raw.json"
    raw.write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
    assert main(_freeze_argv(raw, tmp_path, s8f_corpus.source)) == 0
    assert hashlib.sha256((tmp_path / "public.json").read_bytes()).hexdigest() == PUBLIC_SHA
    assert hashlib.sha256((tmp_path / "answers.json").read_bytes()).hexdigest() == ANSWERS_SHA


def test_bad_record_at_the_end_leaves_the_old_set(tmp_path, s8f_corpus, capsys):
    rows = corpus_to_export(s8f_corpus)
    rows[-1] = dict(rows[-1], createdAt="yesterday")
    raw = tmp_path / "raw.json"
    raw.write_bytes(orjson.dumps(rows))
    out = tmp_path / "out"
    out.mkdir()
    old = {name: f"old {name}".encode() for name in ("public.json", "answers.json", "report.json")}
    for name, data in old.items():
        (out / name).write_bytes(data)
    assert main(_freeze_argv(raw, out, "s")) == 2
    err = capsys.readouterr().err
    assert "raw.json" in err and f"#{len(rows) - 1}" in err and "createdAt" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == old  # no new file, no temporary left


def _copies(rows: list[dict], n: int) -> list[dict]:
    """`n` copies of the rows under new numbers, each copy's texts tagged (so they do not group)."""
    out = []
    for k in range(n):
        for row in rows:
            number = row["number"] + k * 10_000
            tag = f" [copy {k}]"
            out.append(dict(row, number=number, title=row["title"] + tag, body=row["body"] + tag, url=f"{row['url']}-{k}"))
    return out


def _peak_bytes(tmp: Path, rows: list[dict]) -> tuple[int, int]:
    """(peak bytes allocated while freezing `rows`, size of the public corpus written); the
    issues are read before tracing starts (the reader holds a block of the file, not records)."""
    issues = parse_export(rows)
    paths = (tmp / "public.json", tmp / "answers.json", tmp / "report.json")
    tracemalloc.start()
    try:
        freeze_files(iter(issues), "s", paths)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, os.path.getsize(paths[0])


@pytest.mark.parametrize("copies", [3])
def test_memory_does_not_grow_with_the_texts(tmp_path_factory, s8f_corpus, copies):
    rows = corpus_to_export(s8f_corpus)
    small, small_size = _peak_bytes(tmp_path_factory.mktemp("one"), rows)
    large, large_size = _peak_bytes(tmp_path_factory.mktemp("more"), _copies(rows, copies))
    # Holding the documents costs twice their bytes for each extra record; the stream holds
    # numbers, indices, digests of texts while reading, the split's maps and counts: a fraction.
    assert large - small < (large_size - small_size) / 4, (small, large, small_size, large_size)


def test_a_full_disk_names_the_output_and_replaces_nothing(tmp_path, s8f_corpus):
    """Writes failing half way (a file size limit stands in for a full disk) end in one line
    naming where, exit 2, and the old set untouched."""
    raw = tmp_path / "raw.json"
    raw.write_bytes(orjson.dumps(corpus_to_export(s8f_corpus)))
    out = tmp_path / "out"
    out.mkdir()
    (out / "public.json").write_bytes(b"old")
    code = (
        "import resource, signal, sys\n"
        "from microctx.cli import main\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, resource.RLIM_INFINITY))\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, *_freeze_argv(raw, out, "s")], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    assert "cannot write" in done.stderr and str(out) in done.stderr and "Traceback" not in done.stderr
    assert [p.name for p in out.iterdir()] == ["public.json"] and (out / "public.json").read_bytes() == b"old"


def test_a_pass_absorbed_is_the_pass_read_in_one(s8f, tmp_path):
    """Issues read by two passes, the second absorbed by the first, keep what one pass keeps: the
    first record of each title and body across the two (one title and one body are planted in
    both halves), references, counts and the spilled bytes."""
    import dataclasses

    from microctx.corpus.freeze_stream import FreezePass
    from microctx.corpus.public import corpus_to_issues

    issues = corpus_to_issues(orjson.loads(Path(s8f.public).read_bytes()))
    issues[700] = dataclasses.replace(issues[700], title=issues[100].title)
    issues[800] = dataclasses.replace(issues[800], body=issues[200].body)
    passes = []
    for name, parts in (("one", [issues]), ("two", [issues[:500], issues[500:]])):
        spills = [open(tmp_path / f"{name}-{i}", "w+b", buffering=0) for i in range(len(parts))]  # noqa: SIM115
        fps = [FreezePass(spill) for spill in spills]
        for fp, part in zip(fps, parts):
            for issue in part:
                fp.add(issue)
            fp.flush_spill()
        for fp, spill in zip(fps[1:], spills[1:]):
            fps[0].absorb(fp, spill)
        fps[0].flush_spill()
        passes.append((fps[0], (tmp_path / f"{name}-0").read_bytes()))
        for spill in spills:
            spill.close()
    (one, one_spill), (two, two_spill) = passes
    assert two.title_first[700] == 100 and two.body_first[800] == 200
    for name in ("numbers", "title_first", "body_first", "refs", "ref_ends", "spill_at", "public_len", "answer_len"):
        assert getattr(two, name) == getattr(one, name), name
    assert two_spill == one_spill
    for tally in (one.tally, two.tally):  # heaps of the ten latest: the same items, kept in any order
        tally.newest.sort()
        tally.updated.sort()
    assert two.tally == one.tally


@pytest.fixture()
def two_halves(monkeypatch):
    """Exports read in two halves, the second in a forked process, whatever their size; the
    numbers of records the first pass absorbed are listed."""
    from microctx.corpus import halves
    from microctx.corpus.freeze_stream import FreezePass

    absorbed: list[int] = []
    absorb = FreezePass.absorb
    monkeypatch.setattr(halves, "TWO_HALVES_FROM", 0)
    monkeypatch.setattr(halves, "_cores", lambda: 2)
    monkeypatch.setattr(
        FreezePass, "absorb", lambda fp, other, spill: absorbed.append(len(other.numbers)) or absorb(fp, other, spill)
    )
    return absorbed


@pytest.mark.parametrize("indent", [orjson.OPT_INDENT_2, 0])
def test_two_halves_freeze_to_the_published_bytes(tmp_path, s8f_corpus, two_halves, indent):
    rows = corpus_to_export(s8f_corpus)
    random.Random(7).shuffle(rows)
    raw = tmp_path / "raw.json"
    raw.write_bytes(orjson.dumps(rows, option=indent))
    assert main(_freeze_argv(raw, tmp_path, s8f_corpus.source)) == 0
    assert 300 < two_halves[0] < 700  # the second half was read by the other process
    assert hashlib.sha256((tmp_path / "public.json").read_bytes()).hexdigest() == PUBLIC_SHA
    assert hashlib.sha256((tmp_path / "answers.json").read_bytes()).hexdigest() == ANSWERS_SHA


@pytest.mark.parametrize("fault", ["bad date in the second half", "a number in both halves", "bad date in the first half"])
def test_two_halves_name_a_fault_as_one_process_does(tmp_path, s8f_corpus, capsys, monkeypatch, fault):
    from microctx.corpus import halves

    rows = corpus_to_export(s8f_corpus)
    if fault == "bad date in the second half":
        rows[-1] = dict(rows[-1], createdAt="yesterday")
    elif fault == "a number in both halves":
        rows[-1] = dict(rows[-1], number=rows[0]["number"])
    else:
        rows[1] = dict(rows[1], updatedAt="2024-13-01T00:00:00Z")
    raw = tmp_path / "raw.json"
    raw.write_bytes(orjson.dumps(rows))
    assert main(_freeze_argv(raw, tmp_path, "s")) == 2
    one_process = capsys.readouterr().err
    monkeypatch.setattr(halves, "TWO_HALVES_FROM", 0)
    monkeypatch.setattr(halves, "_cores", lambda: 2)
    assert halves.export_filler(raw, ()) is not None
    assert main(_freeze_argv(raw, tmp_path, "s")) == 2
    assert capsys.readouterr().err == one_process
    assert not list(tmp_path.glob("*.json"))[1:]  # the export alone: nothing was written


def test_two_halves_scrub_as_one_process_does(tmp_path, s8f_corpus, two_halves):
    """Redaction rules reach the forked process: the documents and the report's scrub counts are
    those of one process."""
    rules = tmp_path / "redactions.toml"
    rules.write_text('[[rule]]\npattern = "issue|the"\nreplacement = "[redacted:public-corpus]"\n')
    raw = tmp_path / "raw.json"
    raw.write_bytes(orjson.dumps(corpus_to_export(s8f_corpus)))
    from microctx.corpus import halves

    outputs = {}
    for name, cut in (("one", 1 << 60), ("two", 0)):
        halves.TWO_HALVES_FROM = cut  # restored by the two_halves fixture
        folder = tmp_path / name
        folder.mkdir()
        assert main([*_freeze_argv(raw, folder, "s"), "--redactions", str(rules)]) == 0
        outputs[name] = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert len(two_halves) == 1  # only the second run read two halves
    assert outputs["two"] == outputs["one"]
    assert orjson.loads(outputs["one"]["report.json"])["scrubbed_matches"] > 1000


def test_the_forked_half_ends_when_its_parent_is_killed(tmp_path, s8f_corpus):
    """The reviewer's orphan: SIGTERM to a freeze reading in two halves left the forked half
    running under init (a SIGTERM runs no Python cleanup). The half now dies with its parent."""
    import signal
    import time

    raw = tmp_path / "raw.json"
    raw.write_bytes(orjson.dumps(corpus_to_export(s8f_corpus)))
    child_pid = tmp_path / "child.pid"
    script = f"""
import os, time
from microctx.corpus import halves
from microctx.corpus.freeze_stream import FreezePass
halves.TWO_HALVES_FROM = 0
halves._cores = lambda: 2
parent, add = os.getpid(), FreezePass.add
def slow_add(self, issue):  # the forked half, slowed: a stand-in for a half of a million records
    if os.getpid() != parent:
        open({str(child_pid)!r}, "w").write(str(os.getpid()))
        time.sleep(0.2)
    return add(self, issue)
FreezePass.add = slow_add
from microctx.cli import main
main({[str(a) for a in _freeze_argv(raw, tmp_path, "s")]!r})
"""
    run = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 60
    while not child_pid.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(child_pid.read_text())
    run.send_signal(signal.SIGTERM)
    run.wait(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"the forked half {pid} outlived its killed parent")
    assert not list(tmp_path.glob("*.json"))[1:]  # nothing published


def test_no_fork_while_other_threads_run():
    """A fork copies the locks other threads hold but not the threads: with a thread alive (a
    notebook kernel, a Dask worker) a large input is read in one process."""
    import threading

    from microctx.corpus import halves

    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert halves._cores() == 1
    finally:
        stop.set()
        thread.join()
