"""A large public corpus read into a freeze pass on two cores: the second half of its records in a
forked process, into a pass of its own, absorbed after the first (`FreezePass.absorb`).

The records are cut where a canonical public corpus puts a record boundary: a raw newline and
`    },` then `    {` (JSON escapes every newline inside a string, so no text holds it). A file
laid out otherwise has no such place, or halves that do not parse; any failure of the forked
process (a record that does not check, a layout it cannot read) makes the whole read fail with
IrregularJSON, and the caller reads the file another way, which names the problem. Only the
second half's kept values and its spill's file descriptor cross processes: the records
themselves are read by each process from the file.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO, cast

from microctx._io.jsonscan import IrregularJSON
from microctx._io.jsonscan import _scan_array as scan_array  # the array reader of iter_json_array
from microctx.corpus.export import RawIssue, iter_export
from microctx.corpus.freeze_stream import FreezePass
from microctx.corpus.public import corpus_records
from microctx.corpus.redact import Rule

TWO_HALVES_FROM = 64 << 20  # bytes: smaller public files are read in one process (tests lower it)
_GAP = b"\n    },\n    {\n"
_FIRST_END = len(b"\n    }")  # the first half ends after the brace
_SECOND_START = len(b"\n    },")  # the second half starts at the newline before `    {`


def public_filler(path: str | os.PathLike, reader: BinaryIO, list_start: int) -> Callable[[FreezePass], None]:
    """What fills a freeze pass with the records of the public corpus at `path`, open as `reader`
    at its list's `[` (`list_start`); `reader` is read to the end either way (it may be hashing)."""

    def fill(fp: FreezePass) -> None:
        size = os.stat(path).st_size
        cut = _cut(path, (list_start + size) // 2) if size >= TWO_HALVES_FROM and _cores() >= 2 else None
        if cut is None:
            for issue in corpus_records(path, reader):
                fp.add(issue)
            return
        _two_halves(fp, path, reader, list_start, cut)

    return fill


def _cores() -> int:
    """The cores a forked half may use: 1 (read in one process) while other threads run, since a
    fork copies their held locks but not the threads (a notebook kernel, a Dask worker)."""
    if threading.active_count() > 1:
        return 1
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _die_with(parent: int) -> None:
    """In the forked process: be killed when `parent` ends, however it ends (a SIGTERM runs no
    Python handler there, so the parent's cleanup cannot end this process), Linux's prctl."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's own cleanup only
        pass
    if os.getppid() != parent:  # the parent ended before the request was made
        os._exit(1)


def _cut(path: str | os.PathLike, middle: int) -> int | None:
    """The offset of the first record boundary at or after `middle`, if one is near."""
    with open(path, "rb") as handle:
        handle.seek(middle)
        block = handle.read(1 << 24)
    at = block.find(_GAP)
    return middle + at if at >= 0 else None


def _two_halves(fp: FreezePass, path: str | os.PathLike, reader: BinaryIO, list_start: int, cut: int) -> None:
    def first() -> Iterator[RawIssue]:
        yield from corpus_records(path, cast(BinaryIO, _Window(reader, cut + _FIRST_END - list_start, after=b"]")), None)
        while reader.read(1 << 24):  # the rest of the file, for the reader's digest
            pass

    def second() -> Iterator[RawIssue]:
        with open(path, "rb") as handle:
            handle.seek(cut + _SECOND_START)
            yield from corpus_records(path, cast(BinaryIO, _Window(handle, None, before=b"[")))

    in_two(fp, first, second, ())


def in_two(
    fp: FreezePass, first: Callable[[], Iterable[RawIssue]], second: Callable[[], Iterable[RawIssue]], rules: Sequence[Rule]
) -> None:
    """Read the issues of `first()` into `fp` while a forked process reads those of `second()`
    into a pass of its own (with `rules`), then absorb that pass. IrregularJSON when the forked
    process fails; an error reading `first()` is raised as it is (the forked process is ended)."""
    with tempfile.TemporaryFile(dir=fp.folder, buffering=0) as spill:  # beside the first pass's spill
        receive, send = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the forked process; its work is checked by the parent's result)
            _die_with(parent)
            os.close(receive)
            _second_half(second, rules, spill, send)
        os.close(send)
        try:
            for issue in first():
                fp.add(issue)
            with os.fdopen(receive, "rb") as pipe:
                payload = pipe.read()
        except BaseException:
            os.kill(pid, signal.SIGKILL)
            raise
        finally:
            status = os.waitpid(pid, 0)[1]
        if status != 0 or not payload:
            raise IrregularJSON
        fp.absorb(pickle.loads(payload), spill)


def _second_half(second: Callable[[], Iterable[RawIssue]], rules: Sequence[Rule], spill: BinaryIO, send: int) -> None:
    """In the forked process: read the issues of `second()` into a pass spilling to `spill`, send
    the pass through `send`, and exit (status 1 on any failure)."""
    code = 1
    try:
        other = FreezePass(spill, rules, where="the second half's spill file")  # its folder: the parent's
        for issue in second():
            other.add(issue)
        other.flush_spill()
        other.spill = None  # type: ignore[assignment]  # a file does not cross processes
        with os.fdopen(send, "wb") as pipe:
            pipe.write(pickle.dumps(other, protocol=pickle.HIGHEST_PROTOCOL))
        code = 0
    finally:
        os._exit(code)


class HalvesFailed(Exception):
    """Reading an export in two halves failed: read it in one process, which names any error."""


_FIRST_KEY = re.compile(rb'[ \t\r\n]*\[[ \t\r\n]*\{[ \t\r\n]*("(?:[^"\\]|\\.)*")[ \t\r\n]*:')


def export_filler(path: str | os.PathLike, rules: Sequence[Rule]) -> Callable[[FreezePass], None] | None:
    """What fills a freeze pass with the issues of the raw export at `path` in two halves, or None
    when it is small, standard input, or there is one core. The halves are cut before an item
    that starts with the first item's first key (`}` `,` `{"key":` lies inside no string; one
    inside a nested list leaves halves that do not parse). The fill raises HalvesFailed on any
    error, and on a number found in both halves: reading in one process names it."""
    if os.fspath(path) == "-" or _cores() < 2 or not os.path.isfile(path) or os.stat(path).st_size < TWO_HALVES_FROM:
        return None
    middle = os.stat(path).st_size // 2
    with open(path, "rb") as handle:
        key = _FIRST_KEY.match(handle.read(1 << 20))
        handle.seek(middle)
        block = handle.read(1 << 24)
    gap = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{[ \t\r\n]*" + re.escape(key.group(1)) + rb"[ \t\r\n]*:") if key else None
    found = gap.search(block) if gap else None
    if found is None:
        return None
    first_end = middle + found.start() + 1  # after the `}` of the first half's last item
    second_start = middle + found.start() + found.group().index(b",") + 1

    def first() -> Iterator[RawIssue]:
        with open(path, "rb") as handle:
            yield from iter_export(scan_array(cast(BinaryIO, _Window(handle, first_end, after=b"]")), 1 << 24), path)

    def second() -> Iterator[RawIssue]:
        with open(path, "rb") as handle:
            handle.seek(second_start)
            yield from iter_export(scan_array(cast(BinaryIO, _Window(handle, None, before=b"[")), 1 << 24), path)

    def fill(fp: FreezePass) -> None:
        try:
            in_two(fp, first, second, rules)
        except Exception as exc:
            raise HalvesFailed from exc
        if len(set(fp.numbers)) != len(fp.numbers):
            raise HalvesFailed

    return fill


class _Window:
    """`before`, then the next `length` bytes of `handle` (all that is left when None), then
    `after`: a part of a file read as a file of its own."""

    def __init__(self, handle: BinaryIO, length: int | None, before: bytes = b"", after: bytes = b"") -> None:
        self.handle, self.left, self.before, self.after = handle, length, before, after

    def read(self, size: int = -1) -> bytes:
        if self.before:
            data, self.before = self.before, b""
            return data
        if self.left is None or self.left > 0:
            want = size if self.left is None else (self.left if size < 0 else min(size, self.left))
            data = self.handle.read(want)
            if data:
                if self.left is not None:
                    self.left -= len(data)
                return data
            self.left = 0
        data, self.after = self.after, b""
        return data
