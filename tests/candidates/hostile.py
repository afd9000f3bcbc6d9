"""Hostile candidates: each tries one way out of the sandbox and reports what it got.

Every function is a function candidate (`hostile.py:NAME`). Unless its attack is to break the run,
it writes a valid, empty submission carrying a `hostile` report of what it tried and what worked,
so a test can read the attacker's own account beside the manifest. Parameters (`params`) tell
it what to aim at: the tests hand it the host's real paths, as an attacker who guessed right.
"""

import errno
import hashlib
import json
import os
import socket
import sys
import time
import urllib.request
from pathlib import Path

ANSWERS_NAME = "s8f-github-issues-answers-2026-08-09.json"
ANSWERS_SHA256 = "af827ddca1063c602153f80b14523bda8d07e1a7e909a5c487616f2702eda05d"
ANSWERS_SIZE = 305282


def _submit(public_path, output_path, report):
    digest = hashlib.sha256(Path(public_path).read_bytes()).hexdigest()
    Path(output_path).write_text(
        json.dumps(
            {
                "schema": "fak-microcontext-submission/1",
                "corpus_sha256": digest,
                "answers": [],
                "aggregates": None,
                "hostile": report,
            }
        )
    )


def _error(exc):
    return f"{type(exc).__name__}: {errno.errorcode.get(getattr(exc, 'errno', None) or 0, '')} {exc}"


def proc_snoop(public_path, output_path, *, devkit_path=None, params=None):
    """Read every process's environment, command line, working directory, root and executable in /proc."""
    seen = {}
    for entry in sorted(os.listdir("/proc")):
        if not entry.isdigit():
            continue
        found = {}
        for name in ("environ", "cmdline"):
            try:
                found[name] = Path(f"/proc/{entry}/{name}").read_bytes().decode("utf-8", "replace")
            except OSError as exc:
                found[name] = _error(exc)
        for name in ("cwd", "root", "exe"):
            try:
                found[name] = os.readlink(f"/proc/{entry}/{name}")
            except OSError as exc:
                found[name] = _error(exc)
        seen[entry] = found
    _submit(public_path, output_path, {"processes": seen, "ppid": os.getppid()})


def read_paths(public_path, output_path, *, devkit_path=None, params=None):
    """Try to read (or list) each host path it was told about."""
    read, refused = {}, {}
    for path in (params or {}).get("paths", []):
        try:
            if os.path.isdir(path):
                read[path] = sorted(os.listdir(path))
            else:
                read[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError as exc:
            refused[path] = _error(exc)
    _submit(public_path, output_path, {"read": read, "refused": refused, "home": os.path.expanduser("~")})


def walk_root(public_path, output_path, *, devkit_path=None, params=None):
    """Walk the whole file system from / for a file named like the answers or with their digest."""
    findings, files = [], 0
    for folder, dirs, names in os.walk("/"):
        if folder == "/proc":
            dirs[:] = []
            continue
        for name in names:
            files += 1
            path = os.path.join(folder, name)
            if name == ANSWERS_NAME or "answers" in name.lower() and name.endswith(".json"):
                findings.append(path)
                continue
            try:
                if (
                    os.path.getsize(path) == ANSWERS_SIZE
                    and hashlib.sha256(Path(path).read_bytes()).hexdigest() == ANSWERS_SHA256
                ):
                    findings.append(path)
            except OSError:
                pass
    _submit(public_path, output_path, {"findings": findings, "files": files})


def network(public_path, output_path, *, devkit_path=None, params=None):
    """Open TCP connections straight to each target (no proxy); report which connected."""
    connected, failed = [], {}
    for host, port in (params or {}).get("targets", []):
        try:
            with socket.create_connection((host, port), timeout=3) as conn:
                conn.sendall(b"GET /hostile-direct HTTP/1.0\r\n\r\n")
                connected.append(f"{host}:{port}")
        except OSError as exc:
            failed[f"{host}:{port}"] = _error(exc)
    try:
        socket.getaddrinfo("example.com", 80)
        resolved = True
    except OSError:
        resolved = False
    _submit(public_path, output_path, {"connected": connected, "failed": failed, "dns": resolved})


def through_proxy(public_path, output_path, *, devkit_path=None, params=None):
    """Record mode: fetch each URL through the proxy the environment names; one CONNECT tunnel by hand; one direct try."""
    params = params or {}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler())  # HTTP_PROXY from the environment
    results = {}
    for url in params.get("urls", []):
        try:
            with opener.open(url, timeout=10) as response:
                results[url] = [response.status, response.read().decode()]
        except urllib.error.HTTPError as exc:
            results[url] = [exc.code, ""]
        except OSError as exc:
            results[url] = [None, _error(exc)]
    tunnel = None
    if params.get("connect"):
        proxy = os.environ["HTTP_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
        with socket.create_connection((proxy[0], int(proxy[1])), timeout=10) as conn:
            conn.sendall(f"CONNECT {params['connect']} HTTP/1.1\r\nHost: {params['connect']}\r\n\r\n".encode())
            established = conn.recv(4096).decode()
            conn.sendall(f"GET /tunnelled HTTP/1.0\r\nHost: {params['connect']}\r\n\r\n".encode())
            body = b""
            while chunk := conn.recv(65536):
                body += chunk
            tunnel = [established.split("\r\n")[0], body.decode().split("\r\n")[0], body.decode().rsplit("\n", 1)[-1]]
    direct = None
    if params.get("direct"):
        host, port = params["direct"]
        try:
            socket.create_connection((host, port), timeout=3).close()
            direct = "connected"
        except OSError as exc:
            direct = _error(exc)
    _submit(public_path, output_path, {"results": results, "tunnel": tunnel, "direct": direct})
    return {"tool_calls": 0}  # claims no tool calls: the manifest's network record says otherwise


def write_outside(public_path, output_path, *, devkit_path=None, params=None):
    """Try to write a .pth hook into the venv's site-packages and files at other host paths."""
    written, refused = [], {}
    hook = "import os; os.environ['MICROCTX_HOSTILE_HOOK'] = '1'\n"
    for path in (params or {}).get("paths", []):
        try:
            Path(path).write_text(hook)
            written.append(path)
        except OSError as exc:
            refused[path] = _error(exc)
    for path in ("/tmp/microctx-hostile-marker", os.path.expanduser("~/microctx-hostile-marker")):
        try:
            Path(path).write_text("inside the sandbox only")  # private tmpfs: gone with the run
            written.append(path)
        except OSError as exc:
            refused[path] = _error(exc)
    _submit(public_path, output_path, {"written": written, "refused": refused})


def grandchild(public_path, output_path, *, devkit_path=None, params=None):
    """Leave a setsid grandchild that, after the run, rewrites the submission and the host's files."""
    params = params or {}
    _submit(public_path, output_path, {"left": "a grandchild"})
    targets = [os.path.abspath(output_path), *params.get("targets", [])]
    code = (
        "import sys, time\ntime.sleep(float(sys.argv[1]))\n"
        "for path in sys.argv[3:]:\n"
        '    try:\n        open(path, \'w\').write(\'{"corpus_sha256": "rewritten by a grandchild", "answers": []}\')\n'
        "    except OSError:\n        pass\n"
        "time.sleep(600)\n"
    )
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", code, str(params.get("delay", 1.5)), params["marker"], *targets])
        os._exit(0)
    os.wait()


def fifo_counters(public_path, output_path, *, devkit_path=None, params=None):
    """Make counters.json a FIFO: a runner that opens it to read waits for a writer forever."""
    _submit(public_path, output_path, {})
    os.mkfifo("counters.json")


def huge_counters(public_path, output_path, *, devkit_path=None, params=None):
    """A 2 GiB (sparse) counters.json."""
    _submit(public_path, output_path, {})
    with open("counters.json", "wb") as handle:
        handle.truncate(2 << 30)


def symlinks(public_path, output_path, *, devkit_path=None, params=None):
    """submission.json and counters.json as symbolic links to host files (resolved by a careless runner after the run)."""
    params = params or {}
    os.symlink(params["submission_target"], output_path)
    os.symlink(params["counters_target"], "counters.json")


def allocate(public_path, output_path, *, devkit_path=None, params=None):
    """Allocate (and touch) memory without limit."""
    _submit(public_path, output_path, {})
    hoard = []
    while True:
        block = bytearray(32 << 20)
        block[::4096] = b"x" * len(block[::4096])
        hoard.append(block)


def fork_bomb(public_path, output_path, *, devkit_path=None, params=None):
    """Fork sleeping children until the kernel refuses; then fail saying how many it got."""
    children = 0
    while children < 10_000:
        try:
            pid = os.fork()
        except OSError as exc:
            raise RuntimeError(f"fork refused after {children} children: {exc}") from None
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        children += 1
    _submit(public_path, output_path, {"children": children})


def spin(public_path, output_path, *, devkit_path=None, params=None):
    """Burn CPU forever."""
    _submit(public_path, output_path, {})
    while True:
        pass
