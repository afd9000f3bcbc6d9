"""Git's object stores, for the answer guard: a file committed to a repository and deleted since
is still in its `.git` folder, where a candidate can read it (`git show`).

A loose object (`.git/objects/ab/cdef...`) is a zlib stream of `blob <size>\\0` and the file's
bytes; a pack (`.git/objects/pack/*.pack`) is a sequence of zlib streams, one per object (a
delta's added bytes are in it as they are). `Inflated` reads the first, `pack_objects` the
second; the guard reads what they give as it reads any file. A pack's objects are not archive
members (a large repository has many); its expansion is bounded by its ratio instead: more than
`_RATIO` times the compressed bytes read (past `_SLACK`) is a decompression bomb.
"""

from __future__ import annotations

import io
import re
import zlib
from collections.abc import Callable, Iterator

_PIECE = 1 << 16
_RATIO = 64
_SLACK = 64 << 20
_OBJECT_LIMIT = 256 << 20  # an object is read whole
_OBJECT_HEADER = re.compile(rb"(?:blob|tree|commit|tag) [0-9]{1,20}\x00")


def is_zlib(head: bytes) -> bool:
    """`head` opens a zlib stream (deflate, a 32 KiB window: what git and zlib write)."""
    return len(head) > 1 and head[0] == 0x78 and (head[0] << 8 | head[1]) % 31 == 0


def is_pack(head: bytes) -> bool:
    return head[:4] == b"PACK" and head[4:8] in (b"\0\0\0\x02", b"\0\0\0\x03")


class Inflated(io.RawIOBase):
    """A zlib stream's bytes, a piece at a time; a loose object's header (`blob 123\\0`) dropped."""

    def __init__(self, inner):
        self.inner, self.inflate, self.tail, self.first = inner, zlib.decompressobj(), b"", True

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self.inflate.eof:
            data = self.tail or self.inner.read(_PIECE)
            if not data:
                return 0  # truncated
            out = self.inflate.decompress(data, len(buffer))
            self.tail = self.inflate.unconsumed_tail
            if self.first and out:
                self.first = False
                header = _OBJECT_HEADER.match(out)
                out = out[header.end() :] if header else out
            if out:
                buffer[: len(out)] = out
                return len(out)
        return 0


def _varint_end(data: bytes, at: int) -> int:
    """Where a git varint starting at `at` ends (its bytes with the high bit set, then one)."""
    while at < len(data) and data[at] & 0x80:
        at += 1
    return at + 1


def pack_objects(source, refuse: Callable[[str], None]) -> Iterator[bytes]:
    """Each object's bytes in a pack, in order; `refuse(message)` past the expansion ratio. A
    damaged pack ends where it breaks."""
    header = source.read(12)
    if len(header) < 12:
        return
    pending, read, expanded = b"", 12, 0
    for _ in range(int.from_bytes(header[8:12], "big")):
        if len(pending) < 64:  # an object's header is shorter
            more = source.read(_PIECE)
            read += len(more)
            pending += more
        if not pending or pending[0] >> 4 & 7 in (0, 5):
            return  # the end, or damaged
        kind, at = pending[0] >> 4 & 7, _varint_end(pending, 0)
        at = _varint_end(pending, at) if kind == 6 else at + 20 if kind == 7 else at  # a delta's base
        inflate, parts, data, size = zlib.decompressobj(), [], pending[at:], 0
        try:
            while not inflate.eof:
                if not data:
                    data = source.read(_PIECE)
                    read += len(data)
                    if not data:
                        return  # truncated
                parts.append(inflate.decompress(data, _PIECE))
                data = inflate.unconsumed_tail
                expanded, size = expanded + len(parts[-1]), size + len(parts[-1])
                if size > _OBJECT_LIMIT:
                    refuse(f"a git object over {_OBJECT_LIMIT >> 20} MiB; the answer guard cannot read it whole")
                if expanded > _RATIO * read + _SLACK:
                    refuse(f"a git pack that expands over {_RATIO} times its size (a decompression bomb?)")
        except zlib.error:
            return
        pending = inflate.unused_data + data
        yield b"".join(parts)
