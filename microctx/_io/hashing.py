"""A file hashed as it is read (`HashingReader`): the digest of the bytes a streaming reader
parsed, with no second read of the file."""

from __future__ import annotations

import hashlib
import os
from typing import BinaryIO


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
