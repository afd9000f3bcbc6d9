"""Folders a candidate has written: walked without following links, never blocking, with bounds.

A candidate controls what it leaves in its run folder and its cache folder: set-id files, FIFOs,
sockets, device nodes, symbolic and hard links, trees thousands of levels deep, millions of
entries. `clean_tree` makes such a folder harmless for the host and for later runs; `remove_tree`
deletes one whatever it holds. Both work on directory file descriptors (`os.scandir(fd)`,
`dir_fd=` calls), never follow a link, never open anything but a directory (or, to change a
file's mode, the file itself as an `O_PATH` handle), and keep every folder at most `MAX_DEPTH`
levels below the top: a subfolder found at that depth is first moved up (one rename) into a
holding folder at the top, so neither recursion nor a path grows with the tree. A tree of more than `max_entries` entries is not walked to its end: `TreeTooLarge`.

A candidate of another run may still be writing the folder while it is cleaned (a sweep's runs
share the cache folder and run side by side), so what an entry was when it was listed is never
trusted for a change: a mode is changed through a handle opened without following a link (a
folder's own descriptor, a file's `O_PATH` handle) after checking what that handle is, and an
entry swapped for a link, a FIFO or a folder since it was listed is removed instead. Changing a
mode by name would follow a link swapped in meanwhile and change a host file's mode (as root).
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field

MAX_DEPTH = 16
MAX_ENTRIES = 200_000
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class TreeTooLarge(Exception):
    """More entries than the walk's bound."""


@dataclass
class Cleaned:
    """What `clean_tree` removed or changed (the manifest's `cache_cleaned`)."""

    # kind -> count (fifo, socket, device, symlink, hardlink, deep, swapped)
    removed: dict[str, int] = field(default_factory=dict)
    set_id_cleared: int = 0
    entries: int = 0

    def note(self, kind: str) -> None:
        self.removed[kind] = self.removed.get(kind, 0) + 1

    def as_dict(self) -> dict:
        return {"removed": dict(sorted(self.removed.items())), "set_id_cleared": self.set_id_cleared, "entries": self.entries}


def _kind(mode: int, links: int) -> str | None:
    """Why an entry that is not a folder must go (None: a plain regular file, kept)."""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISREG(mode) and links > 1:
        return "hardlink"
    return None if stat.S_ISREG(mode) else "other"


def clean_tree(path: str | os.PathLike, *, max_entries: int = MAX_ENTRIES) -> Cleaned:
    """Remove every special file and link under `path`, clear set-id and sticky bits, and delete
    what lies MAX_DEPTH levels down or deeper. Raises TreeTooLarge past `max_entries` entries."""
    cleaned = Cleaned()
    queue: list[tuple[int, int]] = [(os.open(path, _DIR_FLAGS), 0)]
    try:
        while queue:
            fd, depth = queue.pop()
            try:
                queue += _clean_one(fd, depth, cleaned, max_entries)
            finally:
                os.close(fd)
    finally:
        for fd, _ in queue:
            os.close(fd)
    return cleaned


def _clear_folder_set_id(folder: int, cleaned: Cleaned) -> None:
    """Clear the set-id and sticky bits of an open folder, through its own descriptor."""
    mode = os.fstat(folder).st_mode
    if mode & 0o7000:
        os.fchmod(folder, stat.S_IMODE(mode) & 0o777)
        cleaned.set_id_cleared += 1


def _clear_file_set_id(fd: int, name: str, cleaned: Cleaned) -> None:
    """Clear the set-id and sticky bits of the regular file `name` in folder `fd`: through an
    `O_PATH` handle of what is there now (never a link's target: O_NOFOLLOW), checked to still be
    a plain regular file; anything else that took its place is removed."""
    try:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    except FileNotFoundError:
        return
    try:
        now = os.fstat(handle)
        if stat.S_ISDIR(now.st_mode):
            remove_tree_at(fd, name)
            cleaned.note("swapped")
            return
        kind = _kind(now.st_mode, now.st_nlink)
        if kind is not None:
            _unlink_swapped(fd, name, kind, cleaned)
        elif now.st_mode & 0o7000:  # the inode the handle holds, whatever the name points at by now
            os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(now.st_mode) & 0o777)
            cleaned.set_id_cleared += 1
    finally:
        os.close(handle)


def _unlink_swapped(fd: int, name: str, kind: str, cleaned: Cleaned) -> None:
    """Remove an entry that is no longer what it was listed as (unlink never follows a link)."""
    try:
        os.unlink(name, dir_fd=fd)
    except (FileNotFoundError, IsADirectoryError):
        return
    cleaned.note(kind)


def _clean_one(fd: int, depth: int, cleaned: Cleaned, max_entries: int) -> list[tuple[int, int]]:
    """Clean the entries of one folder; return its subfolders (open) to walk next. An entry gone
    since it was listed (removed by another run's cleaner, or by a candidate still running) is
    passed over."""
    below: list[tuple[int, int]] = []
    with os.scandir(fd) as entries:
        names = [(e.name, info) for e in entries if (info := _lstat(e)) is not None]
    try:
        for name, info in names:
            cleaned.entries += 1
            if cleaned.entries > max_entries:
                raise TreeTooLarge(f"more than {max_entries} entries")
            try:
                sub = _clean_entry(fd, name, info, depth, cleaned)
            except FileNotFoundError:
                continue
            if sub is not None:
                below.append((sub, depth + 1))
                _clear_folder_set_id(sub, cleaned)
    except BaseException:
        for sub, _ in below:
            os.close(sub)
        raise
    return below


def _lstat(entry: os.DirEntry) -> os.stat_result | None:
    try:
        return entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None


def _clean_entry(fd: int, name: str, info: os.stat_result, depth: int, cleaned: Cleaned) -> int | None:
    """Clean one entry listed as `info`; a subfolder to walk is returned open."""
    if stat.S_ISDIR(info.st_mode):
        if depth + 1 >= MAX_DEPTH:
            remove_tree_at(fd, name)
            cleaned.note("deep")
            return None
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            _unlink_swapped(fd, name, "swapped", cleaned)  # a link or a file since it was listed
            return None
    kind = _kind(info.st_mode, info.st_nlink)
    if kind is not None:
        os.unlink(name, dir_fd=fd)
        cleaned.note(kind)
    elif info.st_mode & 0o7000:
        _clear_file_set_id(fd, name, cleaned)
    return None


def remove_tree(path: str | os.PathLike) -> None:
    """Delete the folder (or file) at `path` whatever it holds; nothing when it is gone already."""
    path = os.fspath(path)
    parent = os.open(os.path.dirname(os.path.abspath(path)), _DIR_FLAGS)
    try:
        remove_tree_at(parent, os.path.basename(path))
    finally:
        os.close(parent)


def remove_tree_at(parent: int, name: str) -> None:
    """Delete `name` in folder `parent` whatever it holds (any depth, links never followed)."""
    todo = [name]
    while todo:
        current = todo.pop()
        try:
            info = os.stat(current, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(current, dir_fd=parent)
            continue
        todo += _remove_levels(parent, current)


def _fresh_name(parent: int) -> str:
    for counter in range(1, 1 << 30):
        candidate = f".microctx-deep-{counter}"
        try:
            os.stat(candidate, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return candidate
    raise OSError("no free name")


def _remove_levels(parent: int, name: str) -> list[str]:
    """Empty and remove `parent/name` down to MAX_DEPTH levels; folders found at that depth are
    first moved up into `parent` under fresh names, which are returned (to be removed next)."""
    moved: list[str] = []
    stack: list[tuple[int, list[os.DirEntry], int, str]] = []
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    with os.scandir(fd) as it:
        stack.append((fd, list(it), parent, name))
    while stack:
        fd, entries, up, here = stack[-1]
        if not entries:
            os.close(fd)
            stack.pop()
            os.rmdir(here, dir_fd=up)
            continue
        entry = entries.pop()
        if not entry.is_dir(follow_symlinks=False):
            os.unlink(entry.name, dir_fd=fd)
        elif len(stack) >= MAX_DEPTH:
            fresh = _fresh_name(parent)
            os.rename(entry.name, fresh, src_dir_fd=fd, dst_dir_fd=parent)
            moved.append(fresh)
        else:
            sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
            with os.scandir(sub) as it:
                stack.append((sub, list(it), fd, entry.name))
    return moved
