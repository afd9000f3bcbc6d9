"""Network record mode: the runner's proxy, which a sandboxed candidate reaches through its socket.

A sandboxed candidate has its own network namespace holding only a loopback interface: it can
reach nothing. In record mode the runner starts a `RecordingProxy` listening on a Unix socket in
the run's folder; the socket is bound read-only into the sandbox, and a forwarder inside
(microctx.candidates.forwarder) listens on `127.0.0.1:PORT` and pipes every connection to it.
The candidate gets `HTTP_PROXY`/`HTTPS_PROXY` (and the lower-case names) pointing there.

The proxy parses HTTP with a real parser (h11; microctx.candidates.proxy_http) and speaks the
two forms every HTTP client uses through a proxy, one request per connection:
- `CONNECT host:port` (HTTPS): the bytes are relayed as they are, TLS stays end to end. The
  tunnel must carry TLS: its first bytes must be a TLS handshake, and port 80 is refused, so that
  plain HTTP (whose calls the runner counts) cannot hide inside a tunnel;
- an absolute-URI request (`GET http://host[:port]/path HTTP/1.1`): parsed strictly (no bare LF,
  valid framing, chunked bodies validated), sent to the host in origin form with `Connection:
  close` and the `Proxy-*` headers removed; the response is parsed the same way (a malformed
  reply ends the exchange, logged with its error). A second request pipelined on the connection
  is refused and listed as denied.
Only the allowed targets are reached: `HOST` allows ports 80 and 443, `HOST:PORT` that port alone
(names compare case-insensitively; an IP literal is a name like any other). Anything else, and
every malformed request, is answered with an error status and listed in `denied` with a reason.

`requests` holds one entry per request or tunnel: `host`, `port`, `method`, `target`, `status`
(the upstream's HTTP status; 200 for an established tunnel; 502 when the host could not be
reached), `bytes_out`, `bytes_in`, `seconds`; a plain-HTTP request also `path`, and `usage` when
its response is a chat completion carrying token usage (microctx.candidates.usage). A request
still open when the run ends is listed all the same, with `cut_off` true. Each list keeps at most
`max_entries` entries; `dropped` counts the rest.

The proxy's own work is bounded, since it runs in the runner, outside the run's cgroup: at most
`max_connections` connections at once (more are closed at once, without a thread), and at most
`buffer_bytes` (an eighth of the run's memory limit, at most 64 MiB) held for request bodies and
the responses it reads for usage, across all connections. A candidate that passes a bound has
its connection refused and `overload` set: the runner fails the run with that reason.
"""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from microctx.candidates.forwarder import DEFAULT_PORT, forwarder_argv  # noqa: F401  (the runner's seam)
from microctx.candidates.proxy_http import handle_connection, split_host_port
from microctx.errors import InputError

MAX_CONNECTIONS = 256
LINGERING_FACTOR = 2  # handlers of connections the candidate closed: at most this many times the cap
MAX_BUFFER = 64 << 20


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
    try:
        host, port = split_host_port(value, 0)
    except ValueError as exc:
        raise InputError("--allow-host", str(exc)) from None
    return AllowedHost(host.lower(), port or None)


class RecordingProxy:
    """An HTTP/HTTPS-CONNECT proxy on a Unix socket that reaches only allowed hosts and logs everything.

    A context manager: `start()` on entry, `close()` on exit (which ends every open connection
    and lists the requests still open as cut off)."""

    def __init__(
        self,
        socket_path: str | os.PathLike,
        allow_hosts,
        *,
        max_entries: int = 10_000,
        connect_timeout: float = 10.0,
        memory_bytes: int | None = None,
        max_connections: int = MAX_CONNECTIONS,
        plain_only: tuple[tuple[str, int], ...] = (),
    ):
        self.socket_path = Path(socket_path)
        self.allowed = [h if isinstance(h, AllowedHost) else parse_allowed_host(str(h)) for h in allow_hosts]
        self.max_entries = max_entries
        self.connect_timeout = connect_timeout
        self.max_connections = max_connections
        self.buffer_bytes = min(MAX_BUFFER, memory_bytes // 8) if memory_bytes else MAX_BUFFER
        self.plain_only = {(h.lower(), p) for h, p in plain_only}  # never through a tunnel (the gateway's host)
        self.requests: list[dict] = []
        self.denied: list[dict] = []
        self.dropped = 0
        self.overload = ""  # a bound of the proxy's own work the candidate passed (the run fails)
        self.gateway: Any = None  # a microctx.candidates.gateway.Gateway serving http://model.gateway
        self.secrets: list[str] = []  # passed secrets' values: removed from what is logged before it is cut
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._open: dict[int, dict] = {}  # requests in flight, by id
        self._sockets: set[socket.socket] = set()  # connections the candidate holds open (the cap counts these)
        self._lingering: set[socket.socket] = set()  # closed by the candidate, their handler not yet ended
        self._buffered = 0
        self._next_id = 0
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    # --- bounds ---------------------------------------------------------------------------

    def _overloaded(self, why: str) -> None:
        with self._lock:
            self.overload = self.overload or why

    def reserve(self, size: int) -> bool:
        """Take `size` bytes of the shared buffer budget; False (and the run overloaded) past it."""
        with self._lock:
            if self._buffered + size > self.buffer_bytes:
                self.overload = self.overload or (
                    f"the candidate's requests and responses took more than the proxy's buffer of "
                    f"{self.buffer_bytes} bytes (an eighth of --memory, at most {MAX_BUFFER})"
                )
                return False
            self._buffered += size
            return True

    def release(self, size: int) -> None:
        with self._lock:
            self._buffered -= size

    def allows(self, host: str, port: int) -> bool:
        return any(a.admits(host, port) for a in self.allowed)

    # --- the log ---------------------------------------------------------------------------

    def _append(self, target: list[dict], entry: dict) -> None:
        with self._lock:
            if len(target) < self.max_entries:
                target.append(entry)
            else:
                self.dropped += 1

    def begin(self, host: str, port: int, method: str, target: str) -> int:
        """Open a log entry for a request that is about to reach its host; returns its id."""
        entry = {"host": host, "port": port, "method": method, "target": target, "status": None}
        entry.update(bytes_out=0, bytes_in=0, started=time.monotonic())
        with self._lock:
            self._next_id += 1
            self._open[self._next_id] = entry
            return self._next_id

    def update(self, request_id: int, **fields: Any) -> None:
        with self._lock:
            if request_id in self._open:
                self._open[request_id].update(fields)

    def end(self, request_id: int, **fields: Any) -> None:
        """Close the entry and list it in `requests`."""
        with self._lock:
            entry = self._open.pop(request_id, None)
        if entry is not None:
            if "error" in fields:
                fields["error"] = self.shown(fields["error"], 300)
            entry.update(fields)
            self._append(self.requests, _finished(entry))

    def log(self, host, port, method, target, status, bytes_out, bytes_in, seconds, **fields: Any) -> None:
        """A request logged at once (one that never reached its host: 502)."""
        request_id = self.begin(host, port, method, target)
        self.end(request_id, status=status, bytes_out=bytes_out, bytes_in=bytes_in, started=time.monotonic() - seconds, **fields)

    def deny(self, host, port, method, target, reason) -> None:
        entry = {
            "host": host,
            "port": port,
            "method": method,
            "target": self.shown(target, 200),
            "reason": self.shown(reason, 300),
        }
        self._append(self.denied, entry)

    def shown(self, text: object, limit: int) -> str:
        """`text` as the log keeps it: every passed secret's value removed, then cut to `limit`
        characters (in that order: a secret cut in half no longer matches). The proxy's code cuts
        nothing a candidate sent before it reaches here."""
        from microctx.candidates.run_files import redact

        return redact(str(text), self.secrets)[:limit]

    # --- serving ---------------------------------------------------------------------------

    def start(self) -> RecordingProxy:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o666)
        listener.listen(128)
        listener.settimeout(0.1)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()
        return self

    def _accept_loop(self) -> None:
        listener = self._listener
        while listener is not None and self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                full = self._full()
                if not full:
                    self._sockets.add(client)
            if full:
                client.close()
                self._overloaded(f"more than {self.max_connections} connections at once to the proxy (its cap)")
                self.deny("", 0, "?", "", f"connection refused: more than {self.max_connections} at once")
                continue
            threading.Thread(target=self._serve, args=(client, handle_connection), daemon=True).start()

    def _full(self) -> bool:
        """True when the candidate holds `max_connections` open, or LINGERING_FACTOR times as many closed
        ones still have a handler (so the runner's threads stay under three times the cap). Called with
        the lock held.

        Connections are counted by open socket, not by handler alive: a handler may outlive its
        connection (a response whose end is the host's close, a streamed answer the candidate read to
        its last event and hung up on, a handler starved of the GIL among the runner's threads), and
        counting those made an 8-way run meet the cap. So at the cap, the connections the candidate
        has closed (poll: POLLRDHUP or POLLHUP) move to `_lingering` first."""
        lingering_cap = LINGERING_FACTOR * self.max_connections
        if len(self._sockets) < self.max_connections:
            return len(self._lingering) >= lingering_cap
        poller = select.poll()
        by_fd: dict[int, socket.socket] = {}
        for sock in self._sockets:
            try:
                by_fd[sock.fileno()] = sock
                poller.register(sock, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
            except (OSError, ValueError):
                continue
        for fd, _ in poller.poll(0):
            closed = by_fd.get(fd)
            if closed is not None:
                self._sockets.discard(closed)
                self._lingering.add(closed)
        return len(self._sockets) >= self.max_connections or len(self._lingering) >= lingering_cap

    def _serve(self, client: socket.socket, handler) -> None:
        try:
            handler(self, client)
        except Exception as exc:  # noqa: BLE001  (never a crash of the runner: the request is denied)
            self.deny("", 0, "?", "", f"the proxy could not handle the request: {type(exc).__name__}")
        finally:
            client.close()
            with self._idle:
                self._sockets.discard(client)
                self._lingering.discard(client)
                self._idle.notify_all()

    def close(self, wait: float = 2.0) -> None:
        """Stop accepting, give open requests `wait` seconds to end, then cut the rest off."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
            if self._thread is not None:
                self._thread.join()
        with self._idle:
            self._idle.wait_for(lambda: not self._sockets and not self._lingering, timeout=wait)
            for sock in [*self._sockets, *self._lingering]:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            self._idle.wait_for(lambda: not self._sockets and not self._lingering, timeout=wait)
        with self._lock:
            still_open, self._open = list(self._open.values()), {}
        for entry in still_open:
            self._append(self.requests, {**_finished(entry), "cut_off": True})

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def record(self) -> dict:
        """The manifest's `network` object for this run."""
        with self._lock:
            still_open = [{**_finished(dict(e)), "cut_off": True} for e in self._open.values()]
            return {
                "mode": "record",
                "allow_hosts": [str(a) for a in self.allowed],
                "requests": list(self.requests) + still_open,
                "denied": list(self.denied),
                "dropped": self.dropped,
            }


def _finished(entry: dict) -> dict:
    started = entry.pop("started", None)
    if started is not None:
        entry["seconds"] = round(time.monotonic() - started, 3)
    return entry
