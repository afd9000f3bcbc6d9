"""The forwarder that reaches the runner's proxy from inside a sandbox (network record mode).

`forwarder_argv(python, SOCKET, PORT, ARGV)` is `python -I -S -c FORWARDER SOCKET PORT -- ARGV...`
(standard library only, so that it starts in a few milliseconds): it listens on `127.0.0.1:PORT`
inside the sandbox, pipes every connection to the proxy's Unix socket, and execs the candidate's
ARGV. Its threads run inside the sandbox and count against the run's process limit.
"""

from __future__ import annotations

from pathlib import Path

from microctx.candidates import pump

DEFAULT_PORT = 3128


# Run as `python -I -S -c FORWARDER SOCKET PORT -- ARGV...`: standard library only, so that it starts
# in a few milliseconds. It listens on 127.0.0.1:PORT, forks a child that pipes every connection to
# SOCKET (the child lives until the sandbox ends: bwrap's init kills it with the run), and execs ARGV.
# The pipe is microctx.candidates.pump's `relay`, the proxy's own: the script begins with that
# module's text (it cannot import microctx inside the sandbox), so there is one pump, not two.
FORWARDER_MAIN = r"""
import os, sys, threading

def one(conn, path):
    with conn:
        try:
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            upstream.connect(path)
        except OSError:
            return
        with upstream:
            relay(conn, upstream)

path, port, command = sys.argv[1], int(sys.argv[2]), sys.argv[4:]
listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", port))
listener.listen(64)
if os.fork() == 0:
    try:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=one, args=(conn, path), daemon=True).start()
    finally:
        os._exit(0)
listener.close()
os.execvp(command[0], command)
"""


FORWARDER = Path(str(pump.__file__)).read_text(encoding="utf-8") + FORWARDER_MAIN


def forwarder_argv(python: str, socket_path: str, port: int, command: list[str]) -> list[str]:
    """The command that starts the forwarder inside the sandbox and then runs `command`."""
    return [python, "-I", "-S", "-c", FORWARDER, socket_path, str(port), "--", *command]
