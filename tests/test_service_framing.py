"""Request framing the service refuses: a line ending that is not CRLF in a request head or a
chunked body's framing lines (a proxy that reads a bare LF or CR differently from h11 would
disagree with the service on a request's headers or where it ends: request smuggling). Each is
answered 400 with the connection closed, nothing served after it, nothing graded or counted;
well-formed pipelined requests and bodies holding bare LFs and CRs are still served. Raw sockets
against the real uvicorn server with `server.DeadlineH11Protocol`."""

from __future__ import annotations

import itertools
import logging
import re
import socket

import orjson
import pytest
from service_support import InProcessService, get, private_answers, submission

CRLF = b"\r\n"
_TEAMS = itertools.count()


@pytest.fixture(scope="module")
def running(tmp_path_factory, synthetic):
    from microctx.service.server import build_service

    folder = tmp_path_factory.mktemp("framing")
    answers = private_answers(synthetic.answers, folder / "private")
    service = build_service(str(answers), str(synthetic.public), f"sqlite:///{folder / 'state.db'}")
    with InProcessService(service) as served:
        served.service = service
        yield served
    service.engine.dispose()


@pytest.fixture(scope="module")
def document(synthetic_answers) -> bytes:
    return orjson.dumps(submission(synthetic_answers))


def _request(method: str, path: str, token: str, content: bytes = b"", endings: dict | None = None, extra=()) -> bytes:
    """One request; `endings` replaces the line ending after head line i (0 the request line, -1
    the blank line ending the head)."""
    lines = [f"{method} {path} HTTP/1.1".encode(), b"Host: x", f"Authorization: Bearer {token}".encode(), *extra]
    if content:
        lines += [b"Content-Type: application/json", b"Content-Length: %d" % len(content)]
    ends = [CRLF] * (len(lines) + 1)
    for index, ending in (endings or {}).items():
        ends[index] = ending
    return b"".join(line + end for line, end in zip(lines, ends, strict=False)) + ends[-1] + content


def _exchange(url: str, data: bytes, *, bytewise: bool = False) -> list[bytes]:
    """Send `data` (whole, or a byte per send), read until the service closes; the statuses."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for piece in [data[i : i + 1] for i in range(len(data))] if bytewise else [data]:
        sock.sendall(piece)
    received = b""
    while chunk := sock.recv(65536):  # b"" once closed: a test hangs (30 s) if it is left open
        received += chunk
    sock.close()
    return re.findall(rb"HTTP/1\.1 (\d{3}) ", received)


def _team(running) -> str:
    from microctx.service.tokens import add_team

    return add_team(running.service.engine, f"team{next(_TEAMS)}")


def _used(url: str, token: str) -> int:
    return get(url, "/v1/quota", token).json()["used_today"]


@pytest.mark.parametrize(
    "endings",
    [{0: b"\n"}, {1: b"\n"}, {-1: b"\n"}, {0: b"\r"}, {1: b"\r"}],
    ids=["request-line-LF", "header-LF", "blank-line-LF", "request-line-CR", "header-CR"],
)
def test_a_head_with_a_line_ending_not_crlf_is_refused(running, document, endings):
    token = _team(running)
    assert _exchange(running.url, _request("POST", "/v1/submissions", token, document, endings)) == [b"400"]
    assert _used(running.url, token) == 0  # nothing graded, nothing counted
    assert _exchange(running.url, _request("POST", "/v1/submissions", token, document, extra=[b"Connection: close"])) == [b"201"]
    assert _used(running.url, token) == 1  # the same request, well formed, is


@pytest.mark.parametrize("bytewise", [False, True], ids=["one-send", "byte-per-send"])
def test_a_bare_lf_request_pipelined_after_a_body_is_refused(running, document, bytewise):
    token = _team(running)
    good = _request("POST", "/v1/submissions", token, document)
    smuggled = _request("GET", "/v1/quota", token, endings={1: b"\n"})
    assert _exchange(running.url, good + smuggled, bytewise=bytewise) == [b"201", b"400"]
    assert _used(running.url, token) == 1


@pytest.mark.parametrize(
    "framing",
    [
        b"%x\n{doc}\r\n0\r\n\r\n",  # chunk-size line (h11 itself refuses this one)
        b"%x;a\rb\r\n{doc}\r\n0\r\n\r\n",  # a bare CR in a chunk extension
        b"%x\r\n{doc}\r\n0\r\nX-Trailer: 1\n\r\n",  # a trailer line
        b"%x\r\n{doc}\r\n0\r\n\n",  # the blank line ending the trailers
    ],
    ids=["chunk-size-LF", "chunk-ext-CR", "trailer-LF", "trailer-end-LF"],
)
def test_chunked_framing_with_a_line_ending_not_crlf_is_refused(running, document, framing):
    token = _team(running)
    head = _request("POST", "/v1/submissions", token, extra=[b"Transfer-Encoding: chunked"])
    body = (framing % len(document)).replace(b"{doc}", document)
    assert _exchange(running.url, head + body) == [b"400"]
    assert _used(running.url, token) == 0


def test_well_formed_pipelined_requests_and_bodies_with_bare_lf_and_cr_are_served(running, document):
    token = _team(running)
    spaced = b"\n\r\n\r" + document.replace(b"{", b"{\n", 3).replace(b",", b",\r", 3)  # JSON whitespace
    assert b"\r\n" not in spaced.replace(b"\n\r\n\r", b"")
    chunked = b"%x\r\n" % len(spaced) + spaced + b"\r\n0\r\nX-Trailer: 1\r\n\r\n"
    pipelined = (
        _request("POST", "/v1/submissions", token, spaced)
        + _request("POST", "/v1/submissions", token, extra=[b"Transfer-Encoding: chunked"])
        + chunked
        + _request("GET", "/v1/leaderboard", token)
        + _request("GET", "/v1/quota", token, extra=[b"Connection: close"])
    )
    assert _exchange(running.url, pipelined) == [b"201", b"201", b"200", b"200"]
    assert _used(running.url, token) == 2


def test_malformed_chunked_framing_after_an_early_answer_closes_quietly(running, caplog):
    """The app answered (401) before the chunked body ended; a bare LF in its trailers then can
    have no 400: the connection is closed, and no fatal protocol error is logged."""
    host, port = running.url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(_request("POST", "/v1/submissions", "nope", extra=[b"Transfer-Encoding: chunked"]) + b"5\r\nhello\r\n")
    received = b""
    while not received.endswith(b"}"):
        received += sock.recv(65536)
    sock.sendall(b"0\r\nX-Trailer: 1\n\r\n")
    assert sock.recv(65536) == b""
    sock.close()
    assert re.findall(rb"HTTP/1\.1 (\d{3}) ", received) == [b"401"]
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR], caplog.text
