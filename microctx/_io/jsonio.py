"""Reading JSON at the edges: bytes and parse errors that name the file, and a paused collector."""

from __future__ import annotations

import gc
import os
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
