"""Reading JSON at the edges: bytes and parse errors that name the file, and a paused collector."""

from __future__ import annotations

import fcntl
import gc
import os
import stat
import sys
from contextlib import contextmanager
from typing import BinaryIO

import orjson

from microctx._io.sets import settle
from microctx.errors import InputError

MAX_INPUT_ENV = "MICROCTX_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT = 8 << 30  # 8 GiB: a raw export of several million issues


def input_limit() -> int:
    """The most bytes any one input may hold: MICROCTX_MAX_INPUT_BYTES, else 8 GiB."""
    text = os.environ.get(MAX_INPUT_ENV, "")
    return int(text) if text.isdigit() and int(text) > 0 else DEFAULT_MAX_INPUT


def open_input(path: str | os.PathLike) -> BinaryIO:
    """Open an input for reading: a regular file of at most `input_limit()` bytes, or `-` (stdin).

    A FIFO, a device (`/dev/zero`), a socket or a folder is refused at once (opened without
    blocking, checked with fstat), as is a file over the limit; a set a killed command left
    committed in the file's folder is finished first (`sets.settle`). Errors name the file.
    """
    if os.fspath(path) == "-":
        return sys.stdin.buffer
    try:
        settle(path)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a FIFO, device or socket"
            raise InputError(path, f"is {kind}, not a regular file; give a file (or - for standard input)")
        if info.st_size > input_limit():
            raise InputError(path, f"is {info.st_size} bytes, over the input limit of {input_limit()} ({MAX_INPUT_ENV})")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bytes(path: str | os.PathLike) -> bytes:
    """The input's bytes (see `open_input`: regular files or `-`, at most the input limit), or an
    InputError naming the file."""
    limit = input_limit()
    handle = open_input(path)
    try:
        data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    finally:
        if handle is not sys.stdin.buffer:
            handle.close()
    if len(data) > limit:
        raise InputError(path, f"holds more than the input limit of {limit} bytes ({MAX_INPUT_ENV})")
    return data


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
