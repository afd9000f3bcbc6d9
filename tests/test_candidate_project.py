"""Candidates that are projects: a helper module, their own virtual environment holding a package
microctx does not install, and a data file, run sandboxed and pass or fail on their merits; the
answer guard finds answers in their folders by content."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from microctx.candidates.runner import manifest_path
from microctx.cli import main

MAIN = """\
import hashlib, json, sys
import helper                      # a sibling module: the code folder is bound whole
import mxtinypkg                   # only in the project's own venv
public, submission = sys.argv[1], sys.argv[2]
setting = json.load(open(helper.DATA))["setting"]
if setting != "good":
    sys.exit("the data says: " + setting)
digest = hashlib.sha256(open(public, "rb").read()).hexdigest()
doc = {"corpus_sha256": digest, "answers": [], "made_by": [helper.NAME, mxtinypkg.VERSION, sys.prefix]}
json.dump(doc, open(submission, "w"))
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text(MAIN)
    (root / "data").mkdir()
    (root / "data" / "settings.json").write_text(json.dumps({"setting": "good"}))
    (root / "src" / "helper.py").write_text(f"NAME = 'helper'\nDATA = {str(root / 'data' / 'settings.json')!r}\n")
    venv = root / "venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python*/site-packages"))
    (site / "mxtinypkg").mkdir()
    (site / "mxtinypkg" / "__init__.py").write_text("VERSION = 'tiny-0.1'\n")  # a package built here, not installed by microctx
    (root / "candidate.toml").write_text(
        '[candidate]\nname = "tiny-project"\ncommand = "{python} main.py {public} {submission}"\n'
        'code = ["src"]\nvenv = "venv"\ndata = ["data"]\nmemory = "1G"\n'
    )
    return root


def test_a_project_file_runs_sandboxed_with_its_venv_helper_and_data(s8f, tmp_path, project):
    out = tmp_path / "out.json"
    assert main(["run", str(project / "candidate.toml"), "--public", str(s8f.public), "--submission", str(out)]) == 0
    made_by = json.loads(out.read_text())["made_by"]
    assert made_by == ["helper", "tiny-0.1", str(project / "venv")]
    manifest = json.loads(manifest_path(out).read_text())
    assert manifest["candidate"] == "tiny-project" and manifest["isolation"] == "sandbox"
    assert manifest["project"]["venv"] == str(project / "venv") and manifest["limits"]["memory_bytes"] == 1 << 30
    # the same project as run options
    again = tmp_path / "again.json"
    argv = [
        "run",
        "tiny",
        "--public",
        str(s8f.public),
        "--submission",
        str(again),
        "--cmd",
        "{python} main.py {public} {submission}",
    ]
    argv += ["--code", str(project / "src"), "--venv", str(project / "venv"), "--data", str(project / "data")]
    assert main(argv) == 0 and json.loads(again.read_text())["made_by"] == made_by


def test_a_project_fails_on_its_merits_and_cannot_write_its_folders(s8f, tmp_path, project):
    bad = tmp_path / "bad"
    (bad / "data").mkdir(parents=True)
    (bad / "data" / "settings.json").write_text(json.dumps({"setting": "broken"}))
    (bad / "src").mkdir()
    (bad / "src" / "main.py").write_text(MAIN)
    (bad / "src" / "helper.py").write_text(
        f"NAME = 'helper'\nDATA = {str(bad / 'data' / 'settings.json')!r}\nopen(__file__, 'a').write('# planted')\n"
    )
    out = tmp_path / "out.json"
    argv = [
        "run",
        "bad",
        "--public",
        str(s8f.public),
        "--submission",
        str(out),
        "--cmd",
        "{python} main.py {public} {submission}",
    ]
    assert main([*argv, "--code", str(bad / "src"), "--venv", str(project / "venv"), "--data", str(bad / "data")]) == 1
    manifest = json.loads(manifest_path(out).read_text())
    assert "Read-only file system" in manifest["error"] or "Permission denied" in manifest["error"]  # read-only, and not its uid
    (bad / "src" / "helper.py").write_text(f"NAME = 'helper'\nDATA = {str(bad / 'data' / 'settings.json')!r}\n")
    assert main([*argv, "--code", str(bad / "src"), "--venv", str(project / "venv"), "--data", str(bad / "data")]) == 1
    assert json.loads(manifest_path(out).read_text())["error"].endswith("the data says: broken")
    assert "# planted" not in (bad / "src" / "helper.py").read_text()


def test_answers_in_a_project_folder_are_found_by_content(s8f, tmp_path, project, capsys):
    data = tmp_path / "data"
    data.mkdir()
    records = json.loads(s8f.answers.read_text())["answers"]
    (data / "notes.txt").write_text("\n".join(json.dumps(r) for r in records[:50]))  # JSON Lines, any name
    (data / "readme.json").write_text(json.dumps({"about": "fak-microcontext-answers/1 is the schema we never read"}))
    argv = ["run", "x", "--public", str(s8f.public), "--submission", str(tmp_path / "o.json"), "--cmd", "python main.py"]
    assert main([*argv, "--code", str(project / "src"), "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "notes.txt" in err and "holds test answers" in err and len(err.strip().splitlines()) == 1
    (data / "notes.txt").unlink()  # a file that merely names the schema is fine
    assert main([*argv, "--code", str(project / "src"), "--data", str(data)]) in (0, 1)


@pytest.mark.parametrize(
    ("body", "field", "said"),
    [
        ('name = "x"', "candidate.command", "missing"),
        ('name = "x"\ncommand = "a"\nbogus = 1', "candidate.bogus", "unknown field"),
        ('name = "x"\ncommand = "a"\nmax_processes = "3"', "candidate.max_processes", "expected int"),
        ('name = "x"\ncommand = " "', "candidate.command", "expected str"),
        ('name = "x"\ncommand = "a"\ncode = [1]', "candidate.code[0]", "expected str, got int"),
        ('name = "x"\ncommand = "a"\ntimeout = -1', "candidate.timeout", "expected float > 0"),
        ('name = "x"\ncommand = "a"\nmax_processes = true', "candidate.max_processes", "got bool"),
        ('name = "x"\ncommand = "a"\ncode = ["nowhere"]', "candidate.code", "not an existing folder"),
        ('name = "x"\ncommand = "a"\ndata = "nowhere"', "candidate.data", "not an existing folder"),
        ('name = "x"\ncommand = "a"\nvenv = "."', "candidate.venv", "not a virtual environment"),
        ('name = "x"\ncommand = "a"\ninterpreter = "candidate.toml"', "candidate.interpreter", "not an executable"),
    ],
)
def test_a_wrong_candidate_file_is_one_error_naming_the_file_and_the_key(tmp_path, body, field, said):
    from microctx.candidates.project import load_candidate_file
    from microctx.errors import InputError

    path = tmp_path / "candidate.toml"
    path.write_text(f"[candidate]\n{body}\n")
    with pytest.raises(InputError) as caught:
        load_candidate_file(path)
    message = str(caught.value)
    assert "candidate.toml" in message and f"'{field}'" in message and said in message, message


def test_a_candidate_file_that_is_not_toml_or_has_no_table_is_refused(tmp_path):
    from microctx.candidates.project import load_candidate_file
    from microctx.errors import InputError

    path = tmp_path / "candidate.toml"
    path.write_text("[candidate\n")
    with pytest.raises(InputError, match="not valid TOML"):
        load_candidate_file(path)
    path.write_text('name = "x"\n')
    with pytest.raises(InputError, match="'name': unknown field"):
        load_candidate_file(path)


def test_a_data_file_over_the_guards_limit_still_moves_the_project_digest(tmp_path, monkeypatch):
    """The answer guard reads no file over FILE_LIMIT; the digest must still see such a file change."""
    import os

    from microctx.candidates import answer_guard
    from microctx.candidates.project import make_project, project_digest

    (tmp_path / "code").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "code" / "main.py").write_text("print(1)\n")
    big = tmp_path / "data" / "weights.bin"
    big.write_bytes(b"a" * 64)
    toml = tmp_path / "candidate.toml"
    toml.write_text('[candidate]\nname = "p"\ncommand = "{python} main.py"\n')
    project = make_project(["code"], ["data"], base=tmp_path)
    monkeypatch.setattr(answer_guard, "FILE_LIMIT", 16)  # weights.bin is now over the limit, as a 300 MiB file is
    before = project_digest(toml, project)
    big.write_bytes(b"b" * 64)  # same size, new content
    os.utime(big, ns=(os.stat(big).st_atime_ns, os.stat(big).st_mtime_ns + 1_000_000_000))
    assert project_digest(toml, project) != before
    assert project_digest(toml, project) == project_digest(toml, project)  # and it is stable


@pytest.mark.parametrize("bound", ["depth", "files"])
def test_answers_past_the_guards_walk_bounds_refuse_the_project(s8f, tmp_path, monkeypatch, bound):
    """Answers 33 folders deep, or after the first MAX_FILES files, passed the guard unseen: a folder
    the walk cannot finish is now refused, naming the folder."""
    from microctx.candidates import answer_guard
    from microctx.candidates.project import make_project
    from microctx.errors import InputError

    data = tmp_path / "data"
    hidden = data
    if bound == "depth":
        for _ in range(33):
            hidden = hidden / "d"
    else:
        monkeypatch.setattr(answer_guard, "MAX_FILES", 5)
        for i in range(5):
            (data / "a").mkdir(parents=True, exist_ok=True)
            (data / "a" / f"{i}.txt").write_text("x")
        hidden = data / "z"
    hidden.mkdir(parents=True)
    (hidden / "answers.json").write_bytes(s8f.answers.read_bytes())
    with pytest.raises(InputError) as caught:
        make_project([], [str(data)], base=tmp_path)
    assert str(caught.value).startswith(f"{data}: ") and "the answer guard cannot read" in str(caught.value)


@pytest.mark.parametrize("shape", ["document", "json-lines"])
def test_answers_past_the_guards_node_bound_refuse_the_project(s8f, tmp_path, monkeypatch, shape):
    """The guard stopped its walk of a document after 5,000,000 lists and objects and called it
    clean: the s8f answers beside `[[]] * 5_000_001` (14 MiB) reached the candidate. A document
    the walk cannot finish is now refused, naming the file (here with the bound lowered)."""
    import orjson

    from microctx.candidates import answer_guard
    from microctx.candidates.project import make_project
    from microctx.errors import InputError

    monkeypatch.setattr(answer_guard, "_MAX_NODES", 1000)
    answers = orjson.loads(s8f.answers.read_bytes())["answers"]
    data = tmp_path / "data"
    data.mkdir()
    notes = data / "notes.json"
    document = orjson.dumps({"answers": answers, "pad": [[]] * 1001})
    notes.write_bytes(document if shape == "document" else b"{}\n" + document + b"\n")
    with pytest.raises(InputError) as caught:
        make_project([], [str(data)], base=tmp_path)
    assert str(caught.value) == f"{notes}: more than 1,000 JSON lists and objects; the answer guard cannot read them all"
    notes.write_bytes(orjson.dumps({"answers": answers[:10], "pad": [[]] * 900}))  # under the bound: read whole
    with pytest.raises(InputError, match="test answer"):
        make_project([], [str(data)], base=tmp_path)


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16", "utf-16-le", "utf-32"])
@pytest.mark.parametrize("size", ["read whole", "over the read limit"])
def test_answers_saved_with_a_byte_order_mark_are_found(s8f, tmp_path, monkeypatch, encoding, size):
    """A copy of the answers saved as Windows tools save text (UTF-8 with a BOM, UTF-16, UTF-32)
    passed the guard, which looked for `{` or `[` as the first byte; Python's `json.loads` of the
    file's bytes reads it as it is. Found (read whole), or refused (over the read limit)."""
    import json

    from microctx.candidates import answer_guard
    from microctx.candidates.project import make_project
    from microctx.errors import InputError

    data = tmp_path / "data"
    data.mkdir()
    copy = data / "copy.json"
    copy.write_bytes(s8f.answers.read_text().encode(encoding))
    assert len(json.loads(copy.read_bytes())["answers"]) > 0  # what a candidate would do
    if size == "over the read limit":
        monkeypatch.setattr(answer_guard, "FILE_LIMIT", 2048)
    with pytest.raises(InputError) as caught:
        make_project([], [str(data)], base=tmp_path)
    said = "the answer guard cannot read it whole" if size == "over the read limit" else "test answer"
    assert str(copy) in str(caught.value) and said in str(caught.value)


@pytest.mark.parametrize("shape", ["indented", "compact", "lines"])
def test_answers_beside_a_nan_are_found(s8f, tmp_path, shape):
    """Python's json.dump writes NaN and Infinity, which orjson refuses: a results file holding
    the answers and a NaN metric (pretty or compact, or JSON Lines with an Infinity on each line)
    passed the guard, and json.load reads it. Now it is parsed as Python's json parses it."""
    import json

    from microctx.candidates.project import make_project
    from microctx.errors import InputError

    answers = json.loads(s8f.answers.read_bytes())["answers"]
    data = tmp_path / "data"
    data.mkdir()
    results = data / "results.json"
    document = {"f1": float("nan"), "answers": answers}
    results.write_text(
        json.dumps(document, indent=2)
        if shape == "indented"
        else json.dumps(document)
        if shape == "compact"
        else "\n".join(json.dumps({**a, "weight": float("inf")}) for a in answers)
    )
    with pytest.raises(InputError) as caught:
        make_project([], [str(data)], base=tmp_path)
    assert str(results) in str(caught.value) and "test answer" in str(caught.value)


@pytest.mark.parametrize("form", ["columns", "split", "csv", "tsv", "csv-crlf", "csv-cr"])
def test_answers_as_a_table_are_found(s8f, tmp_path, form):
    """A pandas DataFrame of the answers saved as it saves by default (`to_json()`: one object per
    column), with `orient="split"`, or as CSV/TSV, held no answer record object and passed the
    guard. Found now; the same table of train and tune records still passes."""
    import pandas as pd

    from microctx.candidates.project import make_project
    from microctx.errors import InputError

    frame = pd.DataFrame(json.loads(s8f.answers.read_bytes())["answers"])
    data = tmp_path / "data"
    data.mkdir()

    def save(table) -> None:
        table = table.astype(str)
        if form.startswith("csv") or form == "tsv":
            ending = {"csv-crlf": "\r\n", "csv-cr": "\r"}.get(form, "\n")
            table.to_csv(data / "table.txt", sep="\t" if form == "tsv" else ",", lineterminator=ending)
        else:
            table.to_json(data / "table.txt", orient=form)

    save(frame[frame["split"] != "test"])
    make_project([], [str(data)], base=tmp_path)  # passes: nothing held out in it
    save(frame)
    with pytest.raises(InputError) as caught:
        make_project([], [str(data)], base=tmp_path)
    assert str(data / "table.txt") in str(caught.value) and "test answer" in str(caught.value)


def test_a_table_the_csv_module_cannot_read_is_still_searched(s8f):
    """A row the csv module refuses (a field past its size limit, a stray carriage return in a
    binary file's first line) neither crashes the guard (it raised csv.Error out of the run) nor
    hides the answer rows after it."""
    from microctx.candidates.answer_guard import holds_answers

    answers = json.loads(s8f.answers.read_bytes())["answers"]
    test = next(a for a in answers if a["split"] == "test")
    header = "id,split,state\n"
    huge = f'1,train,"{"x" * 200_000}"\n'  # past csv.field_size_limit() (131,072)
    row = f"{test['id']},test,{test['state']}\n"
    assert holds_answers((header + huge + row).encode())
    assert not holds_answers((header + huge).encode())
    assert not holds_answers(b"\x00\x01id\rsplit\x7f\rstate\x00\n\x02\x03")  # binary litter: no error


def _answer_lines(s8f) -> list[bytes]:
    import orjson

    return [orjson.dumps(record) for record in orjson.loads(s8f.answers.read_bytes())["answers"]]


@pytest.mark.parametrize("shape", ["json-lines", "pretty", "padded", "weights", "train-lines"])
def test_a_file_over_the_guards_read_limit_is_read_in_pieces_or_refused(s8f, tmp_path, monkeypatch, shape):
    """A file over FILE_LIMIT used to pass unread: answers padded past 256 MiB went unseen. Now JSON
    Lines are read line by line, other JSON over the limit is refused naming the file, and a file
    that opens no JSON value (model weights) still passes."""
    import orjson

    from microctx.candidates import answer_guard
    from microctx.candidates.project import make_project
    from microctx.errors import InputError

    lines = _answer_lines(s8f)
    test_lines = [line for line in lines if orjson.loads(line)["split"] == "test"]
    train_lines = [line for line in lines if orjson.loads(line)["split"] != "test"]
    data = tmp_path / "data"
    data.mkdir()
    body = {
        "json-lines": b"\n".join(train_lines + test_lines[:1]) + b"\n",
        "pretty": orjson.dumps({"records": [orjson.loads(line) for line in test_lines]}, option=orjson.OPT_INDENT_2),
        "padded": b" " * 3000 + b"[" + test_lines[0] + b"]",
        "weights": b"GGUF" + bytes(range(256)) * 40,
        "train-lines": b"\n".join(train_lines) + b"\n",
    }[shape]
    (data / "blob").write_bytes(body)
    monkeypatch.setattr(answer_guard, "FILE_LIMIT", 2048)  # every blob is over it, as a 300 MiB file is
    assert len(body) > answer_guard.FILE_LIMIT
    if shape in ("weights", "train-lines"):
        make_project([], [str(data)], base=tmp_path)  # passes: nothing held out in it
        return
    with pytest.raises(InputError) as caught:
        make_project([], [str(data)], base=tmp_path)
    assert str(data / "blob") in str(caught.value)


def test_a_sparse_300_mib_file_opening_with_an_answer_is_not_passed(s8f, tmp_path):
    """At the real limit: a 300 MiB file (sparse, so cheap) whose first line is a test answer."""
    import orjson

    from microctx.candidates.answer_guard import find_answers
    from microctx.errors import InputError

    first = next(line for line in _answer_lines(s8f) if orjson.loads(line)["split"] == "test")
    blob = tmp_path / "blob.json"
    with open(blob, "wb") as handle:
        handle.write(first + b"\n")
        handle.truncate(300 << 20)
    assert find_answers([blob]) == [blob]  # found on its first line, before the padding is read
    blob.write_bytes(b"[\n" + first + b"\n")
    with open(blob, "r+b") as handle:
        handle.truncate(300 << 20)
    with pytest.raises(InputError, match="cannot read it whole"):
        find_answers([blob])


def test_a_large_file_swapped_for_a_fifo_or_a_link_never_blocks_the_guard(tmp_path):
    """The guard reads a file over its read limit after listing it as a large regular file; a
    candidate still writing the folder (a sweep's runs share the cache folder, checked by the
    guard before each run) may swap it for a FIFO or a link meanwhile. Opened as listed or not at
    all: never blocking on the FIFO, never following the link."""
    import os
    import threading

    from microctx.candidates.answer_guard import find_answers

    fifo, link = tmp_path / "blob", tmp_path / "link"
    os.mkfifo(fifo)
    link.symlink_to(fifo)
    got: list = []  # a path given is read as listed, as a walk's files are: one open, regular only
    reader = threading.Thread(target=lambda: got.extend(find_answers([p]) for p in (fifo, link)), daemon=True)
    reader.start()
    reader.join(5)
    try:
        assert got == [[], []]
    finally:
        if reader.is_alive():  # the old guard waits for a writer: give it one, so no thread is left behind
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            reader.join(5)


def test_a_link_to_the_answer_bundle_named_in_a_command_is_refused(s8f, tmp_path, monkeypatch):
    """A file a `--cmd` names is bound into the sandbox as the file its name reaches; named
    through a symbolic link to the answer bundle it was passed (the guard opens no link: it saw
    nothing to read) and the candidate read the answers at the link's path."""
    from microctx.candidates import registry, runner
    from microctx.errors import InputError

    monkeypatch.chdir(tmp_path)
    (tmp_path / "answers-link.json").symlink_to(s8f.answers)
    candidate = registry.resolve("linked", cmd="python solve.py answers-link.json")
    with pytest.raises(InputError, match="refusing to pass an answer bundle"):
        runner._command(candidate, False, [])
