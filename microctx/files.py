"""File edges: reading JSON with errors that name the file, and atomic writes.

Every output goes to a temporary file in the destination folder and is renamed into place only
when the whole command has succeeded, so a failure never leaves a half-written file or
replaces a good one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable

import orjson

from .errors import InputError


def read_bytes(path: str | os.PathLike) -> bytes:
    """The file's bytes, or an InputError naming the file."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None


def parse_json(data: bytes, path: str | os.PathLike) -> object:
    """Parse JSON bytes; invalid UTF-8 and malformed JSON are InputErrors naming the file."""
    try:
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

    def __enter__(self) -> "AtomicOutputs":
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
