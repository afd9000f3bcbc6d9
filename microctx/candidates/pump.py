"""The socket pump: bytes both ways between two sockets until both sides are done.

One home for two users: the runner's proxy (microctx.candidates.proxy_http, for CONNECT tunnels)
imports `relay`; the forwarder inside the sandbox (microctx.candidates.forwarder) cannot import
microctx (it runs as `python -I -S -c SCRIPT`, standard library only, to start in milliseconds),
so its script begins with this file's text. This module therefore imports the standard library
only and defines nothing else the script does not need.
"""

import selectors
import socket

IDLE_SECONDS = 120.0


def relay(a, b, idle=IDLE_SECONDS):
    """Pipe bytes both ways until both sides are done (or nothing moves for `idle` seconds).
    Returns (bytes a->b, bytes b->a)."""
    counts = {a: 0, b: 0}
    peer = {a: b, b: a}
    open_ = {a, b}
    by_fd = {a.fileno(): a, b.fileno(): b}
    with selectors.DefaultSelector() as selector:
        for s in open_:
            selector.register(s, selectors.EVENT_READ)
        while open_:
            ready = selector.select(idle)
            if not ready:
                break
            for key, _ in ready:
                source = by_fd[key.fd]
                try:
                    data = source.recv(65536)
                except OSError:
                    data = b""
                if data:
                    try:
                        peer[source].sendall(data)
                    except OSError:
                        return counts[a], counts[b]
                    counts[source] += len(data)
                    continue
                selector.unregister(source)
                open_.discard(source)
                try:
                    peer[source].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
    return counts[a], counts[b]
