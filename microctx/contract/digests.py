"""SHA-256 digests: of bytes, of a stream of chunks (with needle search), of a file.

Every digest in microctx is computed here: artifact files, title and body texts, submissions.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterable


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_chunks(chunks: Iterable[bytes], needles: Iterable[bytes] = ()) -> tuple[str, set[bytes]]:
    """SHA-256 of the concatenated chunks, and which needles occur in them.

    Needles are looked for within chunks; `iter_dumps` never splits a key or a string, so a
    needle that is a quoted key or a digest is found whenever it occurs in the whole text.
    """
    digest = hashlib.sha256()
    remaining = list(dict.fromkeys(needles))
    found: set[bytes] = set()
    pattern = _any_of(remaining)
    for chunk in chunks:
        digest.update(chunk)
        pos = 0
        while pattern is not None:
            # one scan for all needles not yet found, instead of one scan per needle
            match = pattern.search(chunk, pos)
            if match is None:
                break
            found.add(match.group())
            remaining.remove(match.group())
            pattern = _any_of(remaining)
            pos = match.start()  # another needle may start at the same offset
    return digest.hexdigest(), found


def _any_of(needles: list[bytes]) -> re.Pattern[bytes] | None:
    if not needles:
        return None
    return re.compile(b"|".join(re.escape(n) for n in sorted(needles, key=len, reverse=True)))


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of the regular file at `path`. A FIFO, a device (`/dev/zero`) or a folder is
    refused at once (opened without blocking, checked with fstat; the refusal is `open_input`'s,
    one line naming the file), never a read that blocks or never ends; standard input (`-`)
    cannot be hashed by name. Nothing more is imported on the way of a regular file: the
    sandboxed exact-sql child hashes its corpus with this."""
    if os.fspath(path) == "-":
        from microctx.errors import InputError

        raise InputError(path, "standard input cannot be read twice; give a file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            from microctx._io.jsonio import open_input

            open_input(path).close()  # refuses what is not a regular file, in the words of every input
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
