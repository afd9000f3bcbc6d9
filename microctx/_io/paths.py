"""The path policy: no output may be an input or another output; safe names; folder locks."""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from microctx.errors import InputError


def resolved(path: str | os.PathLike) -> Path:
    """The absolute path with every symlink and `..` resolved (the file a name really reaches)."""
    return Path(os.path.realpath(os.fspath(path)))  # not abspath first: it drops `link/..` before the link is followed


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
    file, an input or output file inside a replaced folder, and two such folders that nest; and
    standard input (`-`) given for two inputs (it can be read once: the second would be empty).
    """
    ins = [(label, path) for label, path in inputs.items() if path is not None]
    from_stdin = [label for label, path in ins if os.fspath(path) == "-"]
    if len(from_stdin) > 1:
        raise InputError(
            from_stdin[1], f"standard input (-) is also {from_stdin[0]}: it can be read once; give one of them as a file"
        )
    outs = [(label, path) for label, path in outputs.items() if path is not None]
    dirs = [(label, path) for label, path in (folders or {}).items() if path is not None]
    for i, (label, path) in enumerate(outs):
        for in_label, in_path in ins:
            if _same_file(path, in_path):
                raise InputError(
                    path, f"{label} is the same file as the input {in_label} ({in_path}); refusing to overwrite an input"
                )
        for other_label, other in outs[:i]:
            if _same_file(path, other):
                raise InputError(path, f"{label} and {other_label} name the same file; each output needs its own path")
    for i, (label, folder) in enumerate(dirs):
        root = resolved(folder)
        for other_label, other in ins + outs:
            if resolved(other) == root or resolved(other).is_relative_to(root):
                raise InputError(
                    folder, f"{label} would replace the folder holding {other_label} ({other}); choose another folder"
                )
        for other_label, other in dirs[:i]:
            a, b = root, resolved(other)
            if a == b or a.is_relative_to(b) or b.is_relative_to(a):
                raise InputError(folder, f"{label} and {other_label} overlap; each output folder needs its own place")


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def safe_name(name: str, what: str = "--name") -> str:
    """`name` when it can be a file name as it is (letters, digits, `.`, `_`, `-`; no leading dot;
    at most 100 characters): no `/`, no `..`, nothing a shell or a browser would read; else refused."""
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name):
        raise InputError(
            what, f"{name!r} is not a safe name: use 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
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
