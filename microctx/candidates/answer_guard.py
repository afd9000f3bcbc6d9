"""The answer guard: no folder or file handed to a candidate holds held-out answers, by content.

`holds_answers(data)` is true when the bytes are a JSON document (or JSON Lines) anywhere inside
which is a list of answer records: objects with an `id`, a `split` of "test" and at least one of
the answer fields (`state`, `labels`, `references`, `duplicate_targets`, `scope_contradictions`).
The schema string, the file name and the serialisation do not matter: an `answers.json.bak`, a
re-serialised or re-indented copy, a bare list of records, one record per line, a table of them
(a pandas DataFrame's `to_json()` by columns or `orient="split"`, CSV or TSV with a header), a
copy with a byte order mark (UTF-16) or a NaN (`json.dump` writes one) are all found;
a helper file that merely mentions the schema's name is not. A devkit (train and tune answers
only) passes. `find_answers(paths)` walks folders without following links, reads regular files
whole up to `FILE_LIMIT` bytes, and never blocks on a FIFO. A larger file is read in pieces: one
whose first non-blank byte opens no JSON value passes (as it would below the limit: model weights,
archives), JSON Lines are read line by line, and any other JSON over the limit is an InputError
naming the file, not a pass. Likewise a folder the walk cannot finish (more than `MAX_FILES`
files, or folders deeper than `_MAX_DEPTH` levels) and a document holding more than `_MAX_NODES`
lists and objects: answers past a bound would go unseen.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from microctx.errors import InputError

FILE_LIMIT = 256 << 20
MAX_FILES = 20_000
_ANSWER_FIELDS = frozenset({"state", "labels", "references", "duplicate_targets", "scope_contradictions"})
_MAX_NODES = 5_000_000
_MAX_DEPTH = 32


class _Unchecked(Exception):
    """A document with more than _MAX_NODES lists and objects: the walk would miss the rest."""


def _is_answer(item: object) -> bool:
    return isinstance(item, dict) and "id" in item and item.get("split") == "test" and not _ANSWER_FIELDS.isdisjoint(item)


def _names_answers(names: object) -> bool:
    return isinstance(names, (list, dict)) and "id" in names and "split" in names and not _ANSWER_FIELDS.isdisjoint(names)


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


def _csv_holds(data: bytes) -> bool:
    """A CSV (or TSV) table of answer records: a header naming `id`, `split` and an answer field,
    and a row whose split is "test". Any line ending (CRLF, LF, a lone CR); a row the csv module
    cannot read (a field past its size limit, a stray CR) is split on the delimiter instead."""
    end = data.find(b"\n", 0, 1 << 16)  # the header first: a binary file is not decoded whole
    first = data[: end if end >= 0 else 1 << 16].decode("utf-8", errors="replace")
    delimiter = max(",\t;|", key=first.count)
    header = [name.strip() for name in next(_csv_rows(first, delimiter), [])]
    if not _names_answers(header):
        return False
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


def _holds(document: object) -> bool:
    stack, seen = [document], 0
    while stack:
        if seen == _MAX_NODES:  # not a pass: answers past the bound would go unseen
            raise _Unchecked
        node = stack.pop()
        seen += 1
        if isinstance(node, list):
            if any(_is_answer(item) for item in node):
                return True
            stack += [item for item in node if isinstance(item, (list, dict))]
        elif isinstance(node, dict):
            if _is_answer(node) or _is_answer_table(node):
                return True
            stack += [value for value in node.values() if isinstance(value, (list, dict))]
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


def holds_answers(data: bytes) -> bool:
    """True when `data` is JSON or JSON Lines holding test answer records (see the module's docstring)."""
    data = _as_utf8(data)
    stripped = data.lstrip()
    if stripped[:1] not in (b"{", b"["):
        return _csv_holds(data)
    try:
        return _holds(_loads(data))
    except ValueError:
        pass
    for line in data.splitlines():
        if line.strip()[:1] in (b"{", b"["):
            try:
                if _holds(_loads(line)):
                    return True
            except ValueError:
                continue
    return False


def read_bounded(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > FILE_LIMIT:
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            return handle.read(FILE_LIMIT + 1)
    finally:
        os.close(fd)


_CHUNK = 1 << 20


def _large_file_holds(path: Path) -> bool:
    """`holds_answers` for a regular file over FILE_LIMIT, in bounded memory: False when its first
    non-blank byte opens no JSON value; JSON Lines checked line by line (each line at most
    FILE_LIMIT bytes); InputError for anything else, which cannot be read whole."""
    import orjson

    too_big = f"over {FILE_LIMIT >> 20} MiB and not JSON Lines; the answer guard cannot read it whole"
    try:  # as `read_bounded`: the file was a large regular file when listed, a candidate may have swapped it since
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as handle:
        first = b""
        while not first:
            chunk = handle.read(_CHUNK)
            if not chunk:
                return False
            first = chunk.lstrip()[:1]
        if first not in (b"{", b"["):
            if _as_utf8(chunk[:4096]).lstrip()[:1] in (b"{", b"["):  # JSON with a byte order mark
                raise InputError(path, too_big.replace("not JSON Lines", "not UTF-8"))
            return False
        handle.seek(0)
        while line := handle.readline(FILE_LIMIT + 1):
            if len(line) > FILE_LIMIT:
                raise InputError(path, too_big)
            if not line.strip():
                continue
            try:
                if _holds(orjson.loads(line)):
                    return True
            except orjson.JSONDecodeError:
                raise InputError(path, too_big) from None
    return False


def _is_large_file(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size > FILE_LIMIT


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
    """The files among `paths` (files, or folders walked) that hold test answers; [] when none."""
    found = []
    for path in walk_files(paths):
        data = read_bounded(path)
        try:
            holds = holds_answers(data) if data is not None else _is_large_file(path) and _large_file_holds(path)
        except _Unchecked:
            raise InputError(
                path, f"more than {_MAX_NODES:,} JSON lists and objects; the answer guard cannot read them all"
            ) from None
        if holds:
            found.append(path)
    return found
