"""Output sets that survive a kill: the pending-set journal, its recovery, and litter clean-up.

A set of two or more steps is published like this (see `AtomicOutputs`): every new file is
written and fsynced under a temporary name (`.mcx-<hex>.tmp`, flock-ed by its writer while it
lives); then a journal, `.mcx-pending.json`, listing every (temporary, destination) pair and every
destination the set removes (an earlier output that must not outlive it) is written into each
destination folder (to a side name, then renamed: it appears whole); then the temporary files are
renamed over their destinations one by one and the removed destinations unlinked; then the
journals are removed. The journal is the commit record: before it exists the old set is the set
(the temporary files are litter), once it exists the new one is. Every microctx reader calls
`settle(path)` before it reads a file, which finishes a journal it finds (renames what is left,
removes what the set removes, drops the journal), so after a kill at any instruction a reader of
ours sees the complete old set or the complete new one: no journal means the set in place is
whole; a journal means the new set, finished first. The next command that publishes into a
folder also removes the litter of killed commands.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

import orjson

from microctx._io.paths import locked_folders
from microctx._io.renames import remove, rename

JOURNAL = ".mcx-pending.json"
JOURNAL_SCHEMA = "microctx-pending-set/1"
PREFIX = ".mcx-"
_JOURNAL_LIMIT = 1 << 20


def journal_bytes(moves: list[tuple[Path, Path]], folders: list[Path], removes: list[Path] | None = None) -> bytes:
    """The journal of a set: its (temporary, destination) pairs, the destinations it removes
    (`removes`, absent from a journal of a set without removals) and every folder holding a copy."""
    document: dict = {
        "schema": JOURNAL_SCHEMA,
        "moves": [[os.fspath(tmp), os.fspath(dest)] for tmp, dest in moves],
        "journals": [os.fspath(folder / JOURNAL) for folder in folders],
    }
    if removes:
        document["removes"] = [os.fspath(dest) for dest in removes]
    return orjson.dumps(document)


def _read_journal(path: Path) -> dict | None:
    try:
        with open(path, "rb") as handle:
            data = handle.read(_JOURNAL_LIMIT + 1)
        document = orjson.loads(data)
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(document, dict) or document.get("schema") != JOURNAL_SCHEMA:
        return None
    return document


def _finish(document: dict, journal: Path) -> None:
    """Roll a committed set forward: rename every temporary file still there, remove every
    destination the set removes that is still there (a file or a link; a folder put in its way
    since is left), then drop the journals."""
    for tmp, dest in document.get("moves", []):
        if os.path.lexists(tmp):
            rename(tmp, dest)
    for dest in document.get("removes", []):
        if os.path.lexists(dest) and not (os.path.isdir(dest) and not os.path.islink(dest)):
            remove(dest)
    for copy in document.get("journals", [os.fspath(journal)]):
        with suppress(FileNotFoundError):
            os.unlink(copy)
    with suppress(FileNotFoundError):
        os.unlink(journal)


def _journal_folders(document: dict, journal: Path) -> set[str]:
    copies = document.get("journals", [])
    return {os.path.dirname(c) for c in copies if isinstance(c, str)} | {os.fspath(journal.parent)}


def settle(path: str | os.PathLike) -> None:
    """Finish a set that a killed command committed in the folder of `path`, before reading it.

    One stat when there is nothing to do. Otherwise waits for the folders' locks (a live
    publisher holds them while it renames), then rolls the set forward.
    """
    journal = Path(path).parent / JOURNAL
    if not os.path.lexists(journal):
        return
    document = _read_journal(journal)
    if document is None:
        return
    with locked_folders(_journal_folders(document, journal)):
        document = _read_journal(journal)  # another reader may have finished it meanwhile
        if document is not None:
            _finish(document, journal)


def settle_held(folder: Path, held: set[str]) -> None:
    """`settle` for a folder whose lock the caller holds: finish its journal when every folder the
    journal names is among `held` (else a reader finishes it later, taking the locks in order)."""
    journal = folder / JOURNAL
    document = _read_journal(journal) if os.path.lexists(journal) else None
    if document is not None and _journal_folders(document, journal) <= held:
        _finish(document, journal)


ALIVE = ".alive"


def alive_file(staging: str | os.PathLike) -> Path:
    """The file whose flock says a staging folder is still being built (`<folder>.alive`)."""
    return Path(os.fspath(staging) + ALIVE)


def _remove_if_dead(lock_path: str, remove: tuple[str, ...]) -> None:
    """Remove `remove` (files or folders) when no live process holds the flock its creator takes
    on `lock_path` (its writer died); removed while this lock is held, so a creator that locks it
    meanwhile sees the name gone (see `hold`) and makes another."""
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = -1  # a staging folder without its .alive file: its creator is gone
    except OSError:
        return
    try:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        for path in remove:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.lexists(path):
                os.unlink(path)
    except OSError:
        return
    finally:
        if fd >= 0:
            os.close(fd)


def hold(fd: int, path: str | os.PathLike) -> bool:
    """Take the creator's flock on a new temporary file or folder `fd`; False when a clean-up in
    another command removed the name between its creation and this lock (make another one)."""
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        return os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def tidy(folder: Path) -> None:
    """Remove the litter of killed commands from `folder`; the caller holds the folder's lock.

    Temporary files and staging folders are removed only when their creator's flock is free (so
    a command still writing keeps its files); backups, journal side files and swapped-out
    folders exist only while a publisher holds this lock, so any found now are a dead one's.
    """
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(PREFIX) and e.name != JOURNAL]
    except OSError:
        return
    for entry in entries:
        is_dir = entry.is_dir(follow_symlinks=False)
        if entry.name.endswith(".tmp"):  # a file flock-s itself; a folder is flock-ed through <folder>.alive
            lock = os.fspath(alive_file(entry.path)) if is_dir else entry.path
            _remove_if_dead(lock, (entry.path, lock) if is_dir else (entry.path,))
            continue
        if entry.name.endswith(ALIVE):  # left without its folder
            if not os.path.lexists(entry.path[: -len(ALIVE)]):
                _remove_if_dead(entry.path, (entry.path,))
            continue
        if not entry.name.endswith((".bak", ".jtmp", ".old")):
            continue
        with suppress(OSError):
            if is_dir:
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)


def tidy_folders(folders: Iterable[Path], held: set[str]) -> None:
    for folder in folders:
        settle_held(folder, held)
        tidy(folder)


MANIFEST_LIMIT = 1 << 20


def is_our_output(manifest: Path, schema_prefix: str = "microctx-") -> bool:
    """True when `manifest` is a regular JSON file (at most 1 MiB) whose `schema` is one of ours
    (starts with `schema_prefix`): what marks a folder as a microctx output, never its file names."""
    try:
        fd = os.open(manifest, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        data = os.read(fd, MANIFEST_LIMIT + 1)
    except OSError:
        return False
    finally:
        os.close(fd)
    if len(data) > MANIFEST_LIMIT:
        return False
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError:
        return False
    schema = document.get("schema") if isinstance(document, dict) else None
    return isinstance(schema, str) and schema.startswith(schema_prefix)
