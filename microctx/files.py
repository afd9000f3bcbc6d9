"""File edges: reading JSON with errors that name the file, and atomic writes.

Every output goes to a temporary file in the destination folder and is renamed into place only
when the whole command has succeeded, so a failure never leaves a half-written file or
replaces a good one.
"""

from __future__ import annotations

import gc
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson

from microctx.errors import InputError


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes, or an InputError naming the file."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None


@contextmanager
def gc_paused():
    """Pause the cyclic garbage collector for a block that builds many objects and no cycles.

    Each collection walks every tracked object; while a large corpus is parsed or built, the
    collector would run again and again over a growing heap to find nothing (the documents are
    trees). Reference counting still frees everything; the previous state is restored after.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_json(data: bytes, path: str | os.PathLike) -> object:
    """Parse JSON bytes; invalid UTF-8 and malformed JSON are InputErrors naming the file."""
    try:
        with gc_paused():
            return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        msg = str(exc)
        if "utf-8" in msg.lower() or "surrogate" in msg.lower():
            raise InputError(path, f"not valid UTF-8: {msg}") from None
        if not data.strip():
            raise InputError(path, "empty file, expected JSON") from None
        raise InputError(path, f"not valid JSON: {msg}") from None


def read_json(path: str | os.PathLike) -> object:
    """Read and parse a JSON file (see `parse_json`)."""
    return parse_json(read_bytes(path), path)


_WS = b" \t\r\n"
_ITEM_END = re.compile(rb"\}[ \t\r\n]*[,\]]")


_UMASK = os.umask(0)
os.umask(_UMASK)


class AtomicOutputs:
    """Stage several output files and publish them together.

    Use as a context manager: `stage(path)` returns an open binary file in the destination
    folder; on a clean exit every staged file is renamed over its destination; on an exception
    every temporary file is removed and no destination is touched.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path, object]] = []

    def stage(self, path: str | os.PathLike):
        dest = Path(path)
        folder = dest.parent if str(dest.parent) else Path(".")
        if not folder.is_dir():
            raise InputError(dest, "output folder does not exist")
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=folder)
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get the usual permissions
        handle = os.fdopen(fd, "wb")
        self._staged.append((Path(tmp), dest, handle))
        return handle

    def write(self, path: str | os.PathLike, chunks: bytes | Iterable[bytes]) -> None:
        handle = self.stage(path)
        if isinstance(chunks, (bytes, bytearray)):
            handle.write(chunks)
        else:
            for chunk in chunks:
                handle.write(chunk)

    def __enter__(self) -> AtomicOutputs:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            for _, _, handle in self._staged:
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
            if exc_type is None:
                for tmp, dest, _ in self._staged:
                    os.replace(tmp, dest)
        finally:
            for tmp, _, handle in self._staged:
                if not handle.closed:
                    handle.close()
                if tmp.exists():
                    tmp.unlink()


def atomic_write(path: str | os.PathLike, chunks: bytes | Iterable[bytes]) -> None:
    """Write one file atomically (temporary file in the same folder, then rename)."""
    with AtomicOutputs() as out:
        out.write(path, chunks)


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
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    with handle:
        yield from _scan_array(handle, block_size)


def read_object_streaming(path: str | os.PathLike, list_key: str, block_size: int = 1 << 24) -> dict:
    """Parse a JSON object whose last key is a large array, holding one block of the file at a time.

    `orjson.loads` of a whole file holds the file's bytes, the parser's own copy and the Python
    objects at once; this parses the head before `"list_key": [` on its own and the array's
    items in batches (see `iter_json_array`). Anything else (another layout, keys after the
    array, bad JSON) raises IrregularJSON: the caller then uses `read_json`.
    """
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    with handle:
        start = handle.read(1 << 20)
        match = re.compile(rb'"' + re.escape(list_key.encode()) + rb'"[ \t\r\n]*:[ \t\r\n]*\[').search(start)
        if match is None:
            raise IrregularJSON
        try:
            head = orjson.loads(start[:match.end()] + b"]}")
        except orjson.JSONDecodeError:
            raise IrregularJSON from None
        if not isinstance(head, dict) or list(head)[-1:] != [list_key]:
            raise IrregularJSON
        handle.seek(match.end() - 1)
        head[list_key] = list(_scan_array(handle, block_size, trailer=ord("}")))
    return head


def _scan_array(handle, block_size: int, batch_size: int = 1 << 20, trailer: int | None = None) -> Iterator[object]:
    """Objects of a top-level array, parsed about `batch_size` bytes at a time.

    A batch is the text from the current object to a candidate end (`}` then `,` or `]`),
    wrapped in brackets and parsed as an array. A candidate inside a string or a nested object
    makes the batch invalid, and the next candidate is tried; batching spreads those retries
    over many objects.
    """
    buf = bytearray()
    pos = 0
    eof = False

    def more() -> bool:
        nonlocal buf, pos, eof
        if eof:
            return False
        block = handle.read(block_size)
        if not block:
            eof = True
            return False
        if pos > len(buf) // 2:
            del buf[:pos]
            pos = 0
        buf += block
        return True

    def skip_ws() -> int | None:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in _WS:
                pos += 1
            if pos < len(buf):
                return buf[pos]
            if not more():
                return None

    def at_end() -> bool:
        """After the closing bracket: only the trailer (if any) and white space to the end."""
        nonlocal pos
        if trailer is not None:
            if skip_ws() != trailer:
                return False
            pos += 1
        return skip_ws() is None

    item_end = _ITEM_END
    if skip_ws() != ord("["):
        raise IrregularJSON
    pos += 1
    if skip_ws() == ord("]"):
        pos += 1
        if not at_end():
            raise IrregularJSON
        return
    while True:
        if skip_ws() != ord("{"):
            raise IrregularJSON
        while len(buf) - pos < batch_size and more():
            pass
        candidates = []
        if eof:
            tail = buf.rfind(b"]")
            last = buf.rfind(b"}", pos, tail) if tail > pos else -1
            if last > 0 and not buf[last + 1:tail].strip() and not buf[tail + 1:].strip():
                candidates.append(last + 1)  # the whole rest in one batch
        search_from = pos + batch_size if len(buf) - pos > batch_size else pos
        looked_closer = search_from == pos
        items = end = None
        while items is None:
            if candidates:
                end = candidates.pop()
            else:
                match = item_end.search(buf, search_from)
                if match is None and item_end is not _ITEM_END:
                    item_end = _ITEM_END  # an object without the usual first key: any end will do
                    continue
                if match is None:
                    if not looked_closer:
                        search_from = pos  # nothing ends past the batch size: look closer
                        looked_closer = True
                        continue
                    ahead = search_from - pos  # `more` may move the buffer's start
                    if not more():
                        raise IrregularJSON
                    search_from = pos + ahead
                    continue
                end = match.start() + 1
                search_from = end
            try:
                items = orjson.loads(b"[" + bytes(buf[pos:end]) + b"]")
            except orjson.JSONDecodeError:
                items = None
        yield from items
        if item_end is _ITEM_END and isinstance(items[0], dict) and items[0]:
            # Objects of one export share their first key: an end followed by it is far more
            # likely to be an object's end than one inside a nested label object or a string.
            key = orjson.dumps(next(iter(items[0])))
            item_end = re.compile(rb"\}(?=[ \t\r\n]*(?:,[ \t\r\n]*\{[ \t\r\n]*" + re.escape(key) + rb"[ \t\r\n]*:|\]))")
        pos = end
        sep = skip_ws()
        pos += 1
        if sep == ord(","):
            continue
        if sep == ord("]") and at_end():
            return
        raise IrregularJSON
