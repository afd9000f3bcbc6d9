"""Atomic outputs: files written to a temporary name and renamed into place, published as a set.

Every output goes to a temporary file in the destination folder and is renamed into place only
when the whole command has succeeded, so a failure never leaves a half-written file or
replaces a good one; the files of one command are published as a set (all or none), under a
lock on their folders.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from microctx._io.paths import locked_folders, write_failure
from microctx.errors import InputError


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
        tmp = _side_name(folder, ".tmp")
        try:  # mode 0666 less the process umask: outputs get the usual permissions (mkstemp would make 0600)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except OSError as exc:
            raise write_failure(dest, exc) from None
        handle = os.fdopen(fd, "wb")
        self._staged.append(_Staged(tmp, dest, handle))
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


def process_umask() -> int:
    """This process's umask, read without setting it (Linux: /proc/self/status); 0o022 elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


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
        staging.chmod(0o777 & ~process_umask())  # mkdtemp makes it 0700; the published folder reads like its files
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
