"""File edges: reading JSON with errors that name the file, the path policy, and atomic writes.

Every output goes to a temporary file in the destination folder and is renamed into place only
when the whole command has succeeded, so a failure never leaves a half-written file or
replaces a good one; the files of one command are published as a set (all or none), under a
lock on their folders. `check_paths` refuses an output that is an input or another output.
"""

from __future__ import annotations

import fcntl
import gc
import os
import re
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

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


# ================================================================ the path policy

def resolved(path: str | os.PathLike) -> Path:
    """The absolute path with every symlink and `..` resolved (the file a name really reaches)."""
    return Path(os.path.realpath(os.path.abspath(os.fspath(path))))


def _same_file(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    if resolved(a) == resolved(b):
        return True
    try:
        return os.path.samefile(a, b)  # hard links: two names, one file
    except OSError:
        return False


PathMap = Mapping[str, "str | os.PathLike | None"]


def check_paths(inputs: PathMap, outputs: PathMap, folders: PathMap | None = None) -> None:
    """Refuse a command's outputs when one is an input or another output (the path policy).

    Every command declares what it reads (`inputs`), the files it writes (`outputs`) and the
    folders it replaces whole (`folders`, a report); keys are the option names shown to the user,
    None values are skipped. Paths are compared after resolving symlinks and `..` (and as files,
    so a hard link counts too). Refused: an output that is an input, two outputs that are one
    file, an input or output file inside a replaced folder, and two such folders that nest.
    """
    ins = [(label, path) for label, path in inputs.items() if path is not None]
    outs = [(label, path) for label, path in outputs.items() if path is not None]
    dirs = [(label, path) for label, path in (folders or {}).items() if path is not None]
    for i, (label, path) in enumerate(outs):
        for in_label, in_path in ins:
            if _same_file(path, in_path):
                raise InputError(path, f"{label} is the same file as the input {in_label} ({in_path}); "
                                       "refusing to overwrite an input")
        for other_label, other in outs[:i]:
            if _same_file(path, other):
                raise InputError(path, f"{label} and {other_label} name the same file; each output needs its own path")
    for i, (label, folder) in enumerate(dirs):
        root = resolved(folder)
        for other_label, other in ins + outs:
            if resolved(other) == root or resolved(other).is_relative_to(root):
                raise InputError(folder, f"{label} would replace the folder holding {other_label} ({other}); "
                                         "choose another folder")
        for other_label, other in dirs[:i]:
            a, b = root, resolved(other)
            if a == b or a.is_relative_to(b) or b.is_relative_to(a):
                raise InputError(folder, f"{label} and {other_label} overlap; each output folder needs its own place")


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def safe_name(name: str, what: str = "--name") -> str:
    """`name` when it can be a file name as it is (letters, digits, `.`, `_`, `-`; no leading dot;
    at most 100 characters): no `/`, no `..`, nothing a shell or a browser would read; else refused."""
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name):
        raise InputError(what, f"{name!r} is not a safe name: use 1 to 100 letters, digits, '.', '_' or '-', "
                               "starting with a letter or digit")
    return name


def safe_name_from(text: str, fallback: str = "submission") -> str:
    """A safe name made from any text (a file name): other characters become `_`."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", text).lstrip("._-")[:100]
    return name or fallback


def inside(folder: str | os.PathLike, *parts: str) -> Path:
    """`folder/parts...`, refused unless it stays inside `folder` (after resolving `..` and symlinks)."""
    path = Path(folder).joinpath(*parts)
    if not resolved(path).is_relative_to(resolved(folder)):
        raise InputError(path, f"would be written outside {folder}; refused")
    return path


# ================================================================ atomic outputs

@contextmanager
def locked_folders(folders: Iterable[str | os.PathLike]) -> Iterator[None]:
    """Hold an exclusive lock (flock) on each folder, in one order, for the block.

    Commands that publish into the same folder take turns, so two that write the same outputs
    at once leave one complete set (the later one's), never a mix of both.
    """
    fds: list[int] = []
    try:
        for folder in sorted({str(resolved(f)) for f in folders}):
            fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
            fds.append(fd)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        for fd in reversed(fds):
            os.close(fd)  # closing releases the lock


def write_failure(path: str | os.PathLike, exc: OSError) -> InputError:
    """An OSError on an output path as one line naming the path."""
    return InputError(path, f"cannot write: {exc.strerror or exc}; nothing was replaced")


def _side_name(folder: Path, suffix: str) -> Path:
    return folder / f".mcx-{secrets.token_hex(6)}{suffix}"


@dataclass
class _Staged:
    tmp: Path
    dest: Path
    handle: BinaryIO


class AtomicOutputs:
    """Stage several output files and publish them together: all or nothing.

    Use as a context manager: `stage(path)` returns an open binary file in the destination
    folder; on a clean exit every staged file is renamed over its destination, under a lock on
    the destination folders; on an exception every temporary file is removed and no destination
    is touched. When a rename fails half way (a folder in the way, a name too long), the files
    already renamed are put back as they were (from hard-linked backups), so the set is replaced
    whole or not at all. Every OSError is an InputError naming the output (one line, exit 2).
    """

    def __init__(self) -> None:
        self._staged: list[_Staged] = []

    def stage(self, path: str | os.PathLike) -> BinaryIO:
        dest = Path(path)
        folder = dest.parent
        if dest.is_dir():
            raise InputError(dest, "is a folder; expected a file name")
        if not folder.is_dir():
            raise InputError(dest, "output folder does not exist")
        try:
            fd, tmp = tempfile.mkstemp(prefix=".mcx-", suffix=".tmp", dir=folder)
        except OSError as exc:
            raise write_failure(dest, exc) from None
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get the usual permissions
        handle = os.fdopen(fd, "wb")
        self._staged.append(_Staged(Path(tmp), dest, handle))
        return handle

    def write(self, path: str | os.PathLike, chunks: bytes | Iterable[bytes]) -> None:
        handle = self.stage(path)
        try:
            if isinstance(chunks, (bytes, bytearray)):
                handle.write(chunks)
            else:
                for chunk in chunks:
                    handle.write(chunk)
        except OSError as exc:
            raise write_failure(path, exc) from None

    def __enter__(self) -> AtomicOutputs:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                self._flush()
                self._publish()
        finally:
            for staged in self._staged:
                if not staged.handle.closed:
                    staged.handle.close()
                if staged.tmp.exists():
                    staged.tmp.unlink()

    def _flush(self) -> None:
        for staged in self._staged:
            try:
                staged.handle.flush()
                os.fsync(staged.handle.fileno())
                staged.handle.close()
            except OSError as exc:  # a full disk shows here at the latest
                raise write_failure(staged.dest, exc) from None

    def _publish(self) -> None:
        with locked_folders(s.dest.parent for s in self._staged):
            for staged in self._staged:
                if staged.dest.is_dir():
                    raise InputError(staged.dest, "a folder is in the way; nothing was replaced")
            backups: dict[Path, Path] = {}
            renamed: list[Path] = []
            current = self._staged[0].dest if self._staged else Path(".")
            try:
                for staged in self._staged:
                    current = staged.dest
                    if staged.dest.is_file() and not staged.dest.is_symlink():
                        backup = _side_name(staged.dest.parent, ".bak")
                        with suppress(OSError):  # a file system without hard links: no way back for this one
                            os.link(staged.dest, backup)
                            backups[staged.dest] = backup
                for staged in self._staged:
                    current = staged.dest
                    os.replace(staged.tmp, staged.dest)
                    renamed.append(staged.dest)
            except OSError as exc:
                for dest in reversed(renamed):  # put the set back as it was
                    with suppress(OSError):
                        if dest in backups:
                            os.replace(backups.pop(dest), dest)
                        else:
                            dest.unlink()
                raise write_failure(current, exc) from None
            finally:
                for backup in backups.values():
                    with suppress(OSError):
                        backup.unlink()


def atomic_write(path: str | os.PathLike, chunks: bytes | Iterable[bytes]) -> None:
    """Write one file atomically (temporary file in the same folder, then rename)."""
    with AtomicOutputs() as out:
        out.write(path, chunks)


@contextmanager
def staged_folder(destination: str | os.PathLike, marker: str) -> Iterator[Path]:
    """Build a folder beside `destination` and swap it into place on success (a report, the demo).

    An existing destination is replaced only if it is empty or holds `marker` (a previous
    output of ours); anything else is refused, so a typo cannot wipe an unrelated folder. The
    swap runs under a lock on the parent folder, so concurrent commands leave one complete
    folder. On failure the staging folder is removed and the destination is untouched; every
    OSError is an InputError naming the destination.
    """
    dest = Path(destination)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failure(dest, exc) from None
    with locked_folders([dest.parent]):  # not while another command swaps it
        refusal = _refusal(dest, marker)
    if refusal:
        raise InputError(dest, f"{refusal}; choose another --out or empty it")
    try:
        staging = Path(tempfile.mkdtemp(prefix=".mcx-", suffix=".tmp", dir=dest.parent))
    except OSError as exc:
        raise write_failure(dest, exc) from None
    try:
        yield staging
        _swap_folder(staging, dest, marker)
    except OSError as exc:
        raise write_failure(dest, exc) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _refusal(dest: Path, marker: str) -> str:
    """Why `dest` may not be replaced ("" when it may: absent, empty, or holding `marker`). Called
    under the parent folder's lock, so no command of ours swaps it meanwhile."""
    try:
        if not dest.exists() and not dest.is_symlink():
            return ""
        if dest.is_symlink() or not dest.is_dir():
            return "exists and is not a folder"
        if any(dest.iterdir()) and not (dest / marker).is_file():
            return f"exists and is not a microctx output folder (no {marker})"
    except FileNotFoundError:
        return ""
    return ""


def _swap_folder(staging: Path, dest: Path, marker: str) -> None:
    with locked_folders([dest.parent]):
        refusal = _refusal(dest, marker)
        if refusal:
            raise InputError(dest, f"{refusal}; nothing was replaced")
        old = None
        if dest.exists():
            old = _side_name(dest.parent, ".old")
            os.replace(dest, old)
        try:
            os.replace(staging, dest)
        except OSError:
            if old is not None:
                os.replace(old, dest)
            raise
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


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
            del self.buf[:self.pos]
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


def _scan_array(handle: BinaryIO, block_size: int, batch_size: int = 1 << 20, trailer: int | None = None) -> Iterator[object]:
    """Objects of a top-level array, parsed about `batch_size` bytes at a time.

    A batch is the text from the current object to a candidate end (`}` then `,` or `]`),
    wrapped in brackets and parsed as an array. A candidate inside a string or a nested object
    makes the batch invalid, and the next candidate is tried; batching spreads those retries
    over many objects.
    """
    blocks = _Blocks(handle, block_size)
    if blocks.skip_ws() != ord("["):
        raise IrregularJSON
    blocks.pos += 1
    if blocks.skip_ws() == ord("]"):
        blocks.pos += 1
        if not blocks.at_end(trailer):
            raise IrregularJSON
        return
    item_end = _ITEM_END
    while True:
        if blocks.skip_ws() != ord("{"):
            raise IrregularJSON
        items, end, item_end = _next_batch(blocks, batch_size, item_end)
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
        if sep == ord("]") and blocks.at_end(trailer):
            return
        raise IrregularJSON


def _next_batch(blocks: _Blocks, batch_size: int, item_end: re.Pattern) -> tuple[list, int, re.Pattern]:
    """The objects from `blocks.pos` to the first candidate end past `batch_size` bytes that
    parses (or a closer one), the end's offset, and the end pattern in use."""
    buf = blocks.buf
    while len(buf) - blocks.pos < batch_size and blocks.more():
        pass
    candidates = []
    if blocks.eof:
        tail = buf.rfind(b"]")
        last = buf.rfind(b"}", blocks.pos, tail) if tail > blocks.pos else -1
        if last > 0 and not buf[last + 1:tail].strip() and not buf[tail + 1:].strip():
            candidates.append(last + 1)  # the whole rest in one batch
    search_from = blocks.pos + batch_size if len(buf) - blocks.pos > batch_size else blocks.pos
    looked_closer = search_from == blocks.pos
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
            return orjson.loads(b"[" + bytes(buf[blocks.pos:end]) + b"]"), end, item_end
        except orjson.JSONDecodeError:
            pass
