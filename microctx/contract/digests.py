"""SHA-256 digests: of bytes, of a stream of chunks (with needle search), of a file.

Every digest in microctx is computed here: artifact files, title and body texts, submissions.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from typing import BinaryIO


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_chunks(chunks: Iterable[bytes], needles: Iterable[bytes] = ()) -> tuple[str, set[bytes]]:
    """SHA-256 of the concatenated chunks, and which needles occur in them.

    Needles are looked for within chunks; `iter_dumps` never splits a key or a string, so a
    needle that is a quoted key or a digest is found whenever it occurs in the whole text.
    """
    digest = hashlib.sha256()
    remaining = list(dict.fromkeys(needles))
    found: set[bytes] = set()
    pattern = _any_of(remaining)
    for chunk in chunks:
        digest.update(chunk)
        pos = 0
        while pattern is not None:
            # one scan for all needles not yet found, instead of one scan per needle
            match = pattern.search(chunk, pos)
            if match is None:
                break
            found.add(match.group())
            remaining.remove(match.group())
            pattern = _any_of(remaining)
            pos = match.start()  # another needle may start at the same offset
    return digest.hexdigest(), found


def _any_of(needles: list[bytes]) -> re.Pattern[bytes] | None:
    if not needles:
        return None
    return re.compile(b"|".join(re.escape(n) for n in sorted(needles, key=len, reverse=True)))


def file_sha256(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class HashingReader:
    """A binary file read through `read` (and `seek`), hashed as it is read: each byte the first
    time it is read, so a reader that looks ahead and seeks back costs no second hash. A seek past
    bytes not yet read is refused (ValueError on the next read)."""

    def __init__(self, handle: BinaryIO) -> None:
        self._handle, self._digest, self._hashed = handle, hashlib.sha256(), 0
        self._closed_digest: str | None = None  # hexdigest() as it was when closed

    def read(self, size: int = -1) -> bytes:
        at = self._handle.tell()
        data = self._handle.read(size)
        seen = self._hashed - at  # bytes of `data` already hashed
        if seen < 0:
            raise ValueError("a read past bytes not yet hashed")
        if seen < len(data):
            self._digest.update(memoryview(data)[seen:])
            self._hashed = at + len(data)
        return data

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._handle.seek(offset, whence)

    def close(self) -> None:
        """Close the file; `hexdigest` still answers (as it would have just before)."""
        if not self._handle.closed:
            self._closed_digest = self.hexdigest()
            self._handle.close()

    def hexdigest(self) -> str | None:
        """The file's SHA-256 when every byte of it has been read, else None."""
        if self._handle.closed:
            return self._closed_digest
        return self._digest.hexdigest() if self._hashed == os.fstat(self._handle.fileno()).st_size else None
