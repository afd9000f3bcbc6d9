"""Nothing lost, nothing hung, nothing injected: the guarantees of every command, attacked.

- The path policy: an output that is an input or another output is refused (exit 2), symlinks,
  `..` and hard links included; a failed run removes only a file that provably is a submission.
- Outputs as a set: a part that cannot be written (a folder in the way, a name too long, a full
  disk, a failed rename) replaces nothing; concurrent commands leave one consistent set.
- One line, exit 2, no traceback: the cases an adversarial pass found, and a property-based test
  that runs every command on generated bad inputs and checks that no output changed.
- Names stay inside --out; digests that differ are said plainly.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from microctx._io import atomic, paths
from microctx.cli import main
from microctx.contract.schemas import STATES
from microctx.contract.split import SPLITS
from microctx.contract.timestamps import parse_timestamp
from microctx.corpus.public import corpus_to_export
from microctx.errors import InputError

HERE = Path(__file__).resolve().parent
FAULTY = HERE / "candidates" / "faulty.py"


def run_cli(*argv, env: dict | None = None) -> tuple[int, str, str]:
    """main() in this process with stdout and stderr captured (usable inside hypothesis)."""
    out, err = io.StringIO(), io.StringIO()
    saved = {key: os.environ.get(key) for key in (env or {})}
    os.environ.update(env or {})
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in argv])
            except SystemExit as exc:  # argparse's --help and errors
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return code, out.getvalue(), err.getvalue()


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.endswith("\n"), repr(err)
    assert "Traceback" not in err
    return err.strip()


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def rows(s8f_corpus):
    return corpus_to_export(s8f_corpus)[:60]


@pytest.fixture(scope="module")
def small(rows, tmp_path_factory):
    """A small frozen corpus: raw export, public corpus, answers, report, and a perfect submission."""
    folder = tmp_path_factory.mktemp("small")
    raw = folder / "raw.json"
    raw.write_bytes(orjson.dumps(rows))
    paths = {k: folder / f"{k}.json" for k in ("public", "answers", "report")}
    code, _, err = run_cli(
        "freeze", raw, "--public", paths["public"], "--answers", paths["answers"], "--report", paths["report"], "--source", "test"
    )
    assert code == 0, err
    submission = folder / "submission.json"
    submission.write_bytes(paths["answers"].read_bytes())
    return type("Small", (), {"folder": folder, "raw": raw, "submission": submission, **paths})


@pytest.fixture
def work(small, tmp_path):
    """Copies of the small corpus's files in a fresh folder (so a bug cannot damage the fixture)."""
    for name in ("raw", "public", "answers", "report", "submission"):
        (tmp_path / f"{name}.json").write_bytes(getattr(small, name).read_bytes())
    return tmp_path


# ================================================================ 1. outputs that destroy inputs


def _symlink(work: Path, name: str, target: str) -> str:
    (work / name).symlink_to(work / target)
    return str(work / name)


def _hardlink(work: Path, name: str, target: str) -> str:
    os.link(work / target, work / name)
    return str(work / name)


SAME_FILE = {
    "grade --output is the answers": lambda w: [
        "grade",
        "--answers",
        w / "answers.json",
        "--submission",
        w / "submission.json",
        "--output",
        w / "answers.json",
    ],
    "grade --output reaches the answers through ..": lambda w: [
        "grade",
        "--answers",
        w / "answers.json",
        "--submission",
        w / "submission.json",
        "--output",
        f"{w}/sub/../answers.json",
    ],
    "grade --output is a symlink to the submission": lambda w: [
        "grade",
        "--answers",
        w / "answers.json",
        "--submission",
        w / "submission.json",
        "--output",
        _symlink(w, "link.json", "submission.json"),
    ],
    "grade's fact table is the submission": lambda w: [
        "grade",
        "--answers",
        w / "answers.json",
        "--submission",
        _hardlink(w, "g.facts.csv", "submission.json"),
        "--output",
        w / "g.json",
    ],
    "devkit --output is the answers": lambda w: ["devkit", "--answers", w / "answers.json", "--output", w / "answers.json"],
    "devkit --output is a hard link to the answers": lambda w: [
        "devkit",
        "--answers",
        w / "answers.json",
        "--output",
        _hardlink(w, "dk.json", "answers.json"),
    ],
    "freeze --public is RAW": lambda w: [
        "freeze",
        w / "raw.json",
        "--public",
        w / "raw.json",
        "--answers",
        w / "a2.json",
        "--report",
        w / "r2.json",
        "--source",
        "s",
    ],
    "freeze --public and --answers are one file": lambda w: [
        "freeze",
        w / "raw.json",
        "--public",
        w / "x.json",
        "--answers",
        w / "x.json",
        "--report",
        w / "r2.json",
        "--source",
        "s",
    ],
    "freeze --report is the redaction map": lambda w: [
        "freeze",
        w / "raw.json",
        "--public",
        w / "p2.json",
        "--answers",
        w / "a2.json",
        "--report",
        w / "red.toml",
        "--source",
        "s",
        "--redactions",
        w / "red.toml",
    ],
    "run --submission is the public corpus": lambda w: [
        "run",
        "exact-sql",
        "--public",
        w / "public.json",
        "--submission",
        w / "public.json",
    ],
    "run's manifest is the devkit": lambda w: [
        "run",
        "text-only",
        "--public",
        w / "public.json",
        "--devkit",
        w / "dk.run.json",
        "--submission",
        w / "dk.json",
    ],
    "report --out holds the submission": lambda w: [
        "report",
        "grade",
        "--public",
        w / "public.json",
        "--answers",
        w / "answers.json",
        "--submission",
        w / "rep" / "grade.json",
        "--out",
        w / "rep",
    ],
}


@pytest.mark.parametrize("case", list(SAME_FILE))
def test_an_output_that_is_an_input_or_another_output_is_refused(work, case):
    (work / "red.toml").write_text('[[rule]]\npattern = "x"\nreplacement = "y"\n')
    (work / "dk.run.json").write_bytes(b"{}")
    (work / "rep").mkdir()
    (work / "rep" / "report.json").write_bytes(b'{"schema": "microctx-report/1"}')
    (work / "rep" / "grade.json").write_bytes((work / "submission.json").read_bytes())
    argv = SAME_FILE[case](work)
    before = snapshot(work)
    code, out, err = run_cli(*argv)
    line = one_line(err)
    assert code == 2, line
    assert "same file" in line or "folder holding" in line, line
    assert snapshot(work) == before and out == ""


@pytest.mark.parametrize("occupant", ["answers", "public"])
def test_a_failed_run_leaves_a_file_that_is_not_a_submission(work, occupant):
    target = work / "out.json"
    target.write_bytes((work / f"{occupant}.json").read_bytes())
    code, _, err = run_cli("run", f"{FAULTY}:crash", "--public", work / "public.json", "--submission", target)
    assert code == 1
    assert target.read_bytes() == (work / f"{occupant}.json").read_bytes()
    manifest = json.loads((work / "out.run.json").read_text())
    assert "left the existing out.json in place" in manifest["error"] and "left the existing" in err


def test_a_failed_run_removes_an_earlier_submission_of_the_same_candidate(work):
    """The proof by manifest: an answers-shaped file (not removable by its look) that the
    manifest beside it names, for this candidate and this digest, is an earlier submission."""
    target = work / "out.json"
    target.write_bytes((work / "answers.json").read_bytes())  # an oracle-style submission
    candidate = f"{FAULTY}:crash"
    earlier = {
        "schema": "microctx-run/1",
        "candidate": candidate,
        "ok": True,
        "submission_sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
    }
    (work / "out.run.json").write_text(json.dumps(earlier))
    code, _, _ = run_cli("run", candidate, "--public", work / "public.json", "--submission", target)
    assert code == 1 and not target.exists()
    assert "removed the earlier out.json" in json.loads((work / "out.run.json").read_text())["error"]


def test_a_manifest_for_another_candidate_proves_nothing(work):
    target = work / "out.json"
    target.write_bytes((work / "answers.json").read_bytes())
    earlier = {
        "schema": "microctx-run/1",
        "candidate": "someone-else",
        "ok": True,
        "submission_sha256": hashlib.sha256(target.read_bytes()).hexdigest(),
    }
    (work / "out.run.json").write_text(json.dumps(earlier))
    code, _, _ = run_cli("run", f"{FAULTY}:crash", "--public", work / "public.json", "--submission", target)
    assert code == 1 and target.read_bytes() == (work / "answers.json").read_bytes()


# ================================================================ 2. outputs as a set


def freeze_argv(work: Path, source: str = "again", **paths) -> list:
    p = {k: paths.get(k, work / f"{k}.json") for k in ("public", "answers", "report")}
    return [
        "freeze",
        work / "raw.json",
        "--public",
        p["public"],
        "--answers",
        p["answers"],
        "--report",
        p["report"],
        "--source",
        source,
    ]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".mcx-*"))


def test_a_folder_in_the_way_replaces_nothing(work):
    (work / "report.json").unlink()
    (work / "report.json").mkdir()
    before = snapshot(work)
    code, _, err = run_cli(*freeze_argv(work))
    assert code == 2 and "report.json: is a folder" in one_line(err)
    assert snapshot(work) == before and leftovers(work) == []


def test_a_name_too_long_replaces_nothing(work):
    before = snapshot(work)
    code, _, err = run_cli(*freeze_argv(work, answers=work / ("a" * 300 + ".json")))
    assert code == 2 and "File name too long" in one_line(err)
    assert snapshot(work) == before and leftovers(work) == []


def test_grade_with_its_fact_table_blocked_keeps_the_old_grade(work):
    (work / "g.json").write_bytes(b"old grade")
    (work / "g.facts.csv").mkdir()
    code, _, err = run_cli(
        "grade", "--answers", work / "answers.json", "--submission", work / "submission.json", "--output", work / "g.json"
    )
    assert code == 2 and "g.facts.csv: is a folder" in one_line(err)
    assert (work / "g.json").read_bytes() == b"old grade" and leftovers(work) == []


def test_a_full_disk_mid_write_replaces_nothing(tmp_path):
    (tmp_path / "a").write_bytes(b"old a")

    def chunks():
        yield b"new"
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(InputError, match="cannot write: No space left on device; nothing was replaced"):
        with atomic.AtomicOutputs() as out:
            out.write(tmp_path / "b", b"new b")
            out.write(tmp_path / "a", chunks())
    assert snapshot(tmp_path) == {"a": b"old a"}


def test_a_read_only_folder_replaces_nothing(work, monkeypatch):
    """A planted fault (the tests run as root, whom no folder refuses): the third file's folder
    refuses a new file, as a read-only folder would; the first two are not published either."""
    real_open = os.open

    def refusing(path, flags, *args, **kw):
        if flags & os.O_CREAT and Path(path).parent.name == "ro":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return real_open(path, flags, *args, **kw)

    (work / "ro").mkdir()
    (work / "ro" / "report.json").write_bytes(b"old report")
    monkeypatch.setattr(os, "open", refusing)
    before = snapshot(work)
    code, _, err = run_cli(*freeze_argv(work, report=work / "ro" / "report.json"))
    assert code == 2 and "ro/report.json: cannot write: Permission denied; nothing was replaced" in one_line(err)
    assert snapshot(work) == before and leftovers(work) == []


def test_a_rename_failing_half_way_puts_the_set_back(tmp_path, monkeypatch):
    """A planted fault: the second rename fails after the first succeeded; the first is restored."""
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(f"old {name}".encode())
    real_replace = os.replace
    calls = []

    def failing_replace(src, dst):
        calls.append(Path(dst).name)
        if Path(dst).name == "b" and Path(src).name.endswith(".tmp"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(InputError, match="b: cannot write: Input/output error"):
        with atomic.AtomicOutputs() as out:
            for name in ("a", "b", "c"):
                out.write(tmp_path / name, f"new {name}".encode())
    assert [c for c in calls if not c.startswith(".mcx-")][:2] == ["a", "b"]  # after the journal
    assert snapshot(tmp_path) == {n: f"old {n}".encode() for n in ("a", "b", "c")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]  # no journal, no backup left


def test_a_removal_failing_half_way_puts_the_set_back(tmp_path, monkeypatch):
    """A planted fault: the set replaces a and removes b and c; removing c fails after a was
    replaced and b removed: both are put back (b from its hard-linked backup)."""
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(f"old {name}".encode())
    real_unlink = os.unlink

    def failing_unlink(path, *args, **kw):
        if Path(path).name == "c":
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_unlink(path, *args, **kw)

    monkeypatch.setattr(os, "unlink", failing_unlink)
    with pytest.raises(InputError, match="c: cannot write: Input/output error"):
        with atomic.AtomicOutputs() as out:
            out.write(tmp_path / "a", b"new a")
            out.remove(tmp_path / "b")
            out.remove(tmp_path / "c")
    assert snapshot(tmp_path) == {n: f"old {n}".encode() for n in ("a", "b", "c")}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]  # no journal, no backup left
    monkeypatch.undo()
    with atomic.AtomicOutputs() as out:
        out.write(tmp_path / "a", b"new a")
        out.remove(tmp_path / "b")
        out.remove(tmp_path / "absent")  # nothing to remove: nothing to do
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "c"] and (tmp_path / "a").read_bytes() == b"new a"


def test_a_removal_of_a_file_replaced_since_it_was_looked_at_is_refused(tmp_path):
    """`same_as`: the file a set removes is the one its caller looked at (a failed run's proof that
    it is an earlier submission), else nothing is replaced; a folder is never removed."""
    (tmp_path / "a").write_bytes(b"old a")
    (tmp_path / "b").write_bytes(b"earlier")
    identity = atomic.file_identity(tmp_path / "b")
    (tmp_path / "b").write_bytes(b"another file, written since")
    with pytest.raises(InputError, match="b: changed since this command decided to remove it; nothing was replaced"):
        with atomic.AtomicOutputs() as out:
            out.write(tmp_path / "a", b"new a")
            out.remove(tmp_path / "b", same_as=identity)
    assert snapshot(tmp_path) == {"a": b"old a", "b": b"another file, written since"}
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="d: is a folder"):
        atomic.AtomicOutputs().remove(tmp_path / "d")


def test_an_unwritable_report_parent_is_one_line(work):
    (work / "afile").write_text("x")
    code, _, err = run_cli("report", "corpus", "--public", work / "public.json", "--out", work / "afile" / "rep")
    assert code == 2 and "afile/rep" in one_line(err)


def _consistent(public: Path, answers: Path, report: Path) -> str:
    """The source string of a freeze set whose three files belong together (else fails)."""
    pub_sha = hashlib.sha256(public.read_bytes()).hexdigest()
    ans = json.loads(answers.read_bytes())
    rep = json.loads(report.read_bytes())
    assert ans["corpus_sha256"] == pub_sha == rep["corpus_sha256"]
    assert rep["answers_sha256"] == hashlib.sha256(answers.read_bytes()).hexdigest()
    return json.loads(public.read_bytes())["source"]


@pytest.mark.slow
def test_two_concurrent_freezes_leave_one_consistent_set(work):
    """Two commands write the same three outputs at once, three times over: one complete set."""
    script = "import sys; from microctx.cli import main\nfor _ in range(3):\n    assert main(sys.argv[1:]) == 0\n"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, *map(str, freeze_argv(work, source=f"writer-{i}"))],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for i in (1, 2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert _consistent(work / "public.json", work / "answers.json", work / "report.json") in ("writer-1", "writer-2")
    assert leftovers(work) == []


def test_many_threads_publishing_the_same_set_leave_one_set(tmp_path):
    names = ("x.json", "y.json", "z.json")
    errors = []

    def writer(tag: int) -> None:
        try:
            for round_ in range(15):
                with atomic.AtomicOutputs() as out:
                    for name in names:
                        out.write(tmp_path / name, f"{tag}:{round_}".encode())
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    contents = {(tmp_path / name).read_bytes() for name in names}
    assert len(contents) == 1 and leftovers(tmp_path) == []


def test_concurrent_report_folders_leave_one_complete_folder(tmp_path):
    out = tmp_path / "rep"

    errors: list[BaseException] = []

    def build(tag: int) -> None:
        try:
            for _ in range(10):
                with atomic.staged_folder(out, "report.json") as staging:
                    for part in ("a", "b"):
                        (staging / part).write_text(str(tag))
                    (staging / "report.json").write_text('{"schema": "microctx-report/1"}')
        except BaseException as exc:  # a refusal or an OSError in any thread fails the test
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(tag,)) for tag in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]
    assert len({p.read_text() for p in (out / "a", out / "b")}) == 1 and len(list(out.iterdir())) == 3


# ================================================================ 3. one line, never a traceback


def _mutated(path: Path, change) -> bytes:
    document = json.loads(path.read_bytes())
    change(document)
    return json.dumps(document).encode()


def _set(path: list, value):
    def change(document):
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


ONE_LINE = {
    "timestamp past year 9999 in UTC": (
        ["freeze", "{bad}", "--public", "{o}/p.json", "--answers", "{o}/a.json", "--report", "{o}/r.json", "--source", "s"],
        ("raw", _set([3, "createdAt"], "9999-12-31T23:59:59-23:59")),
        "field 'createdAt': instant out of range",
    ),
    "a third state": (
        ["freeze", "{bad}", "--public", "{o}/p.json", "--answers", "{o}/a.json", "--report", "{o}/r.json", "--source", "s"],
        ("raw", _set([4, "state"], "merged")),
        "field 'state': expected OPEN or CLOSED (any case), got 'MERGED'",
    ),
    "empty public corpus in verify": (
        ["verify", "--public", "{bad}", "--answers", "{w}/answers.json", "--report", "{w}/report.json"],
        ("public", _set(["records"], [])),
        "field 'records': no records",
    ),
    "a public record in a third state": (
        ["verify", "--public", "{bad}", "--answers", "{w}/answers.json", "--report", "{w}/report.json"],
        ("public", _set(["records", 0, "state"], "DRAFT")),
        "field 'state': expected OPEN or CLOSED",
    ),
    "gold answer in a third state": (
        ["grade", "--answers", "{bad}", "--submission", "{w}/submission.json", "--output", "{o}/g.json"],
        ("answers", _set(["answers", 0, "state"], "open")),
        "field 'state': expected OPEN or CLOSED, got 'open'",
    ),
}


@pytest.mark.parametrize("case", list(ONE_LINE))
def test_listed_cases_are_one_line(work, tmp_path_factory, case):
    argv, (source, change), said = ONE_LINE[case]
    out = tmp_path_factory.mktemp("out")
    bad = work / "bad.json"
    bad.write_bytes(_mutated(work / f"{source}.json", change))
    code, _, err = run_cli(*[a.format(bad=bad, w=work, o=out) for a in argv])
    assert code == 2 and said in one_line(err), err
    assert list(out.iterdir()) == []


MAP = "the redaction map: [[rule]] tables with a pattern and a replacement string"


@pytest.mark.parametrize(
    "toml, said",
    [
        ("rule = 5\n", f"field 'rule': expected array, got int ({MAP})"),
        ("rule = [1]\n", f"field 'rule[0]': expected object, got int ({MAP})"),
        ('rule = "x"\n', f"field 'rule': expected array, got str ({MAP})"),
        ("[rule]\npattern = 'a'\n", f"field 'rule': expected array, got object ({MAP})"),
        ("[[rule]]\npattern = 1\nreplacement = 'x'\n", f"field 'rule[0].pattern': expected str, got int ({MAP})"),
        ("[[rule]]\npattern = 'a'\nreplacement = 'b'\nflags = 'i'\n", f"field 'rule[0].flags': unknown field in {MAP}"),
        ("[[rule]]\npattern = '('\nreplacement = 'b'\n", "field 'rule[0].pattern': invalid regular expression"),
        ("[[rule]]\npattern = 'a'\n", "field 'rule[0].replacement': missing"),
        ("[[rule]]\npattern = 'a'\nreplacement = 'b'\n[other]\n", f"field 'other': unknown field in {MAP}"),
        (
            f"[[rule]]\npattern = 'a'\nreplacement = '{'x' * 1001}'\n",
            "field 'rule[0].replacement': expected str of length <= 1000",
        ),
    ],
)
def test_redaction_maps_of_the_wrong_shape(work, toml, said):
    """One error style with SWEEP.toml (microctx.contract.declared): the file, the key, what was expected."""
    (work / "red.toml").write_text(toml)
    code, _, err = run_cli(
        *freeze_argv(work, public=work / "p2.json", answers=work / "a2.json", report=work / "r2.json"),
        "--redactions",
        work / "red.toml",
    )
    assert code == 2 and said in one_line(err)
    assert not (work / "p2.json").exists()


def test_null_labels_in_gold_reach_the_devkit_as_none(work):
    (work / "answers.json").write_bytes(
        _mutated(work / "answers.json", lambda d: [a.update(labels=None, references=None) for a in d["answers"]])
    )
    code, _, err = run_cli("devkit", "--answers", work / "answers.json", "--output", work / "dk.json")
    assert code == 0, err
    devkit = json.loads((work / "dk.json").read_bytes())
    assert devkit["answers"] and all(a["labels"] == [] and a["references"] == [] for a in devkit["answers"])
    assert devkit["aggregates"]["label_counts"] == {}


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0", "soon", "1e400"])
def test_timeouts_must_be_positive_and_finite(work, value):
    code, _, err = run_cli(
        "run", "exact-sql", "--public", work / "public.json", "--submission", work / "s.json", "--timeout", value
    )
    assert code == 2 and "argument --timeout: expected a" in one_line(err) and repr(value) in err
    assert not (work / "s.json").exists()


@pytest.mark.parametrize(
    "argv, said",
    [
        (["run", "mine", "--cmd", "python 'oops {public}"], "--cmd: cannot split the command into words: No closing quotation"),
        (["grade"], "the following arguments are required: --submission, --output"),
        (["nonsense"], "invalid choice: 'nonsense'"),
        (["fetch", "o/r", "--output", "x.json", "--state", "merged"], "argument --state: invalid choice"),
        (["fetch", "o/r", "--output", "x.json", "--deadline", "inf"], "argument --deadline"),
        (
            ["report", "compare", "--submission", "a", "--submission", "b", "--name", "../../x", "--name", "y", "--out", "o"],
            "'../../x' is not a safe name",
        ),
    ],
)
def test_command_line_mistakes_are_one_line(work, argv, said, monkeypatch):
    monkeypatch.chdir(work)
    if argv[0] == "run":
        argv = argv + ["--public", str(work / "public.json"), "--submission", str(work / "s.json")]
    if argv[0] == "report":
        argv = [str(work / "submission.json") if a in ("a", "b") else a for a in argv]
    code, _, err = run_cli(*argv)
    assert code == 2 and said in one_line(err), err
    assert sorted(p.name for p in work.iterdir()) == ["answers.json", "public.json", "raw.json", "report.json", "submission.json"]


def test_a_bug_is_one_line_and_its_traceback_on_request(work, monkeypatch):
    import microctx.contract.score as score

    def planted(*_args, **_kw):
        raise TypeError("planted bug")

    monkeypatch.setattr(score, "score_stream", planted)  # the streamed grade and grade() alike
    argv = ["grade", "--answers", work / "answers.json", "--submission", work / "submission.json", "--output", work / "g.json"]
    code, _, err = run_cli(*argv)
    assert code == 70 and "internal error (TypeError: planted bug)" in one_line(err)
    with pytest.raises(TypeError, match="planted bug"):
        run_cli(*argv, env={"MICROCTX_DEBUG": "1"})


# --- the property: every command, generated bad input, exit 2, one line, no output changed --------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=4,
)
ODD = st.sampled_from(
    [
        "",
        "MERGED",
        "9999-12-31T23:59:59-23:59",
        "2026-02-30T00:00:00Z",
        "0001-01-01T00:00:00+00:01",
        -1,
        0,
        1.5,
        True,
        [],
        {},
        [1],
        {"name": 3},
        None,
    ]
)
VALUES = ODD | JSON


def _stamp_ok(v) -> bool:
    try:
        return isinstance(v, str) and parse_timestamp(v) is not None
    except ValueError:
        return False


def _pos_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


RAW_OK = {  # what freeze accepts in a gh export row
    "number": lambda v: False,  # any other value is wrong or repeats a number (refused too)
    "title": lambda v: isinstance(v, str) and v != "",
    "body": lambda v: v is None or isinstance(v, str),
    "state": lambda v: isinstance(v, str) and v.upper() in STATES,
    "labels": lambda v: (
        v is None
        or (
            isinstance(v, list) and all(isinstance(x, str) or (isinstance(x, dict) and isinstance(x.get("name"), str)) for x in v)
        )
    ),
    "createdAt": _stamp_ok,
    "updatedAt": _stamp_ok,
    "url": lambda v: isinstance(v, str) and v != "",
}
PUBLIC_OK = {  # the shape a public record must have
    "id": lambda v: isinstance(v, str),
    "title": lambda v: isinstance(v, str),
    "body": lambda v: isinstance(v, str),
    "number": _pos_int,
    "split": lambda v: v in SPLITS,
    "state": lambda v: v in STATES,
    "labels": lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "created_at": _stamp_ok,
    "updated_at": _stamp_ok,
    "closed_at": lambda v: v is None or _stamp_ok(v),
    "url": lambda v: isinstance(v, str),
}
ANSWER_OK = {  # an answer of a gold bundle
    "id": lambda v: isinstance(v, str),
    "split": lambda v: isinstance(v, str),
    "state": lambda v: v in STATES,
    "labels": lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
    "references": lambda v: v is None or (isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)),
    "scope_contradictions": lambda v: v is None or (isinstance(v, list) and all(isinstance(x, str) for x in v)),
}
SUBMITTED_OK = {**ANSWER_OK, "state": lambda v: v is None or isinstance(v, str), "split": lambda v: True}
DELETE = object()


@st.composite
def bad_record(draw, ok: dict, deletable: bool = True):
    """(field, value) for one record: a value the field must not have, or DELETE (a missing key)."""
    field = draw(st.sampled_from(sorted(ok)))
    if (
        deletable
        and draw(st.booleans())
        and field not in ("labels", "body", "split", "state", "references", "closed_at", "scope_contradictions")
    ):
        return field, DELETE
    return field, draw(VALUES.filter(lambda v: not ok[field](v)))


def _apply(records: list, index: int, field: str, value) -> None:
    if value is DELETE:
        records[index].pop(field, None)
    else:
        records[index][field] = value


@st.composite
def scenario(draw, small):
    """A command and a bad input for it: (argv template, file name, bad bytes or None, env)."""
    kind = draw(
        st.sampled_from(
            ["freeze", "freeze-file", "verify", "grade-submission", "grade-answers", "devkit", "run", "report", "fetch", "data"]
        )
    )
    index = draw(st.integers(0, 59))
    if kind == "freeze":
        rows = json.loads(small.raw.read_bytes())
        field, value = draw(bad_record(RAW_OK))
        _apply(rows, index, field, value)
        return (
            [
                "freeze",
                "{bad}",
                "--public",
                "{o}/public.json",
                "--answers",
                "{o}/answers.json",
                "--report",
                "{o}/report.json",
                "--source",
                "s",
            ],
            json.dumps(rows).encode(),
            {},
        )
    if kind == "freeze-file":
        payload = draw(
            st.binary(max_size=40)
            | JSON.filter(lambda v: not isinstance(v, list) or len(v) < 50).map(lambda v: json.dumps(v).encode())
        )
        return (
            [
                "freeze",
                "{bad}",
                "--public",
                "{o}/public.json",
                "--answers",
                "{o}/answers.json",
                "--report",
                "{o}/report.json",
                "--source",
                "s",
            ],
            payload,
            {},
        )
    if kind in ("verify", "run", "report"):
        public = json.loads(small.public.read_bytes())
        field, value = draw(bad_record(PUBLIC_OK))
        _apply(public["records"], index, field, value)
        bad = json.dumps(public).encode()
        if kind == "verify":
            return (["verify", "--public", "{bad}", "--answers", str(small.answers), "--report", str(small.report)], bad, {})
        if kind == "run":
            bad = draw(st.sampled_from([bad, b"{}", str(small.answers.read_bytes()[:200]).encode()]))
            timeout = draw(st.sampled_from(["5", "inf", "nan", "0", "-3"]))
            if timeout == "5" and bad != b"{}" and not bad.startswith(b"b'"):
                bad = b"[]"  # a valid public corpus head would run the candidate: keep this input bad
            return (["run", "exact-sql", "--public", "{bad}", "--submission", "{o}/public.json", "--timeout", timeout], bad, {})
        return (
            [
                "report",
                "grade",
                "--public",
                "{bad}",
                "--answers",
                str(small.answers),
                "--submission",
                str(small.submission),
                "--out",
                "{o}/report",
            ],
            bad,
            {},
        )
    if kind in ("grade-submission", "grade-answers", "devkit"):
        gold = kind != "grade-submission"
        document = json.loads((small.answers if gold else small.submission).read_bytes())
        where = draw(st.sampled_from(["record", "top", "aggregates"]))
        if where == "record":
            field, value = draw(bad_record(ANSWER_OK if gold else SUBMITTED_OK, deletable=gold))
            _apply(document["answers"], index, field, value)
        elif where == "top":
            key = draw(st.sampled_from(["corpus_sha256", "answers"]))
            document[key] = draw(
                VALUES.filter(
                    lambda v: (
                        not isinstance(v, str if key == "corpus_sha256" else list)
                        and not (key == "answers" and v is None and not gold)
                    )
                )
            )
        else:
            key = draw(st.sampled_from(["state_counts", "newest_issue_ids"]))
            document["aggregates"][key] = draw(
                VALUES.filter(
                    lambda v: (
                        not (isinstance(v, dict) and all(isinstance(x, int) and not isinstance(x, bool) for x in v.values()))
                        and not (isinstance(v, list) and all(isinstance(x, str) for x in v))
                        and not (v is None and not gold)
                    )
                )
            )
        bad = json.dumps(document).encode()
        if kind == "devkit":
            return (["devkit", "--answers", "{bad}", "--output", "{o}/public.json"], bad, {})
        if gold:
            return (
                ["grade", "--answers", "{bad}", "--submission", str(small.submission), "--output", "{o}/public.json"],
                bad,
                {},
            )
        return (["grade", "--answers", str(small.answers), "--submission", "{bad}", "--output", "{o}/public.json"], bad, {})
    if kind == "fetch":
        api = draw(st.sampled_from(["ftp://h", "http://", "http://[x", "https://h:0x1", "file:///etc", "h.example"]))
        limit = draw(st.sampled_from(["0", "-2", "1"]))
        return (["fetch", "o/r", "--output", "{o}/public.json", "--api-url", api, "--limit", limit], None, {})
    return (["data", "s8f"], None, {"MICROCTX_DATA_DIR": "{o}/nothing-here"})


@pytest.mark.slow
@settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_every_command_on_bad_input_is_one_line_and_changes_nothing(small, data):
    argv, bad, env = data.draw(scenario(small))
    event(" ".join(argv[:2]) if argv[0] == "report" else argv[0])
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        for name in ("public.json", "answers.json", "report.json"):  # earlier outputs that must survive
            (out / name).write_bytes(b"earlier " + name.encode())
        (out / "report").mkdir()
        (out / "report" / "report.json").write_bytes(b'{"schema": "microctx-report/1", "earlier": true}')
        badfile = out / "bad-input.json"
        if bad is not None:
            badfile.write_bytes(bad)
        before = snapshot(out)
        code, _, err = run_cli(*[a.format(bad=badfile, o=out) for a in argv], env={k: v.format(o=out) for k, v in env.items()})
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert snapshot(out) == before
        assert leftovers(out) == []


# ================================================================ 5. names that climb out


def test_a_name_that_climbs_out_is_refused_and_nothing_is_written(work, tmp_path_factory):
    parent = tmp_path_factory.mktemp("parent")
    out = parent / "deep" / "rep"
    code, _, err = run_cli(
        "report",
        "compare",
        "--public",
        work / "public.json",
        "--answers",
        work / "answers.json",
        "--submission",
        work / "submission.json",
        "--submission",
        work / "submission.json",
        "--name",
        "../../x",
        "--name",
        "y",
        "--out",
        out,
    )
    assert code == 2 and "'../../x' is not a safe name" in one_line(err)
    assert list(parent.rglob("*")) == []


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", ".hidden", "a/b", "a b", "<script>", "", "x" * 101, "..", "é"])
def test_unsafe_names_are_refused(name):
    with pytest.raises(InputError, match="is not a safe name"):
        paths.safe_name(name)


def test_default_names_from_file_names_are_made_safe():
    from microctx.reports.tables import candidate_names

    assert candidate_names(["d/<img src=x>.json", "e/../..json", "f/ok-1.json"]) == ["img_src_x_", "submission", "ok-1"]


def test_inside_refuses_paths_that_leave_the_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "link").symlink_to(tmp_path)
    assert paths.inside(tmp_path / "out", "grades", "a.json") == tmp_path / "out" / "grades" / "a.json"
    for parts in (("..", "x.json"), ("grades", "..", "..", "x"), ("link", "x.json")):
        with pytest.raises(InputError, match="outside"):
            paths.inside(tmp_path / "out", *parts)


# ================================================================ 8. silent wrong answers


def test_grading_a_submission_of_another_corpus_says_the_digests_differ(work):
    (work / "other.json").write_bytes(_mutated(work / "submission.json", _set(["corpus_sha256"], "0" * 64)))
    code, out, _ = run_cli(
        "grade", "--answers", work / "answers.json", "--submission", work / "other.json", "--output", work / "g.json"
    )
    assert code == 1 and out.startswith("FAIL: the corpus digests differ: submission is bound to corpus 0000")


def test_a_report_of_mismatched_inputs_is_refused(work, s8f):
    (work / "other.json").write_bytes(_mutated(work / "submission.json", _set(["corpus_sha256"], "0" * 64)))
    code, _, err = run_cli(
        "report",
        "grade",
        "--public",
        work / "public.json",
        "--answers",
        work / "answers.json",
        "--submission",
        work / "other.json",
        "--out",
        work / "rep",
    )
    assert code == 2 and "the submission is bound to corpus 0000" in one_line(err) and "the digests differ" in err
    code, _, err = run_cli(
        "report",
        "grade",
        "--public",
        work / "public.json",
        "--answers",
        s8f.answers,
        "--submission",
        work / "submission.json",
        "--out",
        work / "rep",
    )
    assert code == 2 and "the answers belong to corpus" in one_line(err)
    assert not (work / "rep").exists()
