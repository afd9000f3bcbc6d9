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
