"""The candidate's cache folder (`--cache-dir`): the one folder outside its run folder it may write.

A cache folder is one microctx made for the purpose: it holds the marker file `MARKER` (written
when an existing, empty folder is first given as `--cache-dir`). Refused: a folder without the
marker that is not empty, a home folder or one above it, `/`, any path with a dot-folder in it
(`~/.ssh`, `~/.cache/...`), the data folder (MICROCTX_DATA_DIR), a folder above or inside it,
and a folder holding an answer bundle (found by content, microctx.candidates.answer_guard).
After every run the runner cleans it (`clean_cache_dir`: no set-id bits, FIFOs, sockets, device
nodes or links, at most `hostile_tree.MAX_DEPTH` levels, at most `hostile_tree.MAX_ENTRIES`
entries), walking it without following links and without blocking.
"""

from __future__ import annotations

import os
from pathlib import Path

from microctx.errors import InputError

MARKER = ".microctx-cache"
MARKER_TEXT = b"a candidate cache folder made by microctx (microctx run --cache-dir); safe to delete\n"


def _refuse(folder: Path, why: str) -> InputError:
    return InputError("--cache-dir", f"{folder}: {why}")


def _check_place(folder: Path, resolved: Path) -> None:
    if any(part.startswith(".") for part in resolved.parts):
        raise _refuse(folder, "a dot-folder (or inside one); make a folder of its own for the cache")
    home = Path.home().resolve()
    if resolved == Path("/") or resolved == home or home.is_relative_to(resolved):
        raise _refuse(folder, "choose a folder of its own, not your home, a folder above it, or /")
    data_dir = os.environ.get("MICROCTX_DATA_DIR")
    if data_dir:
        data = Path(data_dir).resolve()
        if data == resolved or data.is_relative_to(resolved) or resolved.is_relative_to(data):
            raise _refuse(folder, "the data folder (MICROCTX_DATA_DIR), above it or inside it; choose a folder of its own")


def check_cache_dir(folder: Path) -> Path:
    """The resolved cache folder, when it may be one (see the module's docstring); InputError otherwise."""
    from microctx.candidates.answer_guard import find_answers

    if folder.is_symlink() or not folder.is_dir():
        raise _refuse(folder, "not an existing folder (a symbolic link is refused)")
    resolved = folder.resolve()
    _check_place(folder, resolved)
    marked = (resolved / MARKER).is_file() and not (resolved / MARKER).is_symlink()
    if not marked and any(resolved.iterdir()):
        raise _refuse(folder, f"not a cache folder made by microctx (no {MARKER}) and not empty; give an empty folder")
    found = find_answers([resolved])
    if found:
        raise _refuse(folder, f"holds an answer bundle ({found[0]}); the candidate's cache folder must not hold one")
    return resolved


def prepare_cache_dir(folder: str, host_uid: int) -> Path:
    """Check the folder, write its marker when new, and give it to the sandbox's host uid."""
    resolved = check_cache_dir(Path(folder))
    marker = resolved / MARKER
    if not marker.exists():
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(MARKER_TEXT)
    if os.geteuid() == 0 and host_uid != 0:
        os.chown(resolved, host_uid, host_uid, follow_symlinks=False)
    return resolved


def clean_cache_dir(folder: Path) -> tuple[dict, str]:
    """After a run: make the cache folder harmless (see the module's docstring).

    Returns (what was cleaned, a problem or ""). A folder too large to walk loses its marker,
    so that no later run uses it before someone looks at it."""
    from microctx.candidates.hostile_tree import TreeTooLarge, clean_tree

    try:
        cleaned = clean_tree(folder)
    except TreeTooLarge as exc:
        os.unlink(folder / MARKER) if (folder / MARKER).is_file() else None
        return {}, f"the cache folder {folder} holds {exc}; its marker is removed, later runs refuse it"
    except OSError as exc:
        return {}, f"cannot clean the cache folder {folder}: {exc.strerror or exc}"
    return cleaned.as_dict(), ""
