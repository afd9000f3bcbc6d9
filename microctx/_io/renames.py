"""Every rename and removal of an output, in one place: plain renames, the removals a set
commits, the atomic swap of two folders, and the kill hook that tests use to crash a command
between two of these steps, and the guard that holds Ctrl-C back while a set's steps run.

`MICROCTX_KILL_AT_RENAME=N` makes the process SIGKILL itself just before its Nth step, a rename or
a removal (counted from 1 over the whole process), the equivalent of
`strace -e inject=rename,unlink:signal=SIGKILL:when=N` for the steps microctx makes itself;
`MICROCTX_KILL_AT_RENAME=exchange` kills it just before its first folder swap (a report's, the
demo's), `=remove` just before its first removal; `N:INT` (or `remove:INT`) sends SIGINT (Ctrl-C)
instead of SIGKILL. Unset, it costs one dictionary look-up per step.
"""

from __future__ import annotations

import errno
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

KILL_ENV = "MICROCTX_KILL_AT_RENAME"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
_count = 0


def _count_rename(kind: str = "rename") -> None:
    global _count
    _count += 1
    wanted = os.environ.get(KILL_ENV)
    if wanted:
        at, _, how = wanted.partition(":")
        if (at.isdigit() and int(at) == _count) or at == kind:
            os.kill(os.getpid(), signal.SIGINT if how == "INT" else signal.SIGKILL)


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back Ctrl-C (SIGINT) for the block: a set's steps, from its commit to its last rename
    or removal, are not cut by a KeyboardInterrupt (which would leave some files new and some
    old, and the journal that says so removed). The interrupt is raised once the block is over.
    Only the main thread can install a handler; elsewhere the block runs as it is (the interrupt
    is the main thread's)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: held.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        if callable(previous):
            previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt
        elif previous == signal.SIG_DFL:
            os.kill(os.getpid(), signal.SIGINT)


def rename(src: str | os.PathLike, dst: str | os.PathLike) -> None:
    """os.replace, counted for the kill hook."""
    _count_rename()
    os.replace(src, dst)


def remove(path: str | os.PathLike) -> None:
    """os.unlink of an output that a set removes, counted for the kill hook like a rename."""
    _count_rename("remove")
    os.unlink(path)


_renameat2: Any = None  # libc's renameat2, False when there is none, None before the first look


def exchange(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    """Swap two existing paths in one step (Linux renameat2 RENAME_EXCHANGE): after any crash each
    name holds either its old or its new content, never neither. False when the kernel or the file
    system cannot (the caller falls back to two renames); other failures are OSErrors."""
    global _renameat2
    import ctypes  # here, not at import: only a folder swap needs it (start-up of every command, issue 24)

    if _renameat2 is None:
        try:
            _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
        except (AttributeError, OSError):
            _renameat2 = False
    if _renameat2 is False:
        return False
    _count_rename("exchange")
    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(a))
