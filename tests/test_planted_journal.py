"""A pending-set journal planted beside an input (microctx._io.sets): every microctx reader
finishes a journal it finds in an input's folder, so a journal written by someone who can write
that folder (an upload, a shared or sticky folder) must not make the reader rename, remove or lock
anything outside the folders holding copies of it, nor hang it. Each case used to: the reader
removed the victim's file, moved the attacker's file over it, or blocked on a FIFO forever."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from microctx._io import sets
from microctx._io.jsonio import read_bytes
from microctx.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def plant(folder: Path, **document) -> Path:
    journal = folder / sets.JOURNAL
    journal.write_bytes(orjson.dumps({"schema": sets.JOURNAL_SCHEMA, **document}))
    return journal


@pytest.fixture
def scene(tmp_path):
    """An attacker's folder holding a submission, and a victim's folder the attacker cannot write."""
    upload, victim = tmp_path / "upload", tmp_path / "victim"
    upload.mkdir()
    victim.mkdir()
    (upload / "submission.json").write_bytes((DATA / "synthetic-answers.json").read_bytes())
    (victim / "keep.txt").write_bytes(b"the victim's file")
    (upload / ".mcx-payload.tmp").write_bytes(b"the attacker's file")
    return upload, victim


def journal_in(upload: Path) -> str:
    return os.fspath(upload / sets.JOURNAL)


@pytest.mark.parametrize(
    "case",
    [
        "remove outside",  # a removal in a folder holding no copy
        "remove with a missing copy",  # the victim's folder named, its copy absent
        "move outside",  # the attacker's file moved over the victim's
        "unlink as a copy",  # the victim's file named as a journal copy
        "move from a foreign source",  # a source that is no temporary of ours
    ],
)
def test_a_planted_journal_touches_nothing_outside_its_folders(scene, case):
    upload, victim = scene
    keep = os.fspath(victim / "keep.txt")
    here = journal_in(upload)
    if case == "remove outside":
        plant(upload, moves=[], journals=[here], removes=[keep])
    elif case == "remove with a missing copy":
        plant(upload, moves=[], journals=[here, os.fspath(victim / sets.JOURNAL)], removes=[keep])
    elif case == "move outside":
        plant(upload, moves=[[os.fspath(upload / ".mcx-payload.tmp"), keep]], journals=[here])
    elif case == "unlink as a copy":
        plant(upload, moves=[], journals=[here, keep])
    else:
        plant(upload, moves=[[keep, os.fspath(upload / "stolen.txt")]], journals=[here])
    read_bytes(upload / "submission.json")  # what every reader does first: finish a pending set
    assert (victim / "keep.txt").read_bytes() == b"the victim's file"
    assert not (upload / "stolen.txt").exists()


def test_a_planted_journal_is_ignored_by_a_command_too(scene, tmp_path, monkeypatch, capsys):
    upload, victim = scene
    plant(upload, moves=[], journals=[journal_in(upload)], removes=[os.fspath(victim / "keep.txt")])
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "ledger.sqlite"))
    argv = ["grade", "--answers", str(DATA / "synthetic-answers.json"), "--submission", str(upload / "submission.json")]
    main([*argv, "--output", str(tmp_path / "grade.json")])
    assert (victim / "keep.txt").read_bytes() == b"the victim's file" and (tmp_path / "grade.json").exists()


def test_a_journal_of_our_own_set_is_still_finished(tmp_path):
    """The guard keeps the real thing working: a set killed after its commit is finished by the
    next reader (tests/test_crash_sets.py covers every step)."""
    folder = tmp_path / "out"
    folder.mkdir()
    tmp = folder / ".mcx-0123456789ab.tmp"
    tmp.write_bytes(b"new")
    (folder / "gone.txt").write_bytes(b"old")
    plant(folder, moves=[[os.fspath(tmp), os.fspath(folder / "x.json")]], journals=[journal_in(folder)],
          removes=[os.fspath(folder / "gone.txt")])  # fmt: skip
    sets.settle(folder / "x.json")
    assert (folder / "x.json").read_bytes() == b"new" and not (folder / "gone.txt").exists()
    assert not (folder / sets.JOURNAL).exists()


def test_a_fifo_journal_does_not_hang_a_reader(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "input.json").write_bytes(b"{}")
    os.mkfifo(folder / sets.JOURNAL)
    script = f"from microctx._io.jsonio import read_bytes; print(read_bytes({os.fspath(folder / 'input.json')!r}))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "b'{}'", done.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to plant a file owned by another user")
def test_a_journal_written_by_another_user_is_ignored(tmp_path):
    """In a folder others may write (a sticky /tmp), a journal owned by another user is not the
    reader's: it may name the reader's own files in that folder."""
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "mine.txt").write_bytes(b"mine")
    (folder / "input.json").write_bytes(b"{}")
    journal = plant(folder, moves=[], journals=[journal_in(folder)], removes=[os.fspath(folder / "mine.txt")])
    os.chown(journal, 65534, 65534)
    read_bytes(folder / "input.json")
    assert (folder / "mine.txt").read_bytes() == b"mine"


@pytest.mark.parametrize("spelled", ["link", "real/../real"])
def test_a_set_committed_through_a_link_or_dotdot_is_finished_by_the_next_publisher(tmp_path, monkeypatch, spelled):
    """A set written to a folder named through a symbolic link or with `..`, killed after its
    commit: the next command publishing into that folder, holding its lock (`settle_held`, what
    `AtomicOutputs` runs once it holds the locks), compared the journal's folders as spelled with
    the resolved ones it held, left the set unfinished, and then wrote its own journal over it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to("real")
    for name in ("a", "b"):
        (tmp_path / "real" / name).write_bytes(b"old")
    script = (
        "import sys; from pathlib import Path; from microctx._io import atomic\n"
        "with atomic.AtomicOutputs() as out:\n"
        "    out.write(Path(sys.argv[1]) / 'a', b'new'); out.write(Path(sys.argv[1]) / 'b', b'new')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MICROCTX_KILL_AT_RENAME": "2"}  # the journal, then killed
    done = subprocess.run([sys.executable, "-c", script, spelled], env=env, capture_output=True)
    assert done.returncode == -9 and (tmp_path / "real" / sets.JOURNAL).exists()
    from microctx._io.paths import resolved

    folder = Path(spelled)
    sets.settle_held(folder, {str(resolved(folder)), os.fspath(folder)})  # as AtomicOutputs._publish holds them
    assert not (tmp_path / "real" / sets.JOURNAL).exists()
    assert [(tmp_path / "real" / n).read_bytes() for n in ("a", "b")] == [b"new", b"new"]
