"""Network record mode: the runner's proxy, and the forwarder that reaches it from inside a sandbox.

A sandboxed candidate has its own network namespace holding only a loopback interface: it can
reach nothing. In record mode the runner starts a `RecordingProxy` listening on a Unix socket in
the run's folder; the socket is bound read-only into the sandbox, and a small forwarder inside
(`forwarder_argv`: `python -I -S -c FORWARDER SOCKET PORT -- ARGV...`, standard library only)
listens on `127.0.0.1:PORT` in the sandbox and pipes every connection to the socket, then runs
the candidate's ARGV. The candidate gets `HTTP_PROXY`/`HTTPS_PROXY` (and the lower-case names)
pointing at `http://127.0.0.1:PORT`.

The proxy speaks the two forms every HTTP client uses through a proxy:
- `CONNECT host:port` (HTTPS and any other tunnel): the bytes are relayed as they are, TLS stays
  end to end between the candidate and the host;
- an absolute-URI request (`GET http://host[:port]/path HTTP/1.1`): sent to the host in origin
  form with `Connection: close` and the `Proxy-*` headers removed; one request per connection.
Only the allowed targets are reached: `HOST` allows ports 80 and 443, `HOST:PORT` that port alone
(names compare case-insensitively; an IP literal is a name like any other, `localhost` and
`127.0.0.1` are different entries). Anything else is answered `403` and listed as denied. The
proxy resolves names itself; the candidate needs no DNS.

Use (this is what `microctx.candidates.runner` does; another runner can do the same):

    with RecordingProxy(folder / "proxy.sock", ["api.example.com", "127.0.0.1:8080"]) as proxy:
        ...  # run something that talks to proxy.socket_path
    proxy.record()   # {"mode": "record", "allow_hosts": [...], "requests": [...], "denied": [...]}

`requests` holds one entry per request or tunnel, in the order they ended: `host`, `port`,
`method`, `target` (the URL, or host:port for CONNECT), `status` (the upstream's HTTP status;
200 for an established tunnel; 502 when the host could not be reached), `bytes_out` (candidate
to host), `bytes_in` (host to candidate) and `seconds`. A plain-HTTP request also has `path`,
and `usage` when its response (read up to 16 MiB, de-chunked and decompressed) is a chat
completion carrying token usage (microctx.candidates.usage): the runner's own count of model
calls and tokens, set beside the candidate's in the manifest. Through a tunnel (HTTPS) the
bytes are opaque: only the call is counted. `denied` holds `host`, `port`, `method`,
`target` and `reason`. Each list keeps at most `max_entries` entries; `dropped` counts the rest.
The compare report counts every request as a tool call (microctx.reports.tables.cost_table).
"""

from __future__ import annotations

import os
import selectors
import socket
import socketserver
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from microctx.candidates.usage import usage_from_response
from microctx.errors import InputError

DEFAULT_PORT = 3128
_HEAD_LIMIT = 64 * 1024
_IDLE_SECONDS = 120.0


@dataclass(frozen=True)
class AllowedHost:
    host: str  # lower-cased
    port: int | None  # None: ports 80 and 443

    def admits(self, host: str, port: int) -> bool:
        return host.lower() == self.host and (port == self.port if self.port is not None else port in (80, 443))

    def __str__(self) -> str:
        return self.host if self.port is None else f"{self.host}:{self.port}"


def parse_allowed_host(text: str) -> AllowedHost:
    """`HOST` or `HOST:PORT` (an IPv6 literal in brackets: `[::1]:8080`); an InputError otherwise."""
    value = text.strip()
    host, port = value, None
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise InputError("--allow-host", f"unclosed bracket in {text!r}")
        host, rest = value[1:end], value[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise InputError("--allow-host", f"expected HOST[:PORT], got {text!r}")
            port = rest[1:]
    elif value.count(":") == 1:
        host, port = value.split(":")
    if not host or any(c in host for c in "/ @?#"):
        raise InputError("--allow-host", f"expected HOST[:PORT], got {text!r}")
    if port is not None:
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise InputError("--allow-host", f"port must be 1-65535 in {text!r}")
        return AllowedHost(host.lower(), int(port))
    return AllowedHost(host.lower(), None)


def relay(a: Any, b: Any, idle: float = _IDLE_SECONDS) -> tuple[int, int]:
    """Pipe bytes both ways until both sides are done (or nothing moves for `idle` seconds).

    `a` and `b` are sockets (or objects with their recv/sendall/shutdown/fileno). Returns
    (bytes a->b, bytes b->a)."""
    counts = {a: 0, b: 0}
    peer = {a: b, b: a}
    open_ = {a, b}
    with selectors.DefaultSelector() as selector:
        for s in open_:
            selector.register(s, selectors.EVENT_READ)
        while open_:
            ready = selector.select(idle)
            if not ready:
                break
            for key, _ in ready:
                source: Any = key.fileobj
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


def _split_target(target: str, default_port: int) -> tuple[str, int]:
    if target.startswith("["):
        end = target.find("]")
        host, rest = target[1:end], target[end + 1 :]
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    host, sep, port = target.rpartition(":")
    if sep and port.isdigit():
        return host, int(port)
    return target, default_port


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        proxy = self.server.proxy
        proxy._begin()
        try:
            self._handle()
        except OSError:
            pass  # the candidate or the host went away mid-request; what was logged stays
        finally:
            proxy._end()

    def _handle(self) -> None:
        client: socket.socket = self.request
        client.settimeout(30)
        try:
            head = self._read_head(client)
        except OSError:
            return
        if head is None:
            self.server.proxy._deny("", 0, "?", "", "the request head was not complete HTTP")
            self._reply(client, 400, "Bad Request")
            return
        head_bytes, rest = head
        lines = head_bytes.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3:
            self.server.proxy._deny("", 0, "?", lines[0][:200], "not an HTTP request line")
            self._reply(client, 400, "Bad Request")
            return
        method, target, version = parts
        if method.upper() == "CONNECT":
            host, port = _split_target(target, 443)
            self._tunnel(client, host, port, target, rest)
        elif target.lower().startswith("http://"):
            self._forward(client, method, target, version, lines[1:], rest)
        else:
            self.server.proxy._deny("", 0, method, target[:200], "only CONNECT and http:// absolute-URI requests pass the proxy")
            self._reply(client, 400, "Bad Request")

    @staticmethod
    def _read_head(client: socket.socket) -> tuple[bytes, bytes] | None:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(65536)
            if not chunk:
                return None
            data += chunk
            if len(data) > _HEAD_LIMIT:
                return None
        head, rest = data.split(b"\r\n\r\n", 1)
        return head, rest

    @staticmethod
    def _reply(client: socket.socket, status: int, reason: str) -> None:
        body = f"{status} {reason} (microctx network record mode)\n".encode()
        try:
            client.sendall(
                f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
            )
        except OSError:
            pass

    def _open(self, client: socket.socket, host: str, port: int, method: str, target: str) -> socket.socket | None:
        proxy = self.server.proxy
        if not proxy.allows(host, port):
            proxy._deny(host, port, method, target, "host not allowed (see --allow-host)")
            self._reply(client, 403, "Forbidden")
            return None
        try:
            return socket.create_connection((host, port), timeout=proxy.connect_timeout)
        except OSError as exc:
            proxy._log(host, port, method, target, 502, 0, 0, 0.0, error=str(exc.strerror or exc))
            self._reply(client, 502, "Bad Gateway")
            return None

    def _tunnel(self, client: socket.socket, host: str, port: int, target: str, rest: bytes) -> None:
        started = time.monotonic()
        upstream = self._open(client, host, port, "CONNECT", target)
        if upstream is None:
            return
        with upstream:
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            upstream.sendall(rest)
            out, in_ = relay(client, upstream)
        self.server.proxy._log(host, port, "CONNECT", target, 200, out + len(rest), in_, time.monotonic() - started)

    def _forward(self, client: socket.socket, method: str, target: str, version: str, headers: list[str], rest: bytes) -> None:
        started = time.monotonic()
        authority, _, path = target[len("http://") :].partition("/")
        authority = authority.rpartition("@")[2]
        host, port = _split_target(authority, 80)
        upstream = self._open(client, host, port, method, target)
        if upstream is None:
            return
        kept = [h for h in headers if h and not h.lower().startswith(("proxy-", "connection:", "keep-alive:"))]
        head = "\r\n".join([f"{method} /{path} {version}", *kept, "Connection: close"]).encode("latin-1") + b"\r\n\r\n"
        with upstream:
            upstream.sendall(head + rest)
            status = _ResponseWatcher(client)
            out, in_ = relay(status, upstream)
        self.server.proxy._log(
            host,
            port,
            method,
            target,
            status.status,
            out + len(head) + len(rest),
            in_,
            time.monotonic() - started,
            path="/" + path.partition("?")[0],
            usage=status.usage(),
        )


_CAPTURE_LIMIT = 16 << 20  # bytes of a plain-HTTP response kept to read its token usage


class _ResponseWatcher:
    """The client socket, seen by `relay`: remembers the HTTP status of the response and keeps its
    first bytes (up to _CAPTURE_LIMIT) so that the runner can read the token usage itself."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._captured = bytearray()
        self._overflow = False
        self.status: int | None = None

    def sendall(self, data: bytes) -> None:
        if len(self._captured) + len(data) <= _CAPTURE_LIMIT:
            self._captured += data
        else:
            self._overflow = True
        if self.status is None:
            parts = bytes(self._captured[:64]).split(b" ", 2)
            if len(parts) >= 2 and parts[1][:3].isdigit():
                self.status = int(parts[1][:3])
        self._sock.sendall(data)

    def usage(self) -> dict | None:
        """The response's chat completion usage, or None (not one, not readable, too large)."""
        if self._overflow or self.status != 200:
            return None
        head, sep, body = bytes(self._captured).partition(b"\r\n\r\n")
        if not sep:
            return None
        fields = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            fields[name.strip().lower()] = value.strip().lower()
        try:
            if "chunked" in fields.get("transfer-encoding", ""):
                body = _dechunk(body)
            encoding = fields.get("content-encoding", "")
            if encoding in ("gzip", "deflate"):
                inflater = zlib.decompressobj(wbits=47 if encoding == "gzip" else 15)
                body = inflater.decompress(body, _CAPTURE_LIMIT)
            elif encoding not in ("", "identity"):
                return None
        except (ValueError, zlib.error):
            return None
        return usage_from_response(fields.get("content-type", ""), body)

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def fileno(self) -> int:
        return self._sock.fileno()


def _dechunk(body: bytes) -> bytes:
    """The payload of a `Transfer-Encoding: chunked` body (ValueError when it is not one)."""
    out, pos = bytearray(), 0
    while True:
        end = body.index(b"\r\n", pos)
        size = int(body[pos:end].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += body[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    proxy: RecordingProxy


class RecordingProxy:
    """An HTTP/HTTPS-CONNECT proxy on a Unix socket that reaches only allowed hosts and logs everything.

    A context manager: `start()` on entry, `close()` on exit (which ends every open connection).
    """

    def __init__(self, socket_path: str | os.PathLike, allow_hosts, *, max_entries: int = 10_000, connect_timeout: float = 10.0):
        self.socket_path = Path(socket_path)
        self.allowed = [h if isinstance(h, AllowedHost) else parse_allowed_host(str(h)) for h in allow_hosts]
        self.max_entries = max_entries
        self.connect_timeout = connect_timeout
        self.requests: list[dict] = []
        self.denied: list[dict] = []
        self.dropped = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._active = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def _begin(self) -> None:
        with self._lock:
            self._active += 1

    def _end(self) -> None:
        with self._lock:
            self._active -= 1
            self._idle.notify_all()

    def allows(self, host: str, port: int) -> bool:
        return any(a.admits(host, port) for a in self.allowed)

    def _append(self, target: list[dict], entry: dict) -> None:
        with self._lock:
            if len(target) < self.max_entries:
                target.append(entry)
            else:
                self.dropped += 1

    def _log(
        self,
        host,
        port,
        method,
        target,
        status,
        bytes_out,
        bytes_in,
        seconds,
        error=None,
        path: str | None = None,
        usage: dict | None = None,
    ) -> None:
        entry: dict[str, Any] = {
            "host": host,
            "port": port,
            "method": method,
            "target": target,
            "status": status,
            "bytes_out": bytes_out,
            "bytes_in": bytes_in,
            "seconds": round(seconds, 3),
        }
        if error:
            entry["error"] = error
        if path is not None:
            entry["path"] = path
        if usage is not None:
            entry["usage"] = usage
        self._append(self.requests, entry)

    def _deny(self, host, port, method, target, reason) -> None:
        self._append(self.denied, {"host": host, "port": port, "method": method, "target": target, "reason": reason})

    def start(self) -> RecordingProxy:
        server = _Server(str(self.socket_path), _Handler)
        server.proxy = self
        os.chmod(self.socket_path, 0o666)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self, wait: float = 5.0) -> None:
        """Stop accepting, then wait up to `wait` seconds for open requests to end and be logged."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        with self._idle:
            self._idle.wait_for(lambda: self._active == 0, timeout=wait)

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def record(self) -> dict:
        """The manifest's `network` object for this run."""
        with self._lock:
            return {
                "mode": "record",
                "allow_hosts": [str(a) for a in self.allowed],
                "requests": list(self.requests),
                "denied": list(self.denied),
                "dropped": self.dropped,
            }


# --- inside the sandbox: the forwarder --------------------------------------------------------

# Run as `python -I -S -c FORWARDER SOCKET PORT -- ARGV...`: standard library only, so that it starts
# in a few milliseconds. It listens on 127.0.0.1:PORT, forks a child that pipes every connection to
# SOCKET (the child lives until the sandbox ends: bwrap's init kills it with the run), and execs ARGV.
FORWARDER = r"""
import os, selectors, socket, sys, threading

def relay(a, b):
    peer, open_ = {a: b, b: a}, {a, b}
    with selectors.DefaultSelector() as selector:
        for s in open_:
            selector.register(s, selectors.EVENT_READ)
        while open_:
            ready = selector.select(120)
            if not ready:
                return
            for key, _ in ready:
                source = key.fileobj
                try:
                    data = source.recv(65536)
                except OSError:
                    data = b""
                if data:
                    try:
                        peer[source].sendall(data)
                    except OSError:
                        return
                    continue
                selector.unregister(source)
                open_.discard(source)
                try:
                    peer[source].shutdown(socket.SHUT_WR)
                except OSError:
                    pass

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


def forwarder_argv(python: str, socket_path: str, port: int, command: list[str]) -> list[str]:
    """The command that starts the forwarder inside the sandbox and then runs `command`."""
    return [python, "-I", "-S", "-c", FORWARDER, socket_path, str(port), "--", *command]
