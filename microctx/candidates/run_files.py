"""What the runner reads of a finished run, and how it shows what a candidate wrote.

A candidate controls its run folder: what is read there (`submission.json`, `counters.json`) is
read without following a symbolic link, only when it is a regular file, and only up to a size
limit that fits the run's memory limit (`submission_limit`): a FIFO, a link out of the folder or
a huge file never blocks the runner nor takes its memory. Its output is read from the end
(`output_tail`), with every passed secret's value removed before the tail is cut, so that a
secret cut in half by the cut cannot slip through; `escape_controls` makes what a candidate
printed safe for a terminal.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path

from microctx.candidates.registry import COUNTER_KEYS, COUNTERS_FILE, MODEL_COUNTER_KEYS
from microctx.errors import InputError

_COUNTERS_LIMIT = 1 << 20
_OUTPUT_TAIL = 4000
REDACTED = "[redacted]"


def submission_limit(memory_bytes: int, max_file_bytes: int) -> int:
    """The largest submission the runner reads: a quarter of the run's memory limit (parsing JSON
    takes several times its size), and never more than the file-size limit."""
    return min(max_file_bytes, max(1 << 20, memory_bytes // 4))


def secret_margin(secret: str) -> int:
    """The byte length of the longest way a secret's value shows in text, each character escaped
    (what `errors.secret_pattern` matches, but for zero-padded HTML references): the margin
    `output_tail` reads before its window."""
    return len("".join(max(f"&#{ord(c)};", f"\\u{ord(c):04x}", f"&#x{ord(c):x};", key=len) for c in secret).encode())


@functools.lru_cache(maxsize=64)
def _secret_regex(secret: str) -> re.Pattern[str]:
    """`errors.secret_pattern` of one secret, in its exact case, built once (redaction runs on
    every string of a manifest and every refused request)."""
    from microctx.errors import secret_pattern

    return secret_pattern(secret, exact_case=True)


def redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every secret's value (4 characters or more) replaced by [redacted], in any mix
    of its raw (exact case) and escaped forms (percent-encoded in either case, JSON, Python and
    HTML escapes: `errors.secret_pattern`), and URL-quoted with `+` for a space."""
    from urllib.parse import quote_plus

    for secret in sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True):
        text = _secret_regex(secret).sub(REDACTED, text).replace(quote_plus(secret), REDACTED)
    return text


def redact_all(value, secrets: Sequence[str]):
    """`value` (a JSON-like tree) with `redact` applied to every string in it, keys included."""
    if not secrets:
        return value
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [redact_all(item, secrets) for item in value]
    if isinstance(value, dict):
        return {redact(str(k), secrets): redact_all(v, secrets) for k, v in value.items()}
    return value


def escape_controls(text: str) -> str:
    """`text` with control characters (C0 but tab, DEL, C1) shown as \\xNN: safe for a terminal."""
    return "".join(c if c == "\t" or not (ord(c) < 32 or 127 <= ord(c) < 160) else f"\\x{ord(c):02x}" for c in text)


def output_tail(path: Path, secrets: Sequence[str] = ()) -> str:
    """The last _OUTPUT_TAIL characters of the run's output, secrets removed before the cut.

    A window longer than the tail by the longest secret is read and redacted; its first
    characters (which may hold the end of a secret cut by the window) are then dropped."""
    margin = max(map(secret_margin, secrets), default=0)
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        start = max(0, size - _OUTPUT_TAIL * 4 - margin)
        handle.seek(start)
        text = handle.read().decode("utf-8", "replace")
    if start > 0 and margin:
        text = text[margin:]
    return redact(text, secrets)[-_OUTPUT_TAIL:]


def read_regular(folder: Path, name: str, limit: int) -> tuple[bytes | None, str]:
    """(bytes, "") of a file the candidate controls, or (None, why not); "missing" when absent.

    Never blocks and never leaves the folder: the last component must not be a symbolic link
    (O_NOFOLLOW), it must be a regular file (a FIFO opened O_NONBLOCK is refused), and no larger
    than `limit` bytes."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return None, f"cannot open the run folder: {exc.strerror or exc}"
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            return None, "missing"
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None, f"{name} is a symbolic link (refused)"
            return None, f"cannot open {name}: {exc.strerror or exc}"
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None, f"{name} is not a regular file (refused)"
            if info.st_size > limit:
                return None, f"{name} is larger than {limit} bytes (refused)"
            chunks, size = [], 0
            while size <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:
                return None, f"{name} is larger than {limit} bytes (refused)"
            return b"".join(chunks), ""
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def read_counters(workdir: Path, secrets: Sequence[str] = ()) -> tuple[dict, str | None, str]:
    """Counters the candidate wrote (all keys present, null when not reported), its version
    (secrets removed, then cut to 200 characters), a problem."""
    from microctx._io.jsonio import parse_json

    counters: dict[str, int | None] = {key: None for key in COUNTER_KEYS}
    data, why = read_regular(workdir, COUNTERS_FILE, _COUNTERS_LIMIT)
    if data is None:
        return counters, None, "" if why == "missing" else f"ignored {COUNTERS_FILE}: {why}"
    try:
        reported = parse_json(data, COUNTERS_FILE)
    except InputError as exc:
        return counters, None, f"ignored {COUNTERS_FILE}: {exc.message}"
    if not isinstance(reported, dict):
        return counters, None, f"ignored {COUNTERS_FILE}: not a JSON object"
    problems = []
    for key in COUNTER_KEYS:
        value = reported.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            counters[key] = value
        elif value is not None:
            problems.append(f"{key} is not a non-negative integer")
    for key in MODEL_COUNTER_KEYS:  # present only when reported
        value = reported.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            counters[key] = value
        elif value is not None:
            problems.append(f"{key} is not a non-negative integer")
    version = reported.get("version")
    return counters, redact(str(version), secrets)[:200] if version is not None else None, "; ".join(problems)


def check_submission(workdir: Path, corpus_sha256: str, limit: int) -> tuple[bytes | None, str]:
    """(bytes, "") when the candidate's output is a usable submission for this corpus, else (None, why not)."""
    from microctx._io.jsonio import parse_json
    from microctx.contract.schemas import check_submission_document

    data, why = read_regular(workdir, "submission.json", limit)
    if data is None:
        return None, "the candidate wrote no submission" if why == "missing" else f"invalid submission: {why}"
    try:
        document = check_submission_document(parse_json(data, "submission"), "submission")
    except InputError as exc:
        return None, f"invalid submission: {exc}"
    if document["corpus_sha256"] != corpus_sha256:
        return None, f"invalid submission: bound to corpus {document['corpus_sha256']}, the public corpus is {corpus_sha256}"
    return data, ""
