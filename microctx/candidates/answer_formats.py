"""What the answer guard looks inside: compressed files, archives and binary table formats.

`contents(name, reader, budget)` turns one file's bytes into what its content tests read: a
gzip, bzip2, xz, .lzma or zlib stream (a git loose object) is decompressed, and every regular
member of a zip or tar archive and every object of a git pack (answer_git; compressed or not,
nested in one another up to `_MAX_LAYERS` deep) is opened in turn;
what is left comes out as one of

- `Plain`: bytes the guard reads as text (JSON, CSV, anything else), in pieces;
- `Rows`: batches of records a reader of the format gives with their column names (Parquet
  and Arrow/Feather through pyarrow, each batch validated first; a NumPy `.npy`/`.npz` array of
  strings or records), or rows of values (an Excel workbook's sheets, its shared strings put
  back in their cells);
- `Values`: the strings of a format read without running it, as `(offset, token)`
  pairs (a pickle, which is never unpickled: its opcodes are walked and its memo replayed, so a
  string pickled once and referenced again counts at each place; a NumPy array of objects is a
  pickle after its header).

A file in a format is read as plain bytes as well (a member or stream of at most
`_REPLAY_LIMIT` bytes is kept in memory for that), so bytes that merely start like a format (a
gzip or pickle header, then answers) are read as they are; a corrupt or truncated compressed
stream is read up to where it breaks, as a candidate's reader would read it.

Every byte a decompressor or a compressed zip member gives counts against the file's `Budget`:
past `EXPAND_LIMIT` expanded bytes, `_MAX_MEMBERS` archive members or `_MAX_LAYERS` nested
containers the file is an InputError naming it (a decompression bomb is refused, never passed).
A container the guard cannot open (an encrypted zip member, zstd, LZ4, 7-Zip or RAR, a Parquet
or Arrow file pyarrow cannot read, or without pyarrow) is refused the same way: answers inside
would go unseen.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from microctx.candidates import answer_git
from microctx.errors import InputError

EXPAND_LIMIT = 1 << 30
_MAX_MEMBERS = 20_000
_MAX_LAYERS = 8
_HEAD = 512
_PIECE = 1 << 16  # bytes asked of a decompressor at a time
_REPLAY_LIMIT = 256 << 20  # a member or stream in a format is kept to be read again up to this
_KINDS = frozenset({"gzip", "bz2", "xz", "lzma", "zlib", "git pack", "zip", "tar", "parquet", "arrow", "npy", "pickle"})
# the tokens the value test counts: record ids as the corpus writes them (`issue-<number>`, the
# freeze's) and split names (lower case, not inside a word), also run together as binary formats
# store strings ("issue-5105issue-5106", "testtraintest", "issue-5105testCLOSED")
_TOKENS = re.compile(rb"issue-[0-9]{1,19}|(?:test|train|tune)(?=test|train|tune|[^a-z_]|\Z)")
_WORD = frozenset(b"abcdefghijklmnopqrstuvwxyz_")
_OPENER = frozenset(b"\t,;|\"'[]{}=:<>/")  # glued before a value ("id=test", "<td>test", "issue-1/test")
_LEAD = frozenset(b"\n\r\t:-,;|=&>")  # before spaces, what opens a value ("split: test", "- test", "a & test")
_HARD_END = frozenset(b"\n\r\t,;|\"']}<&\\")
_SPLIT_HEADS = (b"test", b"trai", b"tune")
_ID_END = re.compile(rb"issue-[0-9]{1,19}\Z")


def _binary(byte: int | None) -> bool:  # a control byte, non-ASCII, A-Z or 0-9: a binary format's next string
    return byte is not None and (byte < 0x20 or byte >= 0x7F or 0x41 <= byte <= 0x5A or 0x30 <= byte <= 0x39)


def tokens(data: bytes, offset: int = 0) -> Iterator[tuple[int, bytes]]:
    """The tokens in `data`, as `(offset + where, token)`. A split name counts where it is a value:
    a string of its own, a field between separators ("issue-1,test,CLOSED", `split: test`, a YAML
    `test:` heading), or run together with other strings as binary formats store them
    ("issue-5105testCLOSED", "testtrain"). Inside a word ("contest", "non-test") or a sentence
    ("a unit\ntest proving", "(test passes", a title "test(ci): ...") it is prose, which an
    issue's title or body holds beside its id, and not a split. (Checked here, not by a
    look-behind in the pattern, which would make the scan of every byte ten times slower.)"""
    after = -1  # where the last split name ended
    for match in _TOKENS.finditer(data):
        start, token = match.start(), match.group()
        if token[0] == 0x74:  # "t": a split name
            if start != after and not _is_value(data, start, match.end()):
                continue
            after = match.end()
        yield offset + start, token


def _ends(data: bytes, end: int) -> bool:
    """A value ends at `end`: the data's end, a separator, another split name or a binary
    format's next string; or spaces before what is not a word ("test  CLOSED", "test & ..."); or
    a heading's `:` before a line, a list or a mapping. Not a sentence or a name going on
    ("test proving", "test(ci)", "test-covered", "test.ps1", "test/java", "test: add")."""
    follow = data[end] if end < len(data) else None
    if follow is None or follow in _HARD_END or data[end : end + 4] in _SPLIT_HEADS or _binary(follow):
        return True
    if follow in (0x20, 0x3A):
        rest = data[end + 1 : end + 66].lstrip(b" ")
        return not rest or not (rest[:1].isalpha() if follow == 0x3A else rest[:1].islower())
    return False


def _is_value(data: bytes, start: int, end: int) -> bool:
    """The split name at `start:end` stands as a value, not as a word of prose (see `tokens`)."""
    before = data[start - 1] if start else None
    if before is None or before in (0x0A, 0x0D):
        return _ends(data, end)
    if before == 0x20:  # after spaces: a value after what opens one, an id ("issue-12  test") or a line's start
        at = start - 1
        while at > 0 and data[at - 1] == 0x20 and start - at < 64:
            at -= 1
        lead = at == 0 or data[at - 1] in _LEAD or _ID_END.search(data, max(0, at - 30), at) is not None
        return lead and _ends(data, end)
    if before == 0x2F:  # "/": a value ("issue-1/test") only where it ends, never a path going on
        return _ends(data, end) and data[end : end + 1] != b"/"
    if before in _OPENER or _binary(before):  # glued: "id=test state=CLOSED", "<td>test</td>"
        return data[end : end + 1] not in (b"(", b"-", b".", b"/") and (data[end : end + 1] != b":" or _ends(data, end))
    return False


@dataclass(frozen=True)
class Plain:
    """Bytes to read as text, from a binary reader."""

    reader: Any


@dataclass(frozen=True)
class Rows:
    """Batches of records (dicts by column name, or lists of values)."""

    batches: Iterator[list]


@dataclass(frozen=True)
class Values:
    """`(offset, token)` pairs of the `tokens` in a format's strings, in order."""

    matches: Iterator[tuple[int, bytes]]


Content = Plain | Rows | Values


class Budget:
    """The expanded bytes and archive members one file may still give, and the file to name."""

    def __init__(self, path: object):
        self.path, self.left, self.members = path, EXPAND_LIMIT, 0
        self.limit = EXPAND_LIMIT

    def take(self, count: int) -> None:
        self.left -= count
        if self.left < 0:
            self.refuse(f"expands past {self.limit >> 20} MiB (compressed or archived); the answer guard cannot read it all")

    def member(self) -> None:
        self.members += 1
        if self.members > _MAX_MEMBERS:
            self.refuse(f"holds more than {_MAX_MEMBERS:,} archive members; the answer guard cannot read them all")

    def refuse(self, message: str) -> None:
        raise InputError(self.path, message)


class _Counted(io.RawIOBase):
    """`inner`'s bytes (a decompressor's, a member's), counted against `budget` unless they are
    stored as they are; an error of the format (corrupt, truncated, a bad CRC) ends the stream."""

    def __init__(self, inner, budget: Budget, count: bool):
        self.inner, self.budget, self.count = inner, budget, count

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        import lzma
        import tarfile
        import zipfile
        import zlib

        try:
            data = self.inner.read(min(len(buffer), _PIECE))  # an error loses at most a piece
        except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError, zipfile.BadZipFile, tarfile.TarError):
            return 0  # what came before is all a reader would get
        if self.count:
            self.budget.take(len(data))
        buffer[: len(data)] = data
        return len(data)


def _counted(inner, budget: Budget, count: bool = True) -> io.BufferedReader:
    return io.BufferedReader(_Counted(inner, budget, count), 1 << 20)


_MAGIC = {
    b"\x1f\x8b": "gzip",
    b"BZh": "bz2",
    b"\xfd7zXZ\x00": "xz",
    b"PK\x03\x04": "zip",
    b"PK\x05\x06": "zip",
    b"PAR1": "parquet",
    b"\x93NUMPY": "npy",
    b"ARROW1": "arrow",
    # refused: no reader here
    b"(\xb5/\xfd": "compressed with zstd",
    b"\x04\x22\x4d\x18": "compressed with LZ4",
    b"7z\xbc\xaf\x27\x1c": "a 7-Zip archive",
    b"Rar!\x1a\x07": "a RAR archive",
}


def _kind(head: bytes) -> str:
    """What `head` (a file's first bytes) opens: a format's name, or "plain"."""
    for magic, kind in _MAGIC.items():
        if head.startswith(magic):
            return kind
    if head[:1] == b"\x5d" and (head[5:13] == b"\xff" * 8 or head[12:13] == b"\x00"):
        return "lzma"  # the legacy .lzma format: no magic; its usual properties byte, then a size
    if head[257:262] == b"ustar":
        return "tar"
    if answer_git.is_pack(head):
        return "git pack"
    if answer_git.is_zlib(head):
        return "zlib"
    if head[:1] == b"\x80" and len(head) > 1 and 2 <= head[1] <= 5:
        return "pickle"
    if head[:1] in b"(c]}" and (b"p0\n" in head or b"q\x00" in head):  # protocols 0 and 1
        return "pickle"
    return "plain"


def _source(reader, head: bytes, layer: int) -> tuple[Any, bool]:
    """`reader` from its first byte again, and whether it can be read again after its format's
    reader is done: a file on disk itself; a member or a decompressed stream in memory when it
    has at most `_REPLAY_LIMIT` bytes (counted against the budget as it is read), else as a
    stream read once."""
    if layer == 0 and reader.seekable():
        reader.seek(0)
        return reader, True
    data = head + reader.read(_REPLAY_LIMIT)
    if len(data) > _REPLAY_LIMIT:
        return io.BufferedReader(Prefixed(reader, data), 1 << 20), False
    return io.BytesIO(data), True


class Prefixed(io.RawIOBase):
    """`head` (already read), then the rest of `inner`."""

    def __init__(self, inner, head: bytes | memoryview):
        self.inner, self.head, self.at = inner, memoryview(head), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self.at < len(self.head):  # no copy of the rest of a large head per read
            count = min(len(buffer), len(self.head) - self.at)
            buffer[:count] = self.head[self.at : self.at + count]
            self.at += count
            return count
        data = self.inner.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def contents(name: object, reader, budget: Budget, layer: int = 0) -> Iterator[Content]:
    """What `reader` (binary, at its start) holds, as the module's docstring says. A file in a
    format is read as plain bytes as well (when it can be read again): bytes that merely start
    like a format (answers behind a gzip or pickle header) are still read."""
    if layer > _MAX_LAYERS:
        budget.refuse(f"containers nested more than {_MAX_LAYERS} deep; the answer guard cannot read them all")
    head = reader.read(_HEAD)
    kind = _kind(head)
    if kind == "plain":
        yield Plain(io.BufferedReader(Prefixed(reader, head), 1 << 20))
        return
    if kind not in _KINDS:
        budget.refuse(f"{kind}, which the answer guard cannot read; give the data uncompressed or as zip, tar, gzip, bzip2 or xz")
    source, again = _source(reader, head, layer)
    if kind in ("zip", "parquet", "arrow") and not again:
        source, again = io.BytesIO(source.read()), True  # these are read by seeking
    yield from _formatted(name, kind, source, budget, layer)
    if again:
        source.seek(0)
        yield Plain(source)


def _formatted(name: object, kind: str, source, budget: Budget, layer: int) -> Iterator[Content]:
    import bz2
    import gzip
    import lzma

    if kind in ("gzip", "bz2", "xz", "lzma"):
        opened = (
            gzip.GzipFile(fileobj=source)
            if kind == "gzip"
            else bz2.BZ2File(source)
            if kind == "bz2"
            else lzma.LZMAFile(source, format=lzma.FORMAT_XZ if kind == "xz" else lzma.FORMAT_ALONE)
        )
        yield from contents(name, _counted(opened, budget), budget, layer + 1)
    elif kind == "zlib":  # a git loose object, or any zlib stream
        yield from contents(name, _counted(answer_git.Inflated(source), budget), budget, layer + 1)
    elif kind == "git pack":
        for data in answer_git.pack_objects(source, budget.refuse):
            yield from contents(name, io.BytesIO(data), budget, layer + 1)
    elif kind == "zip":
        yield from _zip_members(name, source, budget, layer)
    elif kind in ("parquet", "arrow"):
        yield Rows(_arrow_rows(source, budget, kind))
    elif kind == "tar":
        yield from _tar_members(name, source, budget, layer)
    elif kind == "npy":
        yield from _npy(source, budget)
    else:
        yield Values(pickle_values(source))


def _zip_members(name: object, source, budget: Budget, layer: int) -> Iterator[Content]:
    import zipfile

    try:
        archive = zipfile.ZipFile(source)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError):
        return  # not a readable archive: its bytes are read as they are
    with archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            budget.member()
            try:
                member = archive.open(info)
            except (
                RuntimeError,
                NotImplementedError,
                zipfile.BadZipFile,
                OSError,
                EOFError,
                ValueError,
            ) as exc:  # encrypted, unknown method, damaged
                budget.refuse(f"zip member {info.filename!r} cannot be opened ({exc}); the answer guard cannot read it")
            with member:
                stored = info.compress_type == zipfile.ZIP_STORED  # no expansion to count
                yield from contents(name, _counted(member, budget, count=not stored), budget, layer + 1)
        if "xl/sharedStrings.xml" in archive.namelist():
            yield Rows(_xlsx_rows(archive, budget))


def _xlsx_rows(archive, budget: Budget) -> Iterator[list]:
    """An Excel workbook's rows, a sheet at a time: its cells keep each distinct string once
    (`xl/sharedStrings.xml`) and refer to it by number, so its members alone hide the rows."""
    from xml.etree.ElementTree import ParseError, iterparse

    shared: list[str] = []
    try:
        with archive.open("xl/sharedStrings.xml") as strings:
            for _, element in iterparse(_counted(strings, budget)):
                if element.tag.endswith("}si"):
                    shared.append("".join(element.itertext()))
                    element.clear()
        for sheet in (n for n in archive.namelist() if n.startswith("xl/worksheets/") and n.endswith(".xml")):
            rows = []
            with archive.open(sheet) as cells:
                for _, element in iterparse(_counted(cells, budget)):
                    if element.tag.endswith("}row"):
                        rows.append([_cell(cell, shared) for cell in element if cell.tag.endswith("}c")])
                        element.clear()
            yield rows
    except (ParseError, KeyError, RuntimeError, NotImplementedError):
        return  # a broken workbook: its members were read as they are


def _cell(cell, shared: list[str]) -> str:
    value = cell.find("{*}v")
    text = value.text or "" if value is not None else "".join(cell.itertext())
    if cell.get("t") == "s" and text.isdigit() and int(text) < len(shared):
        return shared[int(text)]
    return text


def _tar_members(name: object, source, budget: Budget, layer: int) -> Iterator[Content]:
    import tarfile

    try:
        with tarfile.open(fileobj=source, mode="r|") as archive:
            for info in archive:
                if not info.isreg():
                    continue
                budget.member()
                member = archive.extractfile(info)
                if member is not None:  # stored as it is: no expansion to count
                    yield from contents(name, _counted(member, budget, count=False), budget, layer + 1)
    except tarfile.TarError:
        return  # a broken archive: what came before was searched, and its bytes are read as they are


def _arrow_rows(source, budget: Budget, kind: str) -> Iterator[list[dict]]:
    """A Parquet or Arrow (Feather 2) file's records, a batch at a time, through pyarrow."""
    what = "a Parquet file" if kind == "parquet" else "an Arrow (Feather) file"
    try:
        import pyarrow.ipc as ipc
        import pyarrow.parquet as parquet
    except ImportError:
        budget.refuse(f"{what}, and pyarrow is not installed; the answer guard cannot read it")
    try:
        if kind == "parquet":
            batches = parquet.ParquetFile(source).iter_batches(batch_size=1 << 14)
        else:
            reader = ipc.open_file(source)
            batches = (reader.get_batch(index) for index in range(reader.num_record_batches))
        for batch in batches:
            batch.validate(full=True)  # a damaged Arrow batch read unchecked crashes the process
            yield batch.to_pylist()
    except Exception as exc:  # any failure of the reader (pyarrow's errors are many): refused, not passed
        budget.refuse(f"{what} pyarrow cannot read ({type(exc).__name__}: {exc}); the answer guard cannot read it")


def _npy(source, budget: Budget) -> Iterator[Content]:
    """A NumPy array: objects are a pickle (walked as one); strings and records are read as rows;
    numbers hold no id or split name and pass."""
    import numpy as np
    from numpy.lib import format as npy

    try:
        version = npy.read_magic(source)
        shape, fortran, dtype = npy.read_array_header_1_0(source) if version == (1, 0) else npy.read_array_header_2_0(source)
    except Exception:  # numpy's header parse raises more than ValueError (tokenize's errors)
        return  # not an array after all: its bytes are read as they are
    if dtype.hasobject:
        yield Values(pickle_values(source))
        return
    if not (dtype.names or dtype.kind in "SU"):
        return
    count = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if count > budget.left:
        budget.refuse(f"a NumPy array of {count:,} bytes of text; the answer guard cannot read it all")
    data = source.read(count)
    array = np.frombuffer(data[: len(data) - len(data) % dtype.itemsize], dtype=dtype)  # a truncated file: its whole items
    yield Rows(iter([[_plain(row, dtype.names) for row in array.tolist()]]))


def _plain(value: object, names: tuple[str, ...] | None = None) -> object:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, (tuple, list)):
        items = [_plain(item) for item in value]
        return dict(zip(names, items, strict=False)) if names else items
    return value


_STRINGS = frozenset(
    {"STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE", "SHORT_BINUNICODE", "BINUNICODE8"}
    | {"BINBYTES", "SHORT_BINBYTES", "BINBYTES8", "BYTEARRAY8"}
)


def pickle_values(source) -> Iterator[tuple[int, bytes]]:
    """The `tokens` in a pickle's strings and byte strings, in order, with their offsets; a string
    fetched again from the memo counts again. The pickle is walked (pickletools), never run."""
    import pickletools

    memo: dict[int, list[tuple[int, bytes]]] = {}
    last: list[tuple[int, bytes]] = []
    source = _Tell(source)
    try:
        for op, arg, pos in pickletools.genops(source):
            if op.name in _STRINGS:
                data = arg.encode("utf-8", "surrogatepass") if isinstance(arg, str) else bytes(arg or b"")
                last = list(tokens(data))
            elif op.name == "MEMOIZE":
                memo[len(memo)] = last
                continue
            elif op.name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(arg or 0)] = last
                continue
            elif op.name in ("GET", "BINGET", "LONG_BINGET"):
                last = memo.get(int(arg or 0), [])
            else:
                last = []
            for offset, token in last:
                yield (pos or 0) + offset, token
    except (ValueError, EOFError, OverflowError, UnicodeDecodeError, MemoryError):
        return  # a broken pickle: what came before it was searched, and its bytes are read as they are


class _Tell:
    """A stream's read and readline, with the offset pickletools asks for (a stream that cannot
    seek cannot say it)."""

    def __init__(self, inner):
        self.inner, self.offset = inner, 0

    def read(self, count: int = -1) -> bytes:
        data = self.inner.read(count)
        self.offset += len(data)
        return data

    def readline(self) -> bytes:
        data = self.inner.readline()
        self.offset += len(data)
        return data

    def tell(self) -> int:
        return self.offset
