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
import stat
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path

import orjson

from microctx._io.paths import locked_folders, resolved
from microctx._io.renames import remove, rename

JOURNAL = ".mcx-pending.json"
JOURNAL_SCHEMA = "microctx-pending-set/1"
PREFIX = ".mcx-"
_JOURNAL_LIMIT = 1 << 20


def journal_bytes(
    moves: list[tuple[Path, Path]], folders: list[Path], removes: list[Path] | None = None, undoes: bytes | None = None
) -> bytes:
    """The journal of a set: its (temporary, destination) pairs, the destinations it removes
    (`removes`, absent from a journal of a set without removals) and every folder holding a copy;
    a roll-back's journal also names the commit journal it `undoes`, by its SHA-256 (see `_current`)."""
    document: dict = {
        "schema": JOURNAL_SCHEMA,
        "moves": [[os.fspath(tmp), os.fspath(dest)] for tmp, dest in moves],
        "journals": [os.fspath(folder / JOURNAL) for folder in folders],
    }
    if removes:
        document["removes"] = [os.fspath(dest) for dest in removes]
    if undoes is not None:
        document["undoes"] = _digest(orjson.loads(undoes))
    return orjson.dumps(document)


def _small_document(path: Path, limit: int, own: bool = False) -> dict | None:
    """The JSON object in the file at `path` when it is a regular file (not a link, never a FIFO
    to block on: opened O_NOFOLLOW, O_NONBLOCK), of at most `limit` bytes, and with `own` owned by
    this user; else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (own and info.st_uid != os.geteuid()):
            return None
        data = os.read(fd, limit + 1)
        document = orjson.loads(data) if len(data) <= limit else None
    except (OSError, orjson.JSONDecodeError):
        return None
    finally:
        os.close(fd)
    return document if isinstance(document, dict) else None


def _read_journal(path: Path) -> dict | None:
    """The journal at `path` when it is one this user could have written: owned by this user, at
    most 1 MiB of JSON with our schema (`_small_document`)."""
    document = _small_document(path, _JOURNAL_LIMIT, own=True)
    return document if document is not None and document.get("schema") == JOURNAL_SCHEMA else None


ACT, DROP, IGNORE = "act", "drop", "ignore"


def _digest(document: dict) -> str:
    """A journal's SHA-256, as written (orjson writes a document read back byte for byte as it was)."""
    import hashlib

    return hashlib.sha256(orjson.dumps(document)).hexdigest()


def _vet(document: dict, journal: Path) -> str:
    """Whether a journal found beside an input is one of our sets, before anything it names is
    touched: ACT on it; DROP it alone (a copy it names is gone: a reader finished the set and was
    dropping the copies); or IGNORE it (not ours). Ours: every copy it names is `.mcx-pending.json`
    in a folder of the set, this journal among them, each the same document written by this user;
    every file it moves comes from a `.mcx-` temporary or backup beside its destination, and every
    destination and removal lies in one of those folders. So a journal planted in a folder that
    someone else can write (an upload, a shared or sticky folder) cannot make a reader rename,
    remove or lock anything outside the folders holding copies of it, all of them written by the
    reader's own user."""
    copies = _paths(document, "journals")
    if not copies or any(not os.path.isabs(c) or os.path.basename(c) != JOURNAL for c in copies):
        return IGNORE
    folders = {os.path.dirname(c) for c in copies}
    moves, removes = _moves(document), _paths(document, "removes")
    for source, dest in moves:
        name = os.path.basename(source)
        if os.path.dirname(source) != os.path.dirname(dest) or not name.startswith(PREFIX) or not name.endswith((".tmp", ".bak")):
            return IGNORE
    if any(
        os.path.dirname(path) not in folders or os.path.basename(path) in ("", ".", "..")
        for path in [*(d for _, d in moves), *removes]
    ):
        return IGNORE
    if len(moves) != len(document.get("moves") or []) or len(removes) != len(document.get("removes") or []):
        return IGNORE
    try:
        here = os.stat(journal.parent)
    except OSError:
        return IGNORE
    if not any(_same_folder(folder, here) for folder in folders):
        return IGNORE
    for copy in copies:
        if not os.path.lexists(copy):
            return DROP
        found = _read_journal(Path(copy))
        if found != document and not (found is not None and document.get("undoes") == _digest(found)):
            return IGNORE  # a copy still the set's commit journal: a roll-back killed before its last copy
    return ACT


def _current(document: dict, journal: Path) -> tuple[dict, Path]:
    """The journal that is the set's record: `document` (found at `journal`), or the roll-back
    journal that replaced it in another of its folders (`undoes` it: a kill stopped the roll-back
    between two copies, so this copy still says "new" and that one "put back")."""
    for copy in _paths(document, "journals"):
        found = _read_journal(Path(copy)) if copy != os.fspath(journal) and os.path.lexists(copy) else None
        if found is not None and found.get("undoes") == _digest(document):
            return found, Path(copy)
    return document, journal


def _same_folder(folder: str, here: os.stat_result) -> bool:
    try:
        found = os.stat(folder)
    except OSError:
        return False
    return (found.st_dev, found.st_ino) == (here.st_dev, here.st_ino)


def _paths(document: dict, key: str) -> list[str]:
    """A journal's list of paths under `key`; anything in it that is not a path is not ours."""
    found = document.get(key)
    return [item for item in found if isinstance(item, str)] if isinstance(found, list) else []


def _moves(document: dict) -> list[tuple[str, str]]:
    """A journal's (source, destination) pairs; anything else in its list is not one of ours."""
    found = document.get("moves")
    pairs = [p for p in found if isinstance(p, list) and len(p) == 2] if isinstance(found, list) else []
    return [(a, b) for a, b in pairs if isinstance(a, str) and isinstance(b, str)]


def _finish(document: dict, journal: Path) -> None:
    """Roll a committed set forward: rename every temporary file still there, remove every
    destination the set removes that is still there (a file or a link; a folder put in its way
    since is left), then drop the journals."""
    for tmp, dest in _moves(document):
        if os.path.lexists(tmp):
            rename(tmp, dest)
    for dest in _paths(document, "removes"):
        if os.path.lexists(dest) and not (os.path.isdir(dest) and not os.path.islink(dest)):
            remove(dest)
    for copy in _paths(document, "journals"):
        with suppress(FileNotFoundError):
            os.unlink(copy)
    with suppress(FileNotFoundError):
        os.unlink(journal)


def _journal_folders(document: dict, journal: Path) -> set[str]:
    return {os.path.dirname(c) for c in _paths(document, "journals")} | {os.fspath(journal.parent)}


def _finish_ours(journal: Path) -> None:
    """Finish the set of the journal at `journal` (the caller holds its folders' locks) when it is
    ours (`_vet`), or drop this copy alone when the set was finished already."""
    document = _read_journal(journal)
    if document is not None:
        document, journal = _current(document, journal)
    verdict = _vet(document, journal) if document is not None else IGNORE
    if document is not None and verdict == ACT:
        _finish(document, journal)
    elif verdict == DROP:
        with suppress(FileNotFoundError):
            os.unlink(journal)


def settle(path: str | os.PathLike) -> None:
    """Finish a set that a killed command committed in the folder of `path`, before reading it.

    One stat when there is nothing to do. Otherwise waits for the folders' locks (a live
    publisher holds them while it renames), then rolls the set forward.
    """
    journal = Path(path).parent / JOURNAL
    if not os.path.lexists(journal):
        return
    document = _read_journal(journal)
    if document is None or _vet(*_current(document, journal)) == IGNORE:
        return
    with locked_folders(_journal_folders(document, journal)):
        _finish_ours(journal)  # read again: another reader may have finished it meanwhile


def settle_held(folder: Path, held: set[str]) -> None:
    """`settle` for a folder whose lock the caller holds: finish its journal when every folder the
    journal names is among `held` (resolved, as `locked_folders` locks them: a journal names its
    folders as the writer spelled them, through a link or with `..`; else a reader finishes it
    later, taking the locks in order)."""
    journal = folder / JOURNAL
    document = _read_journal(journal) if os.path.lexists(journal) else None
    if document is not None and {str(resolved(f)) for f in _journal_folders(document, journal)} <= held:
        _finish_ours(journal)


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
    folders exist only while a publisher holds this lock, so any found now are a dead one's. A
    file the folder's pending journal moves into place (a committed set, or a roll-back's backup,
    not finished because another of its folders is not held) is never litter.
    """
    try:
        entries = [e for e in os.scandir(folder) if e.name.startswith(PREFIX) and e.name != JOURNAL]
    except OSError:
        return
    pending = _read_journal(folder / JOURNAL) if os.path.lexists(folder / JOURNAL) else None
    if pending is not None:  # a set still to finish (its other folders not held): its files are not litter
        pending, _ = _current(pending, folder / JOURNAL)
        named = {os.path.basename(source) for source, _ in _moves(pending)}
        entries = [e for e in entries if e.name not in named]
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
    document = _small_document(manifest, MANIFEST_LIMIT)
    schema = document.get("schema") if document is not None else None
    return isinstance(schema, str) and schema.startswith(schema_prefix)
