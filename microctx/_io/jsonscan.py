"""Streaming JSON readers: the objects of a large array one batch at a time (exports, corpora)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from typing import BinaryIO, cast

import orjson

from microctx._io.hashing import HashingReader
from microctx._io.jsonio import open_input

_WS = b" \t\r\n"
_ITEM_END = re.compile(rb"\}[ \t\r\n]*[,\]]")
# A JSON string (its escapes skipped), a string not yet ended in the buffer, or a bracket.
_TOKENS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|"|[{}\[\]]', re.S)
_MAX_MISSES = 8  # candidate ends that did not parse before the array's objects are scanned
_SCAN = re.compile(rb"(?!)")  # the end "pattern" once scanning: each object's end found by `_object_end`


class IrregularJSON(Exception):
    """The streaming reader cannot take this file; parse it whole instead (see `iter_json_array`)."""


def iter_json_array(path: str | os.PathLike, block_size: int = 1 << 24) -> Iterator[object]:
    """Yield the objects of a JSON array one at a time, holding one block of the file in memory.

    A large export parsed whole holds its bytes and every string at once; this reads blocks and
    parses each object on its own. An object ends at a `}` followed by `,` or `]`; a candidate
    end inside a string leaves an unterminated string, so parsing fails and the next candidate is
    tried: the first slice that parses is the object. Anything unexpected (not an array of
    objects, bad JSON, invalid UTF-8) raises IrregularJSON, possibly after some objects were
    yielded: the caller then parses the whole file with `read_json`, whose errors name the problem.
    """
    handle = _open_streamed(path)
    with handle:
        yield from _scan_array(handle, block_size)


def _open_streamed(path: str | os.PathLike) -> BinaryIO:
    """`path` opened for a streaming read; IrregularJSON, before reading anything, for standard
    input (`-`): a stream that gives up would leave its caller nothing to read whole again."""
    if os.fspath(path) == "-":
        raise IrregularJSON
    return open_input(path)


def read_object_streaming(path: str | os.PathLike, list_key: str, block_size: int = 1 << 24) -> dict:
    """Parse a JSON object whose last key is a large array, holding one block of the file at a time.

    `orjson.loads` of a whole file holds the file's bytes, the parser's own copy and the Python
    objects at once; this parses the head before `"list_key": [` on its own and the array's
    items in batches (see `iter_json_array`). Anything else (another layout, keys after the
    array, bad JSON) raises IrregularJSON: the caller then uses `read_json`.
    """
    with ObjectStream(path, list_key, block_size, tail_keys=False) as stream:
        document = dict(stream.head)
        document[list_key] = list(stream.items())
    return document


class ObjectStream:
    """A JSON object holding one large array, read as its `head` (the keys before `"list_key": [`),
    the array's items one at a time (`items()`, see `iter_json_array`), and then its `tail` (the
    keys after the array, a small object such as an answer bundle's `aggregates`; `tail_keys`
    false: none allowed). Only one block of the file is held at a time.

    Anything else (another layout, a key repeated, bad JSON) raises IrregularJSON, from the
    constructor or while the items are read: the caller then parses the file whole (`read_json`),
    whose errors name the problem. Use as a context manager (the file is closed on exit).

    `hashed`: the file is hashed as it is read (`HashingReader`): `sha256` is the digest of the
    bytes parsed, and a file that changed size while it was read raises IrregularJSON after the
    last item (then read whole, and hashed with what was parsed).
    """

    def __init__(
        self, path: str | os.PathLike, list_key: str, block_size: int = 1 << 24, *, tail_keys: bool = True, hashed: bool = False
    ) -> None:
        self.list_key, self.block_size, self.tail_keys = list_key, block_size, tail_keys
        self.tail: dict | None = None  # set once every item was read
        opened = _open_streamed(path)
        self._reader = HashingReader(opened) if hashed else None
        self._handle: BinaryIO = cast(BinaryIO, self._reader) if self._reader is not None else opened
        try:
            self.head = self._read_head()
        except BaseException:
            self._handle.close()
            raise

    def _read_head(self) -> dict:
        return read_head(self._handle, self.list_key)[0]

    def items(self) -> Iterator[object]:
        """The array's items, in order; `tail` (and, `hashed`, `sha256`) is set after the last."""
        rest = self._read_tail if self.tail_keys else None
        yield from _scan_array(self._handle, self.block_size, trailer=ord("}"), rest=rest, depth=2)
        if self._reader is not None and self.sha256 is None:  # the file changed size as it was read
            raise IrregularJSON

    @property
    def sha256(self) -> str | None:
        """`hashed`: the SHA-256 of the file once every byte of it was read, else None."""
        return self._reader.hexdigest() if self._reader is not None else None

    def _read_tail(self, blocks: _Blocks) -> None:
        """After the array's `]`: the rest of the object, `}` alone or `, "key": value, ... }`."""
        text = (bytes(blocks.buf[blocks.pos :]) + blocks.handle.read()).lstrip(_WS)
        if text[:1] == b"}" and not text[1:].strip(_WS):
            self.tail = {}
            return
        if text[:1] != b",":
            raise IrregularJSON
        try:
            tail = orjson.loads(b"{" + text[1:])
        except orjson.JSONDecodeError:
            raise IrregularJSON from None
        if not isinstance(tail, dict) or not tail or tail.keys() & self.head.keys() or self.list_key in tail:
            raise IrregularJSON  # a key repeated: a whole parse keeps the last, which this could not
        self.tail = tail

    def __enter__(self) -> ObjectStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.close()


class _Blocks:
    """A file read block by block into a buffer, with a read position (`pos`) in it."""

    def __init__(self, handle: BinaryIO, block_size: int) -> None:
        self.handle = handle
        self.block_size = block_size
        self.buf = bytearray()
        self.pos = 0
        self.eof = False

    def more(self) -> bool:
        """Append the next block (dropping what lies before `pos` when that is most of the buffer)."""
        if self.eof:
            return False
        block = self.handle.read(self.block_size)
        if not block:
            self.eof = True
            return False
        if self.pos > len(self.buf) // 2:
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += block
        return True

    def skip_ws(self) -> int | None:
        """Move past white space; the next byte, or None at the end of the file."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in _WS:
                self.pos += 1
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return None

    def at_end(self, trailer: int | None) -> bool:
        """After the closing bracket: only the trailer (if any) and white space to the end."""
        if trailer is not None:
            if self.skip_ws() != trailer:
                return False
            self.pos += 1
        return self.skip_ws() is None


def _scan_array(
    handle: BinaryIO,
    block_size: int,
    batch_size: int = 1 << 20,
    trailer: int | None = None,
    rest: Callable[[_Blocks], None] | None = None,
    depth: int = 1,
) -> Iterator[object]:
    """Objects of an array, parsed about `batch_size` bytes at a time (`depth`: the array's own
    nesting level in the file, 1 at the top, 2 as a key's value in the top object).

    A batch is the text from the current object to a candidate end (`}` then `,` or `]`),
    wrapped in brackets and parsed as an array. A candidate inside a string or a nested object
    makes the batch invalid, and the next candidate is tried; batching spreads those retries
    over many objects. `rest`: what reads the file after the closing bracket (it raises
    IrregularJSON when that is not what it expects), instead of the trailer and white space.
    Each batch is parsed at the array's depth, so an item nested past the parser's limit in the
    file is refused here too (IrregularJSON), never parsed by the stream alone.
    """
    blocks = _Blocks(handle, block_size)
    if blocks.skip_ws() != ord("["):
        raise IrregularJSON
    blocks.pos += 1
    if blocks.skip_ws() == ord("]"):
        blocks.pos += 1
        _after_array(blocks, trailer, rest)
        return
    item_end = _ITEM_END
    while True:
        if blocks.skip_ws() != ord("{"):
            raise IrregularJSON
        items, end, item_end = _next_batch(blocks, batch_size, item_end, depth)
        yield from items
        if item_end is _ITEM_END and isinstance(items[0], dict) and items[0]:
            # Objects of one export share their first key: an end followed by it is far more
            # likely to be an object's end than one inside a nested label object or a string.
            key = orjson.dumps(next(iter(items[0])))
            item_end = re.compile(rb"\}(?=[ \t\r\n]*(?:,[ \t\r\n]*\{[ \t\r\n]*" + re.escape(key) + rb"[ \t\r\n]*:|\]))")
        blocks.pos = end
        sep = blocks.skip_ws()
        blocks.pos += 1
        if sep == ord(","):
            continue
        if sep == ord("]"):
            _after_array(blocks, trailer, rest)
            return
        raise IrregularJSON


def _after_array(blocks: _Blocks, trailer: int | None, rest: Callable[[_Blocks], None] | None) -> None:
    if rest is not None:
        rest(blocks)
    elif not blocks.at_end(trailer):
        raise IrregularJSON


def _next_batch(blocks: _Blocks, batch_size: int, item_end: re.Pattern, depth: int) -> tuple[list, int, re.Pattern]:
    """The objects from `blocks.pos` to the first candidate end past `batch_size` bytes that
    parses (or a closer one), the end's offset, and the end pattern in use."""
    buf = blocks.buf
    if item_end is _SCAN:
        return _scanned(blocks, depth)
    while len(buf) - blocks.pos < batch_size and blocks.more():
        pass
    candidates = []
    if blocks.eof and item_end is not _ITEM_END and len(buf) - blocks.pos <= batch_size:
        # the rest of the file is in the buffer: the last end of an object of this array (a key
        # or bracket follows it, see `_scan_array`) makes one batch of every remaining object
        candidates.extend([m.start() + 1 for m in item_end.finditer(buf, blocks.pos)][-1:])
    if blocks.eof:
        tail = buf.rfind(b"]")
        last = buf.rfind(b"}", blocks.pos, tail) if tail > blocks.pos else -1
        if last > 0 and not buf[last + 1 : tail].strip() and not buf[tail + 1 :].strip():
            candidates.append(last + 1)  # the whole rest in one batch
    search_from = blocks.pos + batch_size if len(buf) - blocks.pos > batch_size else blocks.pos
    looked_closer = search_from == blocks.pos
    misses = 0
    while True:
        if candidates:
            end = candidates.pop()
        else:
            match = item_end.search(buf, search_from)
            if match is None and item_end is not _ITEM_END:
                item_end = _ITEM_END  # an object without the usual first key: any end will do
                continue
            if match is None:
                if not looked_closer:
                    search_from = blocks.pos  # nothing ends past the batch size: look closer
                    looked_closer = True
                    continue
                ahead = search_from - blocks.pos  # `more` may move the buffer's start
                if not blocks.more():
                    raise IrregularJSON
                search_from = blocks.pos + ahead
                continue
            end = match.start() + 1
            search_from = end
        try:
            return _items(bytes(buf[blocks.pos : end]), depth), end, item_end
        except orjson.JSONDecodeError:
            misses += 1
        if misses >= _MAX_MISSES:  # nested objects end as items do: each try re-parsed the batch
            return _scanned(blocks, depth)


def _items(text: bytes, depth: int) -> list:
    """The items `text` holds (values separated by commas), parsed inside `depth` arrays: as deep
    as in the file, so the parser's nesting limit falls where a whole parse's does."""
    items = orjson.loads(b"[" * depth + text + b"]" * depth)
    for _ in range(depth - 1):
        items = items[0]
    return items


def _scanned(blocks: _Blocks, depth: int) -> tuple[list, int, re.Pattern]:
    """The object at `blocks.pos` alone, its end found by a scan; the array's later objects too."""
    end = _object_end(blocks)
    try:
        return _items(bytes(blocks.buf[blocks.pos : end]), depth), end, _SCAN
    except orjson.JSONDecodeError:
        raise IrregularJSON from None


def _object_end(blocks: _Blocks) -> int:
    """The offset just past the value that starts at `blocks.pos` (an object), found by one scan
    of its strings and brackets, reading more of the file as needed: linear, where trying
    candidate ends is quadratic on an item holding many objects that end as items do."""
    depth, at = 0, blocks.pos
    while True:
        for match in _TOKENS.finditer(blocks.buf, at):
            token = match.group()
            if token == b'"':  # a string the buffer ends inside: read more, then scan it again
                break
            at = match.end()
            if token in (b"{", b"["):
                depth += 1
            elif token in (b"}", b"]"):
                depth -= 1
                if depth == 0:
                    return at
        ahead = at - blocks.pos  # `more` may move the buffer's start
        if not blocks.more():
            raise IrregularJSON
        at = blocks.pos + ahead


def read_head(handle: BinaryIO, list_key: str) -> tuple[dict, int]:
    """The keys of the JSON object `handle` holds before `"list_key": [` (the last key, within its
    first MiB), without `list_key`, and the offset of that `[`, where `handle` is left.
    IrregularJSON for any other layout, or when the head is not JSON."""
    start = handle.read(1 << 20)
    match = re.compile(rb'"' + re.escape(list_key.encode()) + rb'"[ \t\r\n]*:[ \t\r\n]*\[').search(start)
    if match is None:
        raise IrregularJSON
    try:
        head = orjson.loads(start[: match.end()] + b"]}")
    except orjson.JSONDecodeError:
        raise IrregularJSON from None
    if not isinstance(head, dict) or list(head)[-1:] != [list_key]:
        raise IrregularJSON
    del head[list_key]
    handle.seek(match.end() - 1)
    return head, match.end() - 1
