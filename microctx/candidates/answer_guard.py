"""The answer guard: no folder or file handed to a candidate holds held-out answers, by content.

Test answer records are records with an `id`, a `split` of "test" and at least one answer field
(`state`, `labels`, `references`, `duplicate_targets`, `scope_contradictions`). The callers
(`project.make_project`, `cachedir.check_cache_dir`, the runner's check of file arguments) hold
no answer bundle, so the guard knows no test id: it finds the records by two tests.

- By names: JSON (or JSON Lines) anywhere inside which is such a record or a table of them (a
  list of records, pandas' `to_json()` by columns, `orient="split"`, `"records"`, `"index"`,
  `"table"`), a CSV/TSV whose header names the fields, Parquet or Arrow columns named so. A
  public corpus record (a `title` and a `body`, and no field a corpus record lacks, so none
  only answers hold: references, duplicate targets, scope contradictions) is not one: state and
  labels are candidate input. So the public corpus passes, as published or as a table with its names.
- By values, blind to names and layout (`_Tally`): the corpus's ids (`issue-<number>`) and the
  split names in every string outside a named record, in order (a split name as a value, not a
  word of an issue's title or body: `answer_formats.tokens`). `_MIN_ROWS` distinct ids each
  followed within `_ROW_SPAN` bytes by "test" (rows: a headerless CSV, `orient="values"`, YAML,
  SQLite, a pickled list) or listed under a "test" (records grouped by split), or a column of split names holding `_MIN_ROWS` "test"s beside
  `_MIN_ROWS` ids (a table stored by columns: a pickled or Arrow DataFrame, a transposed table,
  an `.npz` of columns) are test records. Without names a public corpus's test records look the
  same, so a nameless copy of them is refused too. Fewer than `_MIN_ROWS` test records without
  names in a file pass, and fewer than `_MIN_WALK_ROWS` across a walk's files (a partial leak
  below the bounds: a note may mention an issue beside the word "test").

The file's bytes are read whatever the name, the serialisation or the encoding (a byte order
mark, UTF-16/32, a NaN). answer_formats opens what is inside: gzip, bzip2, xz and .lzma, zip
and tar members (nested), git objects and packs (answer_git: a file committed and deleted),
Parquet and Arrow through pyarrow, Excel workbooks, NumPy arrays and pickles (walked, never
unpickled); a decompression bomb, or a container the guard cannot open, is an InputError
naming the file, never a pass. A devkit (train and tune answers only) passes.

`find_answers(paths)` walks folders without following links and never blocks on a FIFO. A file
(or a member) up to `FILE_LIMIT` bytes is read whole; a larger one in pieces: JSON Lines line by
line, other text in pieces of `_CHUNK` bytes cut at line ends; a larger JSON document that is not
JSON Lines is an InputError naming it (it cannot be read whole). Likewise a folder the walk cannot
finish (more than `MAX_FILES` files, or folders deeper than `_MAX_DEPTH` levels) and a document
holding more than `_MAX_NODES` lists and objects: answers past a bound would go unseen.
Out of reach by design: answers encoded or encrypted (base64, a cipher), or split from their
`split` (ids of test records with no split name beside them).
"""

from __future__ import annotations

import io
import os
import re
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from microctx.candidates import answer_formats
from microctx.contract.schemas import ANSWER_FIELDS, PUBLIC_FIELDS
from microctx.errors import InputError

FILE_LIMIT = 256 << 20
MAX_FILES = 20_000
_ANSWER_FIELDS = frozenset(ANSWER_FIELDS)
# a corpus record's names, and those pandas and pyarrow give a table's index
_CORPUS_NAMES = PUBLIC_FIELDS | {"", "index", "level_0", "Unnamed: 0", "__index_level_0__"}
_MAX_NODES = 5_000_000
_MAX_DEPTH = 32
_MIN_ROWS = 10  # distinct test records the value test needs (a partial leak of fewer passes it)
_MIN_WALK_ROWS = 30  # the same across a walk's files (a mention of an issue in a note is one)
_ROW_SPAN = 1024  # bytes from a record's id to its split name, in one row
_RUN_GAP = 64  # bytes between split names in one column
_CHUNK = 16 << 20
_NON_BLANK = re.compile(rb"[^ \t\n\r\f\v]")


class _Unchecked(Exception):
    """A document with more than _MAX_NODES lists and objects: the walk would miss the rest."""


def _corpus_names(names: Iterable) -> bool:
    """A public corpus record's names: a title and a body, and no name a corpus record lacks
    (besides a table's index), so none of the fields only answers hold."""
    return "title" in names and "body" in names and all(name in _CORPUS_NAMES for name in names)


def _is_answer(item: object) -> bool:
    return (
        isinstance(item, dict)
        and "id" in item
        and item.get("split") == "test"
        and not _ANSWER_FIELDS.isdisjoint(item)
        and not _corpus_names(item)
    )


def _names_answers(names: object) -> bool:
    return (
        isinstance(names, (list, dict))
        and "id" in names
        and "split" in names
        and not _ANSWER_FIELDS.isdisjoint(names)
        and not _corpus_names(names)
    )


def _is_corpus(node: dict) -> bool:
    """A public corpus record, or a table of them with its names (by columns or `orient="split"`)."""
    columns = node.get("columns")
    return _corpus_names(node) or (isinstance(columns, list) and _corpus_names(columns))


# a corpus record's or table's values the names judged (any other value is still read)
_JUDGED = PUBLIC_FIELDS | {"columns", "index", "data"}


def _is_answer_table(node: dict) -> bool:
    """Answer records as columns: `{"id": {...}, "split": {"0": "test", ...}, "state": ...}` (a
    pandas DataFrame's `to_json()`, by default) or `{"columns": [...], "data": [[...], ...]}`
    (its `orient="split"`)."""
    if _names_answers(node):
        split = node["split"]
        return "test" in (split.values() if isinstance(split, dict) else split if isinstance(split, list) else ())
    columns, rows = node.get("columns"), node.get("data")
    if not (_names_answers(columns) and isinstance(columns, list) and isinstance(rows, list)):
        return False
    at = columns.index("split")
    return any(isinstance(row, list) and len(row) > at and row[at] == "test" for row in rows)


class _Tally:
    """The value test, blind to names and layout: the record ids (`issue-<number>`) and split
    names in a file's strings, in order. Test records are ids followed within `_ROW_SPAN` bytes
    by "test" (rows: a headless CSV, lists of values, a pickled list of records), or a list of
    ids under a "test" (records grouped by split: `{"test": [...]}`, a YAML section); the file
    holds answers at `_MIN_ROWS` of them, or when a column of split names holds `_MIN_ROWS`
    "test"s beside `_MIN_ROWS` distinct ids (a table stored by columns: a pickled or Arrow
    DataFrame, a transposed table)."""

    def __init__(self) -> None:
        self.ids: set[bytes] = set()
        self.rows: set[bytes] = set()
        self.column_tests = 0
        self.restart()

    def restart(self) -> None:
        """A new content of the file (an archive's next member): offsets start again."""
        self.pending, self.pending_at = b"", 0
        self.run_end, self.run_tests = -_RUN_GAP - 1, 0
        self.heading, self.heading_at, self.first = False, 0, b""  # a list of ids under a "test"
        self.at = 0  # the offset of the next value a walk of parsed values feeds

    def _row(self, token: bytes) -> None:
        if len(self.rows) < _MIN_WALK_ROWS:
            self.rows.add(token)

    def feed(self, matches: Iterable[tuple[int, bytes]]) -> bool:
        for at, token in matches:
            if token[0] == 0x69:  # "i": an id
                if len(self.ids) < _MIN_ROWS:
                    self.ids.add(token)
                self.pending, self.pending_at = token, at
                if not (self.heading and at - self.heading_at <= _ROW_SPAN):
                    self.heading = False
                    continue
                self.heading_at = at + len(token)
                if self.first == b"-":  # a list of ids under the "test"
                    self._row(token)
                elif self.first:  # a second id under it: a list, not a row's next id
                    self._row(self.first)
                    self._row(token)
                    self.first = b"-"
                else:
                    self.first = token
                    continue
                if self.holds:
                    return True
                continue
            is_test = token == b"test"
            self.run_tests = (self.run_tests if 0 <= at - self.run_end <= _RUN_GAP else 0) + is_test
            self.run_end = at + len(token)
            self.heading, self.heading_at, self.first = is_test, self.run_end, b""
            if is_test:
                self.column_tests = max(self.column_tests, self.run_tests)
                if self.pending and at - self.pending_at <= _ROW_SPAN:
                    self._row(self.pending)
                    self.pending = b""
                if self.holds:
                    return True
        return self.holds

    @property
    def holds(self) -> bool:
        return len(self.rows) >= _MIN_ROWS or (self.column_tests >= _MIN_ROWS and len(self.ids) >= _MIN_ROWS)

    def scan(self, data: bytes, offset: int = 0) -> bool:
        if b"issue-" not in data and b"test" not in data:  # most bytes (weights): found at memory speed
            return self.holds
        return self.feed(answer_formats.tokens(data, offset))

    def value(self, value: object) -> None:
        """One parsed scalar (or a key), at the walk's next offset; None is nothing."""
        if value is None:
            return
        if isinstance(value, str):
            data = value.encode("utf-8", "surrogatepass")
            self.scan(data, self.at)
            self.at += len(data) + 3
        else:
            self.at += 4


def _header(data: bytes) -> tuple[list[str], str]:
    """The first line's names and the delimiter (of `,`, tab, `;`, `|`) it holds most of."""
    end = data.find(b"\n", 0, 1 << 16)  # the header first: a binary file is not decoded whole
    first = data[: end if end >= 0 else 1 << 16].decode("utf-8", errors="replace")
    delimiter = max(",\t;|", key=first.count)
    return [name.strip() for name in next(_csv_rows(first, delimiter), [])], delimiter


def _csv_holds(data: bytes, tally: _Tally, offset: int = 0) -> bool:
    """A CSV (or TSV) table whose header names `id` and `split` and an answer field is judged by
    its names (a row whose split is "test"), as a public corpus's table is (its rows pass; rows
    of another width go to the value test); any other text goes to the value test. Any line ending (CRLF, LF, a lone CR); a row the csv module
    cannot read (a field past its size limit, a stray CR) is split on the delimiter instead."""
    header, delimiter = _header(data)
    if "id" in header and "split" in header and _corpus_names(header):  # rows of another width: values
        rows = _csv_rows(data.decode("utf-8", errors="replace"), delimiter)
        odd = "\n".join(delimiter.join(row) for row in rows if len(row) != len(header))
        return tally.scan(odd.encode("utf-8", "surrogatepass"), offset)
    if not _names_answers(header):
        return tally.scan(data, offset)
    at = header.index("split")
    rows = _csv_rows(data.decode("utf-8", errors="replace"), delimiter)
    return any(len(row) > at and row[at].strip() == "test" for row in rows)


def _csv_rows(text: str, delimiter: str) -> Iterator[list[str]]:
    """`text`'s rows as the csv module reads them; from a row it cannot read on, each line split
    on `delimiter` (a guard must not stop at what it cannot parse: answers may lie past it)."""
    import csv
    import io

    lines = io.StringIO(text, newline="")
    try:
        yield from csv.reader(lines, delimiter=delimiter)
    except csv.Error:
        for line in text.splitlines():
            yield line.split(delimiter)


def _holds(document: object, tally: _Tally) -> bool:
    """Answer records (or a table of them) anywhere in a parsed document, by their names; every
    value outside a public corpus's named records goes to the value test as well."""
    stack: list[tuple[object, object]] = [(None, document)]
    seen = 0
    while stack:
        if seen == _MAX_NODES:  # not a pass: answers past the bound would go unseen
            raise _Unchecked
        key, node = stack.pop()
        seen += 1
        tally.value(key)  # a key is a value too: records keyed by their ids (`orient="index"`)
        if isinstance(node, list):
            if any(_is_answer(item) for item in node):
                return True
            items: Iterable[tuple[object, object]] = ((None, item) for item in node)
        elif isinstance(node, dict):
            if _is_answer(node) or _is_answer_table(node):
                return True
            items = ((k, v) for k, v in node.items() if k not in _JUDGED) if _is_corpus(node) else node.items()
        else:
            continue
        children = []
        for item in items:
            if isinstance(item[1], (list, dict)):
                children.append(item)
            else:
                tally.value(item[0])
                tally.value(item[1])
        if tally.holds:
            return True
        stack += children
    return False


def _as_utf8(data: bytes) -> bytes:
    """`data` as UTF-8 without a byte order mark: a copy saved with one (UTF-8 with BOM, UTF-16 or
    UTF-32, as Windows tools write it) is JSON that Python's `json.loads` reads as it is."""
    import json

    encoding = json.detect_encoding(data)
    return data if encoding == "utf-8" else data.decode(encoding, errors="replace").encode()


def _loads(data: bytes) -> object:
    """`data` parsed as orjson parses it, or as Python's `json` does (NaN and Infinity, which
    `json.dump` writes and orjson refuses); ValueError when neither can."""
    import json

    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        try:
            return json.loads(data)
        except RecursionError:
            raise ValueError("nested too deep") from None


def _text_holds(data: bytes, tally: _Tally) -> bool:
    """`data` (read whole, at most FILE_LIMIT bytes) as text: JSON, JSON Lines, CSV or anything else."""
    text = _as_utf8(data)  # binary bytes may look like UTF-16 or UTF-32: read both ways
    if text.lstrip()[:1] not in (b"{", b"["):
        if _csv_holds(data, tally):
            return True
        if text is data:
            return False
        tally.restart()
        return _csv_holds(text, tally)
    data = text
    try:
        return _holds(_loads(data), tally)
    except ValueError:
        pass
    for line in data.splitlines():  # JSON Lines; a line that is not JSON goes to the value test
        try:
            if _holds(_loads(line), tally) if line.strip()[:1] in (b"{", b"[") else tally.scan(line):
                return True
        except ValueError:
            if tally.scan(line):
                return True
    return False


def _large_holds(path: object, first: bytes, rest, tally: _Tally) -> bool:
    """`first` (FILE_LIMIT bytes read) and the `rest` of a larger text, in bounded memory: JSON
    Lines read line by line (each at most FILE_LIMIT bytes), any other JSON an InputError (it
    cannot be read whole), anything else read in pieces of about `_CHUNK` bytes, cut at line
    ends, each judged as `_csv_holds` judges a text (with the header, when it names columns)."""
    import orjson

    too_big = f"over {FILE_LIMIT >> 20} MiB and not JSON Lines; the answer guard cannot read it whole"
    while not (start := _NON_BLANK.search(first)):  # blank so far
        if not (first := rest.read(_CHUNK)):
            return False
    head = memoryview(first)[start.start() :]  # not a copy of 256 MiB
    opening = bytes(head[: 1 << 16])
    stream = io.BufferedReader(answer_formats.Prefixed(rest, head), _CHUNK)
    if opening[:1] in (b"{", b"["):
        while line := stream.readline(FILE_LIMIT + 1):
            if len(line) > FILE_LIMIT:
                raise InputError(path, too_big)
            try:
                if line.strip() and _holds(orjson.loads(line), tally):
                    return True
            except orjson.JSONDecodeError:
                raise InputError(path, too_big) from None
        return False
    if _as_utf8(opening[:4096]).lstrip()[:1] in (b"{", b"["):  # JSON with a byte order mark
        raise InputError(path, too_big.replace("not JSON Lines", "not UTF-8"))
    header = opening[: opening.find(b"\n") + 1]
    names = _header(header)[0]
    named = "id" in names and "split" in names and (_corpus_names(names) or _names_answers(names))
    offset, carry = 0, b""
    while block := stream.read(_CHUNK):
        data = carry + block
        cut = _row_end(data) if named and len(data) <= 4 * _CHUNK else 0
        cut = cut or data.rfind(b"\n") + 1 or len(data)
        piece, carry = data[:cut], data[cut:]
        if _csv_holds(header + piece if named and offset else piece, tally, offset):
            return True
        offset += len(piece)
    return _csv_holds(header + carry if named else carry, tally, offset)


def _row_end(data: bytes) -> int:
    """Where the last whole CSV row of `data` (which starts a row) ends: after a line end outside
    quotes (a cell quoting an issue's body holds line ends); 0 when there is none."""
    quotes = data.count(b'"')
    end = len(data)
    while (line_end := data.rfind(b"\n", 0, end)) >= 0:
        quotes -= data.count(b'"', line_end + 1, end)
        if quotes % 2 == 0:
            return line_end + 1
        end = line_end
    return 0


def _content_holds(path: object, reader, tally: _Tally) -> bool:
    """`reader` (a file's bytes) holds test answers, in any container or format answer_formats
    opens. `tally`: the file's (the columns of a table may be an archive's members, `.npz`)."""
    budget = answer_formats.Budget(path)
    for content in answer_formats.contents(path, reader, budget):
        tally.restart()
        if isinstance(content, answer_formats.Plain):
            first = content.reader.read(FILE_LIMIT + 1)
            holds = _text_holds(first, tally) if len(first) <= FILE_LIMIT else _large_holds(path, first, content.reader, tally)
        elif isinstance(content, answer_formats.Rows):
            holds = any(_holds(rows, tally) for rows in content.batches)
        else:
            holds = tally.feed(content.matches)
        if holds:
            return True
    return False


def holds_answers(data: bytes, name: object = "<data>") -> bool:
    """True when `data` holds test answer records (see the module's docstring); InputError (naming
    `name`) when it cannot be read all."""
    try:
        return _content_holds(name, io.BytesIO(data), _Tally())
    except _Unchecked:
        raise InputError(
            name, f"more than {_MAX_NODES:,} JSON lists and objects; the answer guard cannot read them all"
        ) from None


def read_bounded(path: Path) -> bytes | None:
    """A regular file's bytes when it has at most FILE_LIMIT; None for a larger file, a link or
    anything else (a FIFO is never waited on)."""
    handle = _open_regular(path)
    if handle is None:
        return None
    with handle:
        return handle.read(FILE_LIMIT + 1) if os.fstat(handle.fileno()).st_size <= FILE_LIMIT else None


def _open_regular(path: Path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return os.fdopen(fd, "rb")


def walk_files(paths: Iterable[Path]) -> Iterable[Path]:
    """Regular-file candidates under `paths`: links not followed. InputError (naming the folder
    given) past MAX_FILES files or _MAX_DEPTH levels of folders: the walk would miss the rest."""
    count = 0
    for top in paths:
        todo = [(top, 0)] if top.is_dir() and not top.is_symlink() else []
        if not todo:
            count += 1
            yield top
        while todo:
            folder, depth = todo.pop()
            try:
                with os.scandir(folder) as entries:
                    listed = [(Path(e.path), e.is_dir(follow_symlinks=False), e.is_file(follow_symlinks=False)) for e in entries]
            except OSError:
                continue
            for path, is_dir, is_file in listed:
                if is_dir:
                    if depth + 1 >= _MAX_DEPTH:
                        raise InputError(top, f"folders deeper than {_MAX_DEPTH} levels; the answer guard cannot read it all")
                    todo.append((path, depth + 1))
                elif is_file:
                    count += 1
                    if count > MAX_FILES:
                        raise InputError(top, f"more than {MAX_FILES:,} files; the answer guard cannot read them all")
                    yield path


def find_answers(paths: Iterable[Path]) -> list[Path]:
    """The files among `paths` (files, or folders walked) that hold test answers; [] when none.
    The value test counts test records across the files too: answers split into files of fewer
    than `_MIN_ROWS` records each are found from the file that brings the count to
    `_MIN_WALK_ROWS` on."""
    found: list[Path] = []
    rows: set[bytes] = set()  # the test records the value test saw in the files before
    for path in walk_files(paths):
        handle = _open_regular(path)
        if handle is None:
            continue
        with handle:
            try:
                tally = _Tally()
                holds = _content_holds(path, handle, tally)
                rows |= tally.rows
                holds = holds or bool(tally.rows) and len(rows) >= _MIN_WALK_ROWS
            except _Unchecked:
                raise InputError(
                    path, f"more than {_MAX_NODES:,} JSON lists and objects; the answer guard cannot read them all"
                ) from None
        if holds:
            found.append(path)
    return found
