"""One connection to the recording proxy, parsed with h11 (see microctx.candidates.network).

`handle_connection(proxy, client)` reads one request head (at most 64 KiB; a head with a bare LF
or a stray CR is refused before any parsing), parses it with h11, and either relays a CONNECT
tunnel that carries TLS or forwards one absolute-URI request, re-framed by h11 on both sides.
Every refusal is answered with an HTTP error and listed in the proxy's `denied`.
"""

from __future__ import annotations

import re
import socket
import time
import zlib
from typing import Any
from urllib.parse import urlsplit

import h11

from microctx.candidates.pump import IDLE_SECONDS as _IDLE_SECONDS
from microctx.candidates.pump import relay
from microctx.candidates.usage import usage_from_response

_HEAD_LIMIT = 64 * 1024
_BODY_LIMIT = 16 << 20  # a request body, and the part of a response read for its usage
_HOP = {b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer", b"upgrade", b"transfer-encoding"}
_HOP |= {b"content-length", b"host"}


class Refused(Exception):
    """A request the proxy refuses: (status, reason for the log)."""

    def __init__(self, status: int, reason: str, method: str = "?", target: str = "", host: str = "", port: int = 0):
        super().__init__(reason)
        self.status, self.reason, self.method, self.target, self.host, self.port = status, reason, method, target, host, port


def reply(client: socket.socket, status: int, text: str) -> None:
    body = f"{status} {text} (microctx network record mode)\n".encode()
    head = f"HTTP/1.1 {status} {text}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
    try:
        client.sendall(head + body)
    except OSError:
        pass


_REASONS = {
    400: "Bad Request",
    403: "Forbidden",
    404: "Not Found",
    413: "Payload Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def handle_connection(proxy: Any, client: socket.socket) -> None:
    client.settimeout(30)
    try:
        _handle(proxy, client)
    except Refused as exc:
        proxy.deny(exc.host, exc.port, exc.method, exc.target, exc.reason)
        reply(client, exc.status, _REASONS.get(exc.status, "Error"))
    except OSError:
        pass  # the candidate or the host went away mid-request; what was logged stays


_BARE = re.compile(rb"(?<!\r)\n|\r(?=[^\n])")


def _read_head(client: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        if _BARE.search(data):  # refused at once, before the head is complete
            raise Refused(400, "a bare LF or CR in the request head (refused: strict framing)", target=data.decode("latin-1"))
        try:
            chunk = client.recv(65536)
        except TimeoutError:
            chunk = b""
        if not chunk:
            why = "a bare LF in the request head" if b"\n\n" in data else "the request head was not complete HTTP"
            raise Refused(400, why, target=data.decode("latin-1"))
        data += chunk
        if len(data) > _HEAD_LIMIT and b"\r\n\r\n" not in data[: _HEAD_LIMIT + 4]:
            raise Refused(400, f"the request head is longer than {_HEAD_LIMIT} bytes")
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.replace(b"\r\n", b"")
    if b"\n" in lines or b"\r" in lines:
        raise Refused(400, "a bare LF or CR in the request head (refused: strict framing)", target=head.decode("latin-1"))
    return head + b"\r\n\r\n", rest


def _handle(proxy: Any, client: socket.socket) -> None:
    head, rest = _read_head(client)
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=_HEAD_LIMIT)
    conn.receive_data(head)
    try:
        event = conn.next_event()
    except h11.RemoteProtocolError as exc:
        raise Refused(400, f"not an HTTP request: {exc}", target=head.split(b"\r\n")[0].decode("latin-1")) from None
    if not isinstance(event, h11.Request):
        raise Refused(400, "not an HTTP request line")
    method, target = event.method.decode("ascii", "replace"), event.target.decode("latin-1")
    if method == "CONNECT":
        _tunnel(proxy, client, target, rest)
    elif target[:7].lower() == "http://":
        if rest:  # (b"" would tell h11 the candidate closed its side)
            conn.receive_data(rest)
        _forward(proxy, client, conn, event)
    else:
        raise Refused(400, "only CONNECT and http:// absolute-URI requests pass the proxy", method, target)


def _connect(proxy: Any, host: str, port: int) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=proxy.connect_timeout)
    sock.settimeout(_IDLE_SECONDS)
    return sock


def split_host_port(text: str, default_port: int | None = None) -> tuple[str, int]:
    """`HOST[:PORT]` or `[IPv6][:PORT]` -> (host, port); ValueError when it is not one (a port
    outside 1-65535, more than five digits, a stray bracket or character)."""
    host, port = text, None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"unclosed bracket in {text!r}")
        host, rest = text[1:end], text[end + 1 :]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"expected HOST[:PORT], got {text!r}")
            port = rest[1:]
    elif text.count(":") == 1:
        host, port = text.split(":")
    elif ":" in text:
        raise ValueError(f"an IPv6 address must be in brackets: {text!r}")
    if not host or any(c in host for c in "/ @?#[]\\") or any(ord(c) < 33 or ord(c) > 126 for c in host):
        raise ValueError(f"expected HOST[:PORT], got {text!r}")
    if port is None:
        if default_port is None:
            raise ValueError(f"a port is needed in {text!r}")
        return host, default_port
    if not (port.isascii() and port.isdigit()) or len(port) > 5 or not 0 < int(port) < 65536:
        raise ValueError(f"port must be 1-65535 in {text!r}")
    return host, int(port)


# --- CONNECT -------------------------------------------------------------------------------


def _tunnel(proxy: Any, client: socket.socket, target: str, rest: bytes) -> None:
    try:
        host, port = split_host_port(target)
    except ValueError as exc:
        raise Refused(400, f"a malformed CONNECT target: {exc}", "CONNECT", target) from None
    if (host.lower(), port) in proxy.plain_only or port == 80:
        why = "served in plain HTTP: send absolute-URI requests (http://...), so that each one is counted, not a tunnel"
        raise Refused(403, why, "CONNECT", target, host, port)
    if not proxy.allows(host, port):
        raise Refused(403, "host not allowed (see --allow-host)", "CONNECT", target, host, port)
    started = time.monotonic()
    try:
        upstream = _connect(proxy, host, port)
    except (OSError, ValueError) as exc:
        proxy.log(host, port, "CONNECT", target, 502, 0, 0, time.monotonic() - started, error=str(exc))
        reply(client, 502, "Bad Gateway")
        return
    request_id = proxy.begin(host, port, "CONNECT", target)
    with upstream:
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        first = _first_bytes(client, rest)
        if not (len(first) >= 3 and first[0] == 0x16 and first[1] == 0x03):
            proxy.end(request_id, status=200, bytes_out=0, error="not TLS inside the tunnel (closed)")
            proxy.deny(host, port, "CONNECT", target, "not TLS inside the tunnel: plain HTTP must go as absolute-URI requests")
            return
        upstream.sendall(first)
        out, in_ = relay(client, upstream)
    proxy.end(request_id, status=200, bytes_out=out + len(first), bytes_in=in_)


def _first_bytes(client: socket.socket, rest: bytes) -> bytes:
    data = rest
    while len(data) < 3:
        chunk = client.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


# --- absolute-URI requests -----------------------------------------------------------------


def _destination(proxy: Any, method: str, target: str) -> tuple[str, int, str, str]:
    """(host, port, authority, origin-form path) of an absolute http:// URI; Refused otherwise."""
    try:
        parts = urlsplit(target)
        if "@" in parts.netloc:
            raise ValueError("user information in the URL")
        host, port = split_host_port(parts.netloc, 80)
    except ValueError as exc:
        raise Refused(400, f"a malformed URL: {exc}", method, target) from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return host, port, parts.netloc, path


def read_body(proxy: Any, client: socket.socket, conn: h11.Connection, method: str, target: str) -> bytes:
    """The request's body (de-chunked, checked by h11), at most _BODY_LIMIT bytes of the buffer budget."""
    body = bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            raise Refused(400, f"a malformed request body: {exc}", method, target) from None
        if event is h11.NEED_DATA:
            chunk = client.recv(65536)
            if not chunk:
                raise Refused(400, "the request body was cut off", method, target)
            conn.receive_data(chunk)
        elif isinstance(event, h11.Data):
            if len(body) + len(event.data) > _BODY_LIMIT or not proxy.reserve(len(event.data)):
                raise Refused(413, "the request body is larger than the proxy's buffer", method, target)
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return bytes(body)
        else:
            raise Refused(400, "an unexpected HTTP event", method, target)


def _forward(proxy: Any, client: socket.socket, conn: h11.Connection, request: h11.Request) -> None:
    method, target = request.method.decode("ascii", "replace"), request.target.decode("latin-1")
    host, port, authority, path = _destination(proxy, method, target)
    if proxy.gateway is not None and proxy.gateway.serves(host, port):
        proxy.gateway.handle(proxy, client, conn, request, path)
        return
    if (host.lower(), port) in proxy.plain_only or not proxy.allows(host, port):
        raise Refused(403, "host not allowed (see --allow-host)", method, target, host, port)
    body = read_body(proxy, client, conn, method, target)
    if conn.trailing_data[0]:  # never sent on: one request per connection
        proxy.deny(host, port, method, target, "a second request on the connection (refused: one request per connection)")
    headers = [(k, v) for k, v in request.headers if k.lower() not in _HOP and not k.lower().startswith(b"proxy-")]
    headers = [(b"host", authority.encode("latin-1")), *headers, (b"connection", b"close")]
    headers.append((b"content-length", str(len(body)).encode()))
    upstream_conn = h11.Connection(h11.CLIENT)
    wire = upstream_conn.send(h11.Request(method=request.method, target=path.encode("latin-1"), headers=headers))
    wire = (wire or b"") + (upstream_conn.send(h11.Data(data=body)) or b"") + (upstream_conn.send(h11.EndOfMessage()) or b"")
    started = time.monotonic()
    try:
        upstream = _connect(proxy, host, port)
    except (OSError, ValueError) as exc:
        proxy.log(host, port, method, target, 502, 0, 0, time.monotonic() - started, error=str(exc), path=path)
        reply(client, 502, "Bad Gateway")
        return
    request_id = proxy.begin(host, port, method, target)
    proxy.update(request_id, path=path.partition("?")[0], bytes_out=len(wire))
    try:
        with upstream:
            upstream.sendall(wire)
            fields = relay_response(proxy, request_id, upstream, upstream_conn, client, conn)
    finally:
        proxy.release(len(body))
    proxy.end(request_id, **fields)


def relay_response(
    proxy: Any,
    request_id: int,
    upstream: socket.socket,
    up: h11.Connection,
    client: socket.socket,
    down: h11.Connection,
) -> dict:
    """Parse the host's response with h11 and send it on to the candidate, re-framed; read its
    usage from what it carried. Returns the log entry's fields (`status`, `bytes_in`, `usage`, `error`)."""
    status, sent, captured, ctype, encoding = None, 0, bytearray(), "", ""
    reserved = 0
    try:
        while True:
            event = up.next_event()
            if event is h11.NEED_DATA:
                chunk = upstream.recv(65536)
                up.receive_data(chunk)  # b"" marks the end: h11 tells a cut-off reply from a whole one
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                fields = {k.lower(): v.decode("latin-1").lower() for k, v in event.headers}
                ctype, encoding = fields.get(b"content-type", ""), fields.get(b"content-encoding", "")
                kept = [(k, v) for k, v in event.headers if k.lower() not in _HOP - {b"content-length", b"transfer-encoding"}]
                sent += _send(client, down, h11.Response(status_code=status, headers=[*kept, (b"connection", b"close")]))
            elif isinstance(event, h11.Data):
                sent += _send(client, down, h11.Data(data=event.data))
                if len(captured) + len(event.data) <= _BODY_LIMIT and proxy.reserve(len(event.data)):
                    captured += event.data
                    reserved += len(event.data)
                proxy.update(request_id, status=status, bytes_in=sent)
            elif isinstance(event, h11.EndOfMessage):
                sent += _send(client, down, h11.EndOfMessage())
                usage = _usage(status, ctype, encoding, bytes(captured)) if reserved == len(captured) else None
                return {"status": status, "bytes_in": sent, "usage": usage} if usage else {"status": status, "bytes_in": sent}
            else:
                return {"status": status, "bytes_in": sent, "error": "the host closed the connection mid-response"}
    except h11.RemoteProtocolError as exc:
        return {"status": status, "bytes_in": sent, "error": f"a malformed response from the host: {exc}"}
    except (OSError, h11.LocalProtocolError) as exc:
        return {"status": status, "bytes_in": sent, "error": f"the exchange broke off: {exc}"}
    finally:
        proxy.release(reserved)


def _send(client: socket.socket, down: h11.Connection, event: Any) -> int:
    data = down.send(event) or b""
    client.sendall(data)
    return len(data)


def _usage(status: int | None, ctype: str, encoding: str, body: bytes) -> dict | None:
    if status != 200:
        return None
    try:
        if encoding in ("gzip", "deflate"):
            body = zlib.decompressobj(wbits=47 if encoding == "gzip" else 15).decompress(body, _BODY_LIMIT)
        elif encoding not in ("", "identity"):
            return None
    except zlib.error:
        return None
    return usage_from_response(ctype, body)
