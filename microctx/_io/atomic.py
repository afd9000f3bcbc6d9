"""Atomic outputs: files written to a temporary name and renamed into place, published as a set.

Every output goes to a temporary file in the destination folder and is renamed into place only
when the whole command has succeeded, so a failure never leaves a half-written file or
replaces a good one; the files of one command are published as a set (all or none), under a
lock on their folders, with a commit journal (see `microctx._io.sets`) so that a kill between
two steps leaves a set that the next reader finishes. A set may also remove an earlier output
(`remove`): the removal is journalled and committed with the renames, never done before them.
Folders (a report, the demo) are swapped in one step (renameat2 RENAME_EXCHANGE).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from microctx._io import sets
from microctx._io.paths import locked_folders, resolved, write_failure
from microctx._io.renames import exchange, interrupts_deferred, remove, rename
from microctx.errors import InputError


def _side_name(folder: Path, suffix: str) -> Path:
    return folder / f"{sets.PREFIX}{os.urandom(6).hex()}{suffix}"


@dataclass
class _Staged:
    tmp: Path
    dest: Path
    handle: BinaryIO


@dataclass(frozen=True)
class _Removal:
    dest: Path
    identity: tuple[int, int, int, int] | None  # (device, inode, size, mtime) it must still have, or None


def file_identity(path: str | os.PathLike) -> tuple[int, int, int, int]:
    """What `AtomicOutputs.remove(..., same_as=)` compares: the file at `path` (not followed) by
    device, inode, size and modification time."""
    found = os.lstat(path)
    return (found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns)


def refuse_special(dest: Path) -> None:
    """Refuse an output path that holds a folder, a FIFO, a device or a socket (a symlink's own
    name is replaced, as before; a regular file is replaced)."""
    try:
        mode = os.lstat(dest).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise write_failure(dest, exc) from None
    if stat.S_ISDIR(mode):
        raise InputError(dest, "is a folder; expected a file name")
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise InputError(dest, "is a special file (FIFO, device or socket), not a regular file; refusing to replace it")


class AtomicOutputs:
    """Stage several output files and publish them together: all or nothing, even under a kill.

    Use as a context manager: `stage(path)` returns an open binary file in the destination
    folder; on a clean exit every staged file is renamed over its destination, under a lock on
    the destination folders, after a journal naming the whole set is written (the commit record:
    a reader that finds it finishes the renames first, see `microctx._io.sets`); on an exception
    every temporary file is removed and no destination is touched. `remove(path)` adds a removal
    to the set: `path` does not exist once the set is published (journalled like the renames, done
    after them; nothing is removed when the set is not published). When a rename or a removal fails
    half way (a name too long), the files already renamed or removed are put back as they were
    (from hard-linked backups). Every OSError is an InputError naming the output (one line, exit 2).
    """

    def __init__(self) -> None:
        self._staged: list[_Staged] = []
        self._removals: list[_Removal] = []
        self._journal = b""  # the commit journal, once written: a roll-back's journal names it

    def stage(self, path: str | os.PathLike) -> BinaryIO:
        dest = Path(path)
        folder = dest.parent
        if any(removal.dest == dest for removal in self._removals):
            raise ValueError(f"{dest} is both written and removed by this set")
        refuse_special(dest)
        if not folder.is_dir():
            raise InputError(dest, "output folder does not exist")
        while True:
            tmp = _side_name(folder, ".tmp")
            try:  # mode 0666 less the process umask: outputs get the usual permissions (mkstemp would make 0600)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
                if sets.hold(fd, tmp):  # alive: the litter clean-up leaves it alone
                    break
                os.close(fd)
            except OSError as exc:
                raise write_failure(dest, exc) from None
        handle = os.fdopen(fd, "wb")
        self._staged.append(_Staged(tmp, dest, handle))
        return handle

    def remove(self, path: str | os.PathLike, same_as: tuple[int, int, int, int] | None = None) -> None:
        """Remove the earlier output at `path` when the set is published (nothing to do when there
        is none). `same_as` (a `file_identity`): the set is refused, nothing replaced, when the
        file found at publishing is not that one any more (replaced since the caller looked at it)."""
        dest = Path(path)
        if any(staged.dest == dest for staged in self._staged):
            raise ValueError(f"{dest} is both written and removed by this set")
        refuse_special(dest)
        if dest.parent.is_dir():  # else there is nothing to remove
            self._removals.append(_Removal(dest, same_as))

    def staged_path(self, path: str | os.PathLike) -> Path:
        """The temporary file staged for `path`, flushed (to read back what was written before
        publishing)."""
        dest = Path(path)
        staged = next(staged for staged in self._staged if staged.dest == dest)
        try:
            staged.handle.flush()
        except OSError as exc:
            raise write_failure(dest, exc) from None
        return staged.tmp

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
                if staged.tmp.exists():
                    staged.tmp.unlink()
                if not staged.handle.closed:
                    staged.handle.close()

    def _flush(self) -> None:
        for staged in self._staged:
            try:
                staged.handle.flush()
                os.fsync(staged.handle.fileno())
            except OSError as exc:  # a full disk shows here at the latest
                raise write_failure(staged.dest, exc) from None

    def _folders(self) -> list[Path]:
        dests = [s.dest for s in self._staged] + [r.dest for r in self._removals]
        return sorted({dest.parent for dest in dests}, key=lambda p: str(resolved(p)))

    def _publish(self) -> None:
        folders = self._folders()
        for folder in folders:  # a set a killed command committed here is finished first
            sets.settle(folder / "x")
        with locked_folders(folders):
            sets.tidy_folders(folders, {str(resolved(f)) for f in folders} | {os.fspath(f) for f in folders})
            dests = [s.dest for s in self._staged] + [r.dest for r in self._removals]
            for dest in dests:
                refuse_special(dest)
            removals = self._present_removals()
            backups = self._backups(removals)
            journals: list[Path] = []
            done: list[Path] = []  # renamed or removed, in order: what a failure puts back
            current = dests[0] if dests else Path(".")
            with interrupts_deferred():  # a Ctrl-C waits for the set's last step: old or new, never a mix
                try:
                    if len(self._staged) + len(removals) > 1:
                        journals = self._commit(folders, removals)
                    for staged in self._staged:
                        current = staged.dest
                        rename(staged.tmp, staged.dest)
                        done.append(staged.dest)
                    for current in removals:
                        remove(current)
                        done.append(current)
                    _fsync_folders(folders)
                except OSError as exc:
                    _roll_back(done, backups, set(removals), journals, folders, self._journal)
                    raise write_failure(current, exc) from None
                finally:
                    for path in [*journals, *backups.values()]:
                        with suppress(OSError):
                            path.unlink()

    def _present_removals(self) -> list[Path]:
        """The destinations to remove that exist (checked under the folders' locks); refuses the
        set when one is no longer the file the caller meant (`same_as`)."""
        present = []
        for removal in self._removals:
            try:
                identity = file_identity(removal.dest)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise write_failure(removal.dest, exc) from None
            if removal.identity is not None and identity != removal.identity:
                raise InputError(removal.dest, "changed since this command decided to remove it; nothing was replaced")
            present.append(removal.dest)
        return present

    def _backups(self, removals: list[Path]) -> dict[Path, Path]:
        """Hard links to the files about to be replaced or removed, to put them back if a step fails."""
        backups: dict[Path, Path] = {}
        for dest in [s.dest for s in self._staged] + removals:
            if dest.is_file() and not dest.is_symlink():
                backup = _side_name(dest.parent, ".bak")
                with suppress(OSError):  # a file system without hard links: no way back for this one
                    os.link(dest, backup)
                    backups[dest] = backup
        return backups

    def _commit(self, folders: list[Path], removals: list[Path]) -> list[Path]:
        """Write the journal into every destination folder: from here on the new set is the set."""
        data = sets.journal_bytes(
            [(s.tmp.absolute(), s.dest.absolute()) for s in self._staged],
            [f.absolute() for f in folders],
            [dest.absolute() for dest in removals],
        )
        journals = [_put_journal(folder / sets.JOURNAL, data) for folder in folders]
        self._journal = data
        _fsync_folders(folders)
        return journals


def _put_journal(journal: Path, data: bytes) -> Path:
    """Write a journal whole: to a side name, synced, then renamed over `journal`."""
    side = _side_name(journal.parent, ".jtmp")
    fd = os.open(side, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    rename(side, journal)
    return journal


def _roll_back(
    done: list[Path],
    backups: dict[Path, Path],
    removed: set[Path],
    journals: list[Path],
    folders: list[Path],
    committed: bytes,
) -> None:
    """Put the set back as it was after a step failed. A committed set (journals written) is first
    re-committed as its own undoing: each journal is replaced by one whose moves put the backups
    back and whose removals drop the files the set made where there were none, so a kill during
    the roll-back leaves a journal that the next reader finishes into the old set, not the
    committed new one over a half-restored old one. It names the journal it `undoes`: killed
    between two folders' copies, the copies differ, and a reader goes by the roll-back's."""
    undo = [(backups[dest], dest) for dest in reversed(done) if dest in backups]
    made = [dest for dest in reversed(done) if dest not in backups and dest not in removed]
    with suppress(OSError):
        if journals:
            data = sets.journal_bytes([(b.absolute(), d.absolute()) for b, d in undo], [f.absolute() for f in folders],
                                      [d.absolute() for d in made], committed)  # fmt: skip
            for journal in journals:
                _put_journal(journal, data)
    for backup, dest in undo:
        with suppress(OSError):
            rename(backup, dest)
            backups.pop(dest)
    for dest in made:
        with suppress(OSError):
            remove(dest)


def _fsync_folders(folders: Iterable[Path]) -> None:
    for folder in folders:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


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

    An existing destination is replaced only if it is empty or holds `marker` whose content marks
    it as ours (a JSON manifest with a `microctx-` schema id, see `sets.is_our_output`); anything
    else is refused, so a typo cannot wipe an unrelated folder (a freeze folder's `report.json` is
    not ours). The swap is one exchange of the two folders (renameat2), under a lock on the
    parent folder, so a kill at any instruction leaves the old folder or the new one at
    `destination`; the staging folder (alive while its `.alive` file is flock-ed) and a swapped-out folder left by
    a kill are removed by the next report into the same parent. On failure the staging folder is
    removed and the destination is untouched; every OSError is an InputError naming the destination.
    """
    dest = Path(destination)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failure(dest, exc) from None
    with locked_folders([dest.parent]):  # not while another command swaps it
        sets.tidy(dest.parent)
        refusal = _refusal(dest, marker)
    if refusal:
        raise InputError(dest, f"{refusal}; choose another --out or empty it")
    staging, lock = _new_staging(dest)
    try:
        yield staging
        _swap_folder(staging, dest, marker)
    except OSError as exc:
        raise write_failure(dest, exc) from None
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
        _drop_alive(lock, sets.alive_file(staging))


def _new_staging(dest: Path) -> tuple[Path, int]:
    """A new staging folder beside `dest`, and an fd holding the flock of its `.alive` file.

    The "still being built" lock is on a sibling file, never on the folder itself: a command
    publishing into the staging folder (a kernel writing a grade set) takes the folder's own lock
    (`locked_folders`), which must stay free."""
    while True:
        staging = _side_name(dest.parent, ".tmp")
        alive = sets.alive_file(staging)
        try:
            lock = os.open(alive, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise write_failure(dest, exc) from None
        if not sets.hold(lock, alive):  # removed by a clean-up before this lock: make another
            os.close(lock)
            continue
        try:
            os.mkdir(staging, 0o777)  # less the umask: the published folder reads like its files
        except FileExistsError:
            _drop_alive(lock, alive)
            continue
        except OSError as exc:
            _drop_alive(lock, alive)
            raise write_failure(dest, exc) from None
        return staging, lock


def _drop_alive(lock: int, alive: Path) -> None:
    with suppress(OSError):
        alive.unlink()
    os.close(lock)


def _refusal(dest: Path, marker: str) -> str:
    """Why `dest` may not be replaced ("" when it may: absent, empty, or holding our `marker`).
    Called under the parent folder's lock, so no command of ours swaps it meanwhile."""
    try:
        if not dest.exists() and not dest.is_symlink():
            return ""
        if dest.is_symlink() or not dest.is_dir():
            return "exists and is not a folder"
        if any(dest.iterdir()) and not sets.is_our_output(dest / marker):
            return f"exists and is not a microctx output folder (no {marker} with a microctx schema id)"
    except FileNotFoundError:
        return ""
    return ""


def _swap_folder(staging: Path, dest: Path, marker: str) -> None:
    with locked_folders([dest.parent]):
        refusal = _refusal(dest, marker)
        if refusal:
            raise InputError(dest, f"{refusal}; nothing was replaced")
        if not dest.exists():
            rename(staging, dest)
            return
        if exchange(staging, dest):  # the old folder is now at the staging name
            shutil.rmtree(staging, ignore_errors=True)
            return
        old = _side_name(dest.parent, ".old")  # no exchange here: two renames, the old kept until the new is in
        rename(dest, old)
        try:
            rename(staging, dest)
        except OSError:
            os.replace(old, dest)
            raise
        shutil.rmtree(old, ignore_errors=True)
