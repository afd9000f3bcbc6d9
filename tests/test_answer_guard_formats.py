"""The answer guard finds held-out answers whatever the serialisation: without column names, over
its read limit, compressed or archived, in binary table formats and pickles; a decompression bomb
is refused, not passed; and the public corpus, the devkit, the built-in candidates and the
project's own files still pass (microctx.candidates.answer_guard, answer_formats)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import pickle
import sqlite3
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def frame(s8f):
    import pandas as pd

    return pd.DataFrame(json.loads(s8f.answers.read_bytes())["answers"])


def _refused(tmp_path, name: str, body: bytes) -> None:
    """`body` saved as data/`name` makes the project refused, naming the file."""
    from microctx.candidates.project import make_project
    from microctx.errors import InputError

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / name).write_bytes(body)
    with pytest.raises(InputError) as caught:
        make_project([], [str(data)], base=tmp_path)
    assert str(caught.value).startswith(f"{data / name}: "), caught.value


def _passes(tmp_path, name: str, body: bytes) -> None:
    from microctx.candidates.project import make_project

    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / name).write_bytes(body)
    make_project([], [str(data)], base=tmp_path)


def _zipped(name: str, body: bytes, method: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", method) as archive:
        archive.writestr(name, body)
    return out.getvalue()


def _tarred(name: str, body: bytes, mode: str = "w") -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode) as archive:
        info = tarfile.TarInfo(name)
        info.size = len(body)
        archive.addfile(info, io.BytesIO(body))
    return out.getvalue()


def _sqlite(tmp_path, table) -> bytes:
    path = tmp_path / f"made-{len(table)}.sqlite"
    with sqlite3.connect(path) as connection:
        table.astype(str).to_sql("answers", connection)
    connection.close()
    return path.read_bytes()


WITHOUT_NAMES = {
    "values": lambda t, _: t.to_json(orient="values").encode(),
    "values-transposed": lambda t, _: t.T.to_json(orient="values").encode(),
    "renamed-columns": lambda t, _: t.set_axis([f"c{i}" for i in range(t.shape[1])], axis=1).to_json().encode(),
    "keyed-by-id": lambda t, _: t.set_index("id").to_json(orient="index").encode(),
    "values-lines": lambda t, _: b"\n".join(json.dumps(row).encode() for row in t.values.tolist()),
    "csv-headerless": lambda t, _: t.to_csv(index=False, header=False).encode(),
    "tsv-renamed-header": lambda t, _: t.to_csv(index=False, sep="\t", header=[f"c{i}" for i in range(t.shape[1])]).encode(),
    "yaml": lambda t, _: "".join(f"- {r.id}: {{split: {r.split}, refs: {r.references}}}\n" for r in t.itertuples()).encode(),
    "sqlite": lambda t, tmp: _sqlite(tmp, t),
}


@pytest.mark.parametrize("form", sorted(WITHOUT_NAMES))
def test_answers_without_column_names_are_found(s8f, frame, tmp_path, form):
    """pandas' `to_json(orient="values")` (lists with no names), a transposed table, renamed
    columns, records keyed by id, a headerless CSV, YAML or an SQLite file held no object with an
    `id` and a `split` and passed the guard. The value test finds the test records' ids each
    followed by "test", or a column of split names beside a column of ids; the same table of
    train and tune records still passes."""
    make = WITHOUT_NAMES[form]
    _passes(tmp_path, "table.bin", make(frame[frame["split"] != "test"], tmp_path))
    _refused(tmp_path, "table.bin", make(frame, tmp_path))


@pytest.mark.parametrize("orient", ["records", "index", "table", "split", "columns"])
def test_answers_as_pandas_json_by_names_are_found(s8f, frame, tmp_path, orient):
    _refused(tmp_path, "frame.json", frame.to_json(orient=orient).encode())


@pytest.mark.parametrize("form", ["csv", "csv-headerless", "tsv-renamed", "json-lines", "json-lines-values"])
def test_a_table_over_the_read_limit_is_read_in_pieces(s8f, frame, tmp_path, monkeypatch, form):
    """A CSV or TSV of answers over FILE_LIMIT (256 MiB) passed unread: only a file opening like
    JSON was read past the limit. Now any large text is read in pieces (here both bounds lowered,
    so the answers cross several pieces); train and tune rows alone still pass."""
    from microctx.candidates import answer_guard

    def make(table) -> bytes:
        names = [f"c{i}" for i in range(table.shape[1])]
        return {
            "csv": lambda: table.to_csv(index=False).encode(),
            "csv-headerless": lambda: table.to_csv(index=False, header=False).encode(),
            "tsv-renamed": lambda: table.to_csv(index=False, sep="\t", header=names).encode(),
            "json-lines": lambda: table.to_json(orient="records", lines=True).encode(),
            "json-lines-values": lambda: b"\n".join(json.dumps(row).encode() for row in table.values.tolist()) + b"\n",
        }[form]()

    train = frame[frame["split"] != "test"]
    body = make(train) + make(frame[frame["split"] == "test"].iloc[:40])
    monkeypatch.setattr(answer_guard, "FILE_LIMIT", 4096)
    monkeypatch.setattr(answer_guard, "_CHUNK", 1000)
    assert len(body) > 5 * answer_guard.FILE_LIMIT
    _passes(tmp_path, "big.txt", make(train))
    _refused(tmp_path, "big.txt", body)


def test_a_sparse_300_mib_csv_of_answers_is_found(s8f, frame, tmp_path):
    """At the real limit: 300 MiB (sparse) of a CSV whose answer rows come after the padding."""
    from microctx.candidates.answer_guard import find_answers

    big = tmp_path / "big.csv"
    with open(big, "wb") as handle:
        handle.write(b"c0,c1,c2\n")
        handle.truncate(300 << 20)
        handle.seek(0, 2)
        handle.write(frame.to_csv(index=False, header=False).encode())
    assert find_answers([big]) == [big]


COMPRESSED = {
    "gzip": lambda raw: gzip.compress(raw),
    "bz2": lambda raw: bz2.compress(raw),
    "xz": lambda raw: lzma.compress(raw),
    "xz-unchecked": lambda raw: lzma.compress(raw, check=lzma.CHECK_NONE),
    "lzma-alone": lambda raw: lzma.compress(raw, format=lzma.FORMAT_ALONE),
    "zip": lambda raw: _zipped("answers.json", raw),
    "zip-stored": lambda raw: _zipped("answers.json", raw, zipfile.ZIP_STORED),
    "tar": lambda raw: _tarred("answers.json", raw),
    "tar.gz": lambda raw: _tarred("answers.json", raw, "w:gz"),
    "tar.xz": lambda raw: _tarred("answers.json", raw, "w:xz"),
    "zip-in-tar.gz": lambda raw: _tarred("inner.zip", _zipped("answers.json", raw), "w:gz"),
    "gzip-in-zip": lambda raw: _zipped("answers.json.gz", gzip.compress(raw)),
    "zlib": lambda raw: __import__("zlib").compress(raw),
    "git-pack": lambda raw: _pack(raw),
}


@pytest.mark.parametrize("what", ["answers.json", "answers.csv"])
@pytest.mark.parametrize("container", sorted(COMPRESSED))
def test_compressed_or_archived_answers_are_found(s8f, frame, tmp_path, container, what):
    """A gzip, bzip2 or xz copy of the answers (JSON or CSV), a zip or tar of them, nested or
    not, passed the guard, which read the compressed bytes as they are."""
    raw = s8f.answers.read_bytes() if what == "answers.json" else frame.to_csv(index=False).encode()
    _refused(tmp_path, "backup.bin", COMPRESSED[container](raw))


def _npy(array, allow_pickle: bool = False) -> bytes:
    import numpy as np

    out = io.BytesIO()
    np.save(out, array, allow_pickle=allow_pickle)
    return out.getvalue()


def _npz(frame) -> bytes:
    import numpy as np

    out = io.BytesIO()
    np.savez_compressed(out, ids=frame["id"].to_numpy(str), splits=frame["split"].to_numpy(str))
    return out.getvalue()


def _parquet(table, how: str) -> bytes:
    out = io.BytesIO()
    getattr(table, f"to_{how}")(out)
    return out.getvalue()


BINARY = {
    "parquet": lambda t: _parquet(t, "parquet"),
    "parquet-renamed": lambda t: _parquet(t.set_axis([f"c{i}" for i in range(t.shape[1])], axis=1), "parquet"),
    "feather": lambda t: _parquet(t, "feather"),
    "npy-objects": lambda t: _npy(t.to_numpy(), allow_pickle=True),
    "npy-strings": lambda t: _npy(t[["id", "split", "state"]].to_numpy(str)),
    "npy-records": lambda t: _npy(
        t[["id", "split", "state"]].to_records(index=False).astype([("a", "U12"), ("b", "U6"), ("c", "U7")])
    ),
    "npz": _npz,
    "pickle-frame": lambda t: pickle.dumps(t),
    "pickle-frame-objects": lambda t: pickle.dumps(t.astype(object), protocol=2),
    "pickle-records": lambda t: pickle.dumps(t.to_dict(orient="records")),
    "pickle-text-protocol": lambda t: pickle.dumps(t.to_dict(orient="records"), protocol=0),
    "pickle-values": lambda t: pickle.dumps(t.values.tolist(), protocol=5),
}


@pytest.mark.parametrize("form", sorted(BINARY))
def test_answers_in_binary_formats_are_found(s8f, frame, tmp_path, form):
    """Parquet and Feather (read through pyarrow, by names or by the value test), NumPy arrays
    (`.npy` of objects, strings or records; `.npz`) and pickles (walked opcode by opcode, never
    unpickled) passed the guard. Found now; the same of train and tune records passes."""
    make = BINARY[form]
    _passes(tmp_path, "model.bin", make(frame[frame["split"] != "test"].reset_index(drop=True)))
    _refused(tmp_path, "model.bin", make(frame))


def test_a_decompression_bomb_or_an_unreadable_container_is_refused(s8f, tmp_path, monkeypatch):
    """A file that expands past EXPAND_LIMIT, or is nested too deep, or compressed in a way the
    guard cannot undo, is an InputError naming it (answers inside would go unseen), never a pass."""
    from microctx.candidates import answer_formats
    from microctx.candidates.answer_guard import find_answers
    from microctx.errors import InputError

    monkeypatch.setattr(answer_formats, "EXPAND_LIMIT", 1 << 20)
    bomb = tmp_path / "weights.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (2 << 20)))
    with pytest.raises(InputError, match="expands past 1 MiB") as caught:
        find_answers([tmp_path])
    assert str(caught.value).startswith(f"{bomb}: ")
    bomb.write_bytes(_zipped("a", _zipped("b", b"\0" * (2 << 20))))
    with pytest.raises(InputError, match="expands past"):
        find_answers([bomb])
    nested = s8f.answers.read_bytes()
    for _ in range(10):
        nested = gzip.compress(nested)
    bomb.write_bytes(nested)
    with pytest.raises(InputError, match="nested more than"):
        find_answers([bomb])
    bomb.write_bytes(b"(\xb5/\xfd" + bytes(100))
    with pytest.raises(InputError, match="zstd"):
        find_answers([bomb])
    bomb.write_bytes(gzip.compress(b"\0" * (1 << 19)))  # under the limit: read, and clean
    assert find_answers([bomb]) == []


def test_the_public_corpus_devkit_builtins_and_project_files_pass(s8f, devkit, frame, tmp_path):
    """No false alarms: the public corpus as published and as a table with its names (CSV,
    Parquet, pandas JSON), the report, the devkit (train and tune answers), every built-in
    candidate's folder and the project's own code, docs and tests pass; in the s8f folder only
    the answer bundle is found."""
    import pandas as pd

    from microctx.candidates.answer_guard import find_answers

    public = pd.DataFrame(json.loads(s8f.public.read_bytes())["records"])
    data = tmp_path / "data"
    data.mkdir()
    (data / "public.json").write_bytes(s8f.public.read_bytes())
    (data / "report.json").write_bytes(s8f.report.read_bytes())
    (data / "devkit.json").write_bytes(devkit.read_bytes())
    (data / "public.csv").write_bytes(public.to_csv(index=False).encode())
    (data / "public.parquet").write_bytes(_parquet(public, "parquet"))
    (data / "public.json.gz").write_bytes(gzip.compress(s8f.public.read_bytes()))
    for orient in ("columns", "split", "records", "index", "table"):
        (data / f"public-{orient}.json").write_bytes(public.to_json(orient=orient).encode())
    (data / "devkit.pkl").write_bytes(pickle.dumps(json.loads(devkit.read_bytes())))
    assert find_answers([data]) == []
    own = [ROOT / "microctx", ROOT / "docs", *sorted((ROOT / "tests").glob("*.py")), ROOT / "tests" / "candidates"]
    assert find_answers([ROOT / "microctx" / "candidates" / "builtins"]) == []
    assert find_answers(own) == []
    assert find_answers([s8f.public.parent]) == [s8f.answers]


@pytest.mark.parametrize("magic", ["gzip", "pickle", "npy", "zip", "tar", "lzma", "parquet-in-zip"])
def test_answers_behind_a_formats_magic_bytes_are_read_as_they_are(s8f, frame, tmp_path, magic):
    """A file that only starts like a format (its magic bytes, then the answers as CSV) must not
    pass because its format's reader gives up: its bytes are read as they are, too."""
    body = frame.to_csv(index=False, header=False).encode()
    fake = {
        "gzip": b"\x1f\x8b\x08\x00" + body,
        "pickle": b"\x80\x04" + body,
        "npy": b"\x93NUMPY\x01\x00" + body,
        "zip": b"PK\x03\x04" + body,
        "tar": b"\0" * 257 + b"ustar\x0000" + body,
        "lzma": b"\x5d" + b"\xff" * 12 + body,
        "parquet-in-zip": _zipped("x.parquet", b"PAR1" + body + b"PAR1"),
    }[magic]
    if magic == "parquet-in-zip":
        from microctx.candidates.project import make_project
        from microctx.errors import InputError

        (tmp_path / "data").mkdir()
        (tmp_path / "data" / "x.zip").write_bytes(fake)
        with pytest.raises(InputError, match="Parquet file pyarrow cannot read"):
            make_project([], [str(tmp_path / "data")], base=tmp_path)
        return
    _refused(tmp_path, "blob", fake)


@pytest.mark.parametrize("form", ["json", "csv"])
def test_answers_dressed_as_public_corpus_records_are_found(s8f, frame, tmp_path, form):
    """A public corpus record (a title and a body, state and labels) is not an answer; answer
    records given a title, a body and their references under another name are: only a record
    with no name a corpus record lacks is judged a corpus record."""
    from microctx.contract.schemas import PUBLIC_FIELDS

    public = json.loads(s8f.public.read_bytes())["records"]
    assert {key for record in public for key in record} == PUBLIC_FIELDS
    dressed = frame.assign(title="", body="").rename(columns={"references": "refs"})
    dressed = dressed.drop(columns=["duplicate_targets", "scope_contradictions"])
    _refused(
        tmp_path,
        "corpus.txt",
        dressed.to_json(orient="records").encode() if form == "json" else dressed.to_csv(index=False).encode(),
    )


def test_answers_split_into_small_files_are_found(s8f, frame, tmp_path):
    """The value test needs ten test records; answers without names cut into files of five
    records each passed it one file at a time. The count runs across the folder's files (to 30)."""
    from microctx.candidates.answer_guard import find_answers

    test = frame[frame["split"] == "test"]
    data = tmp_path / "data"
    data.mkdir()
    for start in range(0, 50, 5):
        (data / f"part-{start:03}.csv").write_bytes(test.iloc[start : start + 5].to_csv(index=False, header=False).encode())
    found = find_answers([data])
    assert 0 < len(found) < 10  # from the file that brings the count to 30 on
    train = frame[frame["split"] != "test"]
    for start in range(0, 50, 5):
        (data / f"part-{start:03}.csv").write_bytes(train.iloc[start : start + 5].to_csv(index=False, header=False).encode())
    assert find_answers([data]) == []


def _xlsx(table) -> bytes:
    """A minimal Excel workbook of `table` as spreadsheet programs write it: each distinct string
    once in xl/sharedStrings.xml, the cells referring to it by number."""
    from xml.sax.saxutils import escape

    rows = [list(table.columns)] + table.astype(str).values.tolist()
    shared = list(dict.fromkeys(value for row in rows for value in row))
    index = {value: i for i, value in enumerate(shared)}
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    strings = "".join(f"<si><t>{escape(value)}</t></si>" for value in shared)
    cells = "".join(
        f'<row r="{r + 1}">' + "".join(f'<c t="s"><v>{index[value]}</v></c>' for value in row) + "</row>"
        for r, row in enumerate(rows)
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("xl/sharedStrings.xml", f'<sst xmlns="{main}">{strings}</sst>')
        book.writestr("xl/worksheets/sheet1.xml", f'<worksheet xmlns="{main}"><sheetData>{cells}</sheetData></worksheet>')
    return out.getvalue()


def test_answers_in_an_excel_workbook_are_found(s8f, frame, tmp_path):
    """An .xlsx keeps "test" once in its shared strings and refers to it from each row: neither
    member alone holds a test row. Its sheets are read as rows of values."""
    _passes(tmp_path, "book.xlsx", _xlsx(frame[frame["split"] != "test"]))
    _refused(tmp_path, "book.xlsx", _xlsx(frame.set_axis([f"c{i}" for i in range(frame.shape[1])], axis=1)))


GROUPED = {
    "json-ids": lambda t: json.dumps({s: list(g["id"]) for s, g in t.groupby("split")}).encode(),
    "json-records-by-id": lambda t: json.dumps(
        {s: g.set_index("id").to_dict(orient="index") for s, g in t.groupby("split")}
    ).encode(),
    "yaml": lambda t: "".join(f"{s}:\n" + "".join(f"  - {i}\n" for i in g["id"]) for s, g in t.groupby("split")).encode(),
    "pickle": lambda t: pickle.dumps({s: g.drop(columns="split").values.tolist() for s, g in t.groupby("split")}),
}


@pytest.mark.parametrize("form", sorted(GROUPED))
def test_answers_grouped_under_their_split_are_found(s8f, frame, tmp_path, form):
    """Records grouped by split (`{"test": [ids or records by id], "train": ...}`, a YAML
    section per split) carry "test" once, before the list: no id is followed by its split. A
    list of ids under a "test" is test records; the train and tune groups alone still pass."""
    _passes(tmp_path, "groups.bin", GROUPED[form](frame[frame["split"] != "test"]))
    _refused(tmp_path, "groups.bin", GROUPED[form](frame))


def test_a_container_the_guard_cannot_open_is_refused(s8f, frame, tmp_path, monkeypatch):
    """Decided, not passed: an encrypted zip member, and Parquet when pyarrow is missing, are
    InputErrors naming the file (the guard cannot see inside; a candidate holding the key could)."""
    import sys

    from microctx.candidates.answer_guard import find_answers
    from microctx.errors import InputError

    locked = bytearray(_zipped("answers.json", s8f.answers.read_bytes()))
    for signature, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the "encrypted" flag bit
        where = locked.find(signature) + at
        locked[where] |= 1
    path = tmp_path / "locked.zip"
    path.write_bytes(bytes(locked))
    with pytest.raises(InputError, match="'answers.json' cannot be opened") as caught:
        find_answers([path])
    assert str(caught.value).startswith(f"{path}: ")
    path = tmp_path / "table.parquet"
    path.write_bytes(_parquet(frame[frame["split"] != "test"], "parquet"))
    assert find_answers([path]) == []
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(InputError, match="pyarrow is not installed"):
        find_answers([path])


def test_answers_appended_to_a_public_corpus_table_are_found(s8f, frame, tmp_path):
    """A public corpus's CSV passes by its header's names; rows of answers appended below it
    (another width, no header of their own) must not pass with it."""
    import pandas as pd

    public = pd.DataFrame(json.loads(s8f.public.read_bytes())["records"]).to_csv(index=False).encode()
    _passes(tmp_path, "public.csv", public)
    _refused(tmp_path, "public.csv", public + frame.to_csv(index=False, header=False).encode())


@pytest.mark.parametrize("damage", ["truncated-tar.gz", "truncated-tar", "bad-crc-zip", "truncated-gzip"])
def test_a_damaged_archive_is_read_as_far_as_it_goes(s8f, tmp_path, damage):
    """A truncated archive or a zip member with a bad checksum raised out of the guard (a crash,
    not a verdict); it is read as far as a reader gets, and the answers there are found."""
    from microctx.candidates.answer_guard import find_answers

    raw = s8f.answers.read_bytes()
    body = {
        "truncated-tar.gz": lambda: _tarred("a.json", raw, "w:gz")[:-200],
        "truncated-tar": lambda: _tarred("a.json", raw)[: 512 + len(raw) // 2],
        "bad-crc-zip": lambda: _zipped("a.json", raw, zipfile.ZIP_STORED).replace(
            b'"id": "issue-5105"', b'"id": "issue-5104"', 1
        ),
        "truncated-gzip": lambda: gzip.compress(raw)[: len(gzip.compress(raw)) // 2],
    }[damage]()
    path = tmp_path / "damaged"
    path.write_bytes(body)
    assert find_answers([path]) == [path]


def test_damaged_files_give_a_verdict_or_an_input_error(s8f, frame):
    """Every format the guard opens, truncated or with bytes flipped (a fixed sequence): a verdict
    or an InputError, never another exception or a crash (an Arrow batch read unchecked took the
    process down with a segmentation fault; numpy's header parse raised tokenize's errors; a zip
    member's damaged header a ValueError)."""
    import random

    from microctx.candidates.answer_guard import holds_answers
    from microctx.errors import InputError

    raw, rows = s8f.answers.read_bytes(), frame.iloc[:60]
    seeds = {**{k: make(rows) for k, make in BINARY.items()}, **{k: make(raw[:20000]) for k, make in COMPRESSED.items()}}
    seeds["xlsx"] = _xlsx(rows)
    rng = random.Random(4)
    for name, blob in seeds.items():
        for _ in range(60):
            damaged = bytearray(blob)
            how = rng.choice(["cut", "flip", "both"])
            if how != "flip":
                damaged = damaged[: rng.randrange(1, len(damaged))]
            if how != "cut":
                for _ in range(rng.randrange(1, 8)):
                    damaged[rng.randrange(len(damaged))] = rng.randrange(256)
            try:
                assert holds_answers(bytes(damaged), name) in (True, False)
            except InputError:
                pass


def _pack(blob: bytes) -> bytes:
    """A git pack holding one blob object."""
    import zlib

    size, head = len(blob), bytearray([0x80 | 3 << 4 | len(blob) & 0x0F])
    size >>= 4
    while size:
        head[-1] |= 0x80
        head.append(size & 0x7F)
        size >>= 7
    head[-1] &= 0x7F
    return b"PACK\0\0\0\x02\0\0\0\x01" + bytes(head) + zlib.compress(blob)


@pytest.mark.parametrize("store", ["loose", "packed"])
def test_answers_committed_to_git_and_deleted_are_found(s8f, tmp_path, monkeypatch, store):
    """A code folder that is a git checkout: answers committed once and deleted since are still in
    `.git/objects` (zlib streams, or a pack of them), where `git show` reads them; they passed."""
    import subprocess

    from microctx.candidates import answer_git
    from microctx.candidates.answer_guard import find_answers
    from microctx.errors import InputError

    repo = tmp_path / "code"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@b", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    (repo / "main.py").write_text("print(1)\n")
    git("add", ".")
    git("commit", "-qm", "code")
    if store == "packed":
        git("gc", "-q")
    assert find_answers([repo]) == []  # a repository without answers passes
    (repo / "answers.json").write_bytes(s8f.answers.read_bytes())
    git("add", ".")
    git("commit", "-qm", "answers")
    git("rm", "-q", "answers.json")
    git("commit", "-qm", "gone")
    if store == "packed":
        git("gc", "-q")
    found = find_answers([repo])
    assert found and all(".git/objects/" in str(path) for path in found)
    assert (".pack" in str(found[0])) == (store == "packed")
    bomb = tmp_path / "bomb.pack"
    bomb.write_bytes(_pack(b"\0" * (4 << 20)))
    monkeypatch.setattr(answer_git, "_SLACK", 1 << 20)
    with pytest.raises(InputError, match="expands over 64 times"):
        find_answers([bomb])


PROSE_INDEXES = {
    "json-by-id": lambda r: json.dumps({x["id"]: x["title"] + "\n" + x["body"] for x in r}).encode(),
    "json-rows": lambda r: json.dumps([[x["id"], x["title"], x["body"]] for x in r]).encode(),
    "tsv-titles": lambda r: "\n".join(f"{x['id']}\t{x['title']}" for x in r).encode(),
    "pickle-by-id": lambda r: pickle.dumps({x["id"]: x["body"] for x in r}),
}


@pytest.mark.parametrize("form", sorted(PROSE_INDEXES))
def test_a_text_index_of_train_and_tune_issues_passes(s8f, tmp_path, form):
    """A candidate's retrieval index of the train and tune issues (ids beside their titles and
    bodies, no split at all) was refused as test answers: "test" in an issue's prose ("a unit
    test", "non-test callers", a title "test(ci): ...") within 1 KiB of its id counted as its
    split. A split name is a value, not a word of prose; the same index of test answers' splits
    is still found."""
    records = [r for r in json.loads(s8f.public.read_bytes())["records"] if r["split"] != "test"]
    _passes(tmp_path, f"index-{form}", PROSE_INDEXES[form](records))
    tests = [{**r, "body": r["body"] + "\nsplit: test\n"} for r in json.loads(s8f.public.read_bytes())["records"]]
    _refused(tmp_path, f"index-test-{form}", PROSE_INDEXES[form]([{**r, "title": "test"} for r in tests]))


def test_a_public_corpus_csv_over_the_read_limit_passes(s8f, tmp_path, monkeypatch):
    """The public corpus as a CSV over FILE_LIMIT, read in pieces: each piece was cut at its
    last line end, inside a quoted body, so the next piece's rows came apart, went to the value
    test as rows of another width, and the corpus was refused as test answers. A piece ends
    where a row does; answers appended to the corpus table are still found."""
    import pandas as pd

    from microctx.candidates import answer_guard

    public = pd.DataFrame(json.loads(s8f.public.read_bytes())["records"])
    monkeypatch.setattr(answer_guard, "FILE_LIMIT", 1 << 18)
    monkeypatch.setattr(answer_guard, "_CHUNK", 1 << 16)
    body = public.to_csv(index=False).encode()
    assert len(body) > 5 * answer_guard.FILE_LIMIT and b"\n" in body[body.index(b'"') :]
    _passes(tmp_path, "public.csv", body)
    tests = public[public["split"] == "test"].iloc[:40][["id", "split", "state"]]
    _refused(tmp_path, "public.csv", body + tests.to_csv(index=False, header=False).encode())


PRINTED = {
    "to-string": lambda t: t[["id", "split", "state"]].to_string(header=False).encode(),
    "print-rows": lambda t: "".join(f"{r.id} {r.split} {r.state}\n" for r in t.itertuples()).encode(),
    "pipes": lambda t: "".join(f"| {r.id} | {r.split} | {r.state} |\n" for r in t.itertuples()).encode(),
    "html": lambda t: t[["id", "split", "state"]].to_html().encode(),
    "xml": lambda t: t[["id", "split", "state"]].to_xml(parser="etree").encode(),
    "key-value": lambda t: "".join(f"id={r.id} split={r.split} state={r.state}\n" for r in t.itertuples()).encode(),
    "latex": lambda t: "".join(f"{r.id} & {r.split} & {r.state} \\\\\n" for r in t.itertuples()).encode(),
    "slash": lambda t: "".join(f"{r.id}/{r.split}\n" for r in t.itertuples()).encode(),
}


@pytest.mark.parametrize("form", sorted(PRINTED))
def test_answers_printed_as_a_table_without_names_are_found(s8f, frame, tmp_path, form):
    """A split name is a value, not a word of prose (the test above), but a printed table's
    cell is one: `print(id, split, state)`, pandas' `to_string`, Markdown, HTML, XML, LaTeX, `key=value`."""
    _passes(tmp_path, f"printed-{form}-train.txt", PRINTED[form](frame[frame["split"] != "test"]))
    _refused(tmp_path, f"printed-{form}.txt", PRINTED[form](frame[frame["split"] == "test"].iloc[:40]))
