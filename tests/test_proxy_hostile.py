"""The recording proxy, attacked: forged counts, smuggling, malformed messages, and the runner's own bounds.

Each test talks to a RecordingProxy on its Unix socket as a hostile candidate would, with a local
upstream that counts what really reached it (or answers with a malformed reply on purpose)."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from microctx.candidates.network import RecordingProxy
from microctx.candidates.runner import manifest_path
from microctx.cli import main

HERE = Path(__file__).resolve().parent


class Listener:
    """A TCP server on 127.0.0.1 (its `port`) handing each connection to `_one` on its own thread."""

    def __init__(self, backlog: int):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        raise NotImplementedError


class Upstream(Listener):
    """A raw TCP server on 127.0.0.1 that records each request head it reads and answers `reply`
    (after `delay` seconds)."""

    def __init__(self, reply: bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", delay: float = 0.0):
        self.reply, self.delay, self.heads = reply, delay, []
        super().__init__(16)

    def _one(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            conn.settimeout(5)
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                time.sleep(0.2)  # let anything pipelined behind the first request arrive too
                conn.setblocking(False)
                try:
                    data += conn.recv(65536)
                except BlockingIOError:
                    pass
                conn.setblocking(True)
                self.heads.append(data)
                time.sleep(self.delay)
                conn.sendall(self.reply)
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def _send(path: Path, data: bytes, timeout: float = 10) -> bytes:
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(timeout)
        client.connect(str(path))
        try:
            client.sendall(data)
        except OSError:
            pass  # the proxy refused before reading it all: its reply is still there
        got = b""
        try:
            while chunk := client.recv(65536):
                got += chunk
        except OSError:
            pass
        return got


@pytest.fixture
def upstream():
    server = Upstream()
    yield server
    server.close()


def test_calls_inside_a_tunnel_to_a_plain_http_host_are_refused(tmp_path, upstream):
    allowed = f"127.0.0.1:{upstream.port}"
    with RecordingProxy(tmp_path / "p.sock", [allowed]) as proxy:
        calls = b"".join(
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {allowed}\r\nContent-Length: 2\r\n\r\n{{}}".encode() for _ in range(25)
        )
        got = _send(tmp_path / "p.sock", f"CONNECT {allowed} HTTP/1.1\r\nHost: {allowed}\r\n\r\n".encode() + calls)
        assert _send(tmp_path / "p.sock", b"CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: x\r\n\r\n").startswith(b"HTTP/1.1 403")
    assert got == b"HTTP/1.1 200 Connection established\r\n\r\n" and upstream.heads == []  # not one call reached the host
    record = proxy.record()
    assert [r["error"] for r in record["requests"]] == ["not TLS inside the tunnel (closed)"]
    reasons = [d["reason"].split(":")[0] for d in record["denied"]]
    assert reasons == ["not TLS inside the tunnel", "served in plain HTTP"]


def test_bare_lf_smuggling_and_pipelining_reach_the_host_as_one_request(tmp_path, upstream):
    target = f"http://127.0.0.1:{upstream.port}"
    host = f"Host: 127.0.0.1:{upstream.port}"
    with RecordingProxy(tmp_path / "p.sock", [f"127.0.0.1:{upstream.port}"]) as proxy:
        smuggled = f"GET {target}/a HTTP/1.1\n{host}\n\nGET {target}/b HTTP/1.1\n{host}\n\nGET {target}/c HTTP/1.1\n{host}\n\n"
        assert _send(tmp_path / "p.sock", smuggled.encode(), timeout=2).startswith(b"HTTP/1.1 400")
        lf_inside = f"GET {target}/a HTTP/1.1\r\n{host}\nX: 1\r\n\r\n"
        assert _send(tmp_path / "p.sock", lf_inside.encode()).startswith(b"HTTP/1.1 400")
        pipelined = "".join(f"GET {target}/{name} HTTP/1.1\r\n{host}\r\n\r\n" for name in "xyz")
        assert _send(tmp_path / "p.sock", pipelined.encode()).endswith(b"ok")
    assert [h.split(b" ")[1] for h in upstream.heads] == [b"/x"] and upstream.heads[0].count(b"GET") == 1
    record = proxy.record()
    assert [(r["path"], r["status"]) for r in record["requests"]] == [("/x", 200)]
    reasons = [d["reason"] for d in record["denied"]]
    assert len(reasons) == 3 and reasons[2].startswith("a second request on the connection")
    assert all("bare LF" in r for r in reasons[:2])


def test_a_request_open_when_the_run_ends_is_logged_as_cut_off(tmp_path):
    slow = Upstream(delay=30)
    try:
        with RecordingProxy(tmp_path / "p.sock", [f"127.0.0.1:{slow.port}"]) as proxy:
            request = f"GET http://127.0.0.1:{slow.port}/slow HTTP/1.1\r\nHost: 127.0.0.1:{slow.port}\r\n\r\n".encode()
            threading.Thread(target=_send, args=(tmp_path / "p.sock", request, 30), daemon=True).start()
            time.sleep(0.6)
            started = time.monotonic()
            proxy.close(wait=0.5)
            assert time.monotonic() - started < 3
        (entry,) = proxy.record()["requests"]
        assert entry["path"] == "/slow" and entry["cut_off"] is True and entry["status"] is None
    finally:
        slow.close()


def test_a_malformed_chunked_reply_ends_the_exchange_and_no_thread_spins(tmp_path):
    bad = Upstream(reply=b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n" + b"x" * 100)
    before = threading.active_count()
    try:
        with RecordingProxy(tmp_path / "p.sock", [f"127.0.0.1:{bad.port}"]) as proxy:
            got = _send(tmp_path / "p.sock", f"GET http://127.0.0.1:{bad.port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        (entry,) = proxy.record()["requests"]
        assert entry["error"].startswith("a malformed response from the host") and b"hello" in got
        assert "usage" not in entry
    finally:
        bad.close()
    time.sleep(0.3)
    assert threading.active_count() <= before + 1  # the upstream's accept thread; no handler left running


def test_a_malformed_connect_is_a_denial_not_a_crash(tmp_path, upstream):
    with RecordingProxy(tmp_path / "p.sock", [f"127.0.0.1:{upstream.port}"]) as proxy:
        for target in ("[::1]:99999999999999999999", "[::1", "host:0", "a:b:c", "h\x01st:443", ":443"):
            assert _send(tmp_path / "p.sock", f"CONNECT {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode()).startswith(
                b"HTTP/1.1 400"
            )
        ok = _send(tmp_path / "p.sock", f"GET http://127.0.0.1:{upstream.port}/after HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert ok.endswith(b"ok")  # still serving
    assert len(proxy.record()["denied"]) == 6 and len(proxy.record()["requests"]) == 1


def test_connection_and_buffer_caps_fail_the_run_not_the_runner(tmp_path, upstream):
    before = threading.active_count()
    with RecordingProxy(tmp_path / "p.sock", [f"127.0.0.1:{upstream.port}"], memory_bytes=64 << 20, max_connections=16) as proxy:
        idle = []
        for _ in range(200):
            sock = socket.socket(socket.AF_UNIX)
            sock.connect(str(tmp_path / "p.sock"))
            idle.append(sock)
        time.sleep(0.5)
        assert threading.active_count() <= before + 1 + 16  # the accept loop and at most the cap of handlers
        for sock in idle:
            sock.close()
    assert proxy.overload.startswith("more than 16 connections at once")
    big = b"x" * (9 << 20)  # over the buffer of 64 MiB / 8
    with RecordingProxy(tmp_path / "q.sock", [f"127.0.0.1:{upstream.port}"], memory_bytes=64 << 20) as proxy:
        head = f"POST http://127.0.0.1:{upstream.port}/ HTTP/1.1\r\nHost: x\r\nContent-Length: {len(big)}\r\n\r\n".encode()
        assert _send(tmp_path / "q.sock", head + big).startswith(b"HTTP/1.1 413")
    assert "more than the proxy's buffer of 8388608 bytes" in proxy.overload and upstream.heads == []


class SlowClose(Listener):
    """A host whose answers end with its close (no length), which it holds for `hold` seconds: each
    proxy handler outlives the candidate's connection, as under a starved runner."""

    def __init__(self, hold: float):
        self.hold, self.served = hold, 0
        super().__init__(64)

    def _one(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhello")
                self.served += 1
                time.sleep(self.hold)
            except OSError:
                pass


def test_connections_the_candidate_closed_do_not_count_against_the_cap(tmp_path):
    """The cap counts open sockets, not live handlers; handlers of closed connections are bounded too."""
    host = SlowClose(hold=5.0)
    before = set(threading.enumerate())  # threads of earlier tests are not this proxy's handlers
    request = f"GET http://127.0.0.1:{host.port}/ HTTP/1.1\r\nHost: x\r\n\r\n".encode()

    def one() -> bytes:
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(5)
            client.connect(str(tmp_path / "p.sock"))
            got = b""
            try:
                client.sendall(request)
                while b"hello" not in got:
                    chunk = client.recv(65536)
                    if not chunk:
                        break
                    got += chunk
            except OSError:
                pass  # refused at the cap
            return got  # and hang up before the host has ended its answer

    try:
        with RecordingProxy(tmp_path / "p.sock", [f"127.0.0.1:{host.port}"], max_connections=4) as proxy:
            answers = [one() for _ in range(8)]  # twice the cap, one after the other: each closed before the next
            assert all(a.startswith(b"HTTP/1.1 200") and a.endswith(b"hello\r\n") for a in answers), answers
            assert proxy.overload == ""  # counted by thread alive, the fifth was refused
            for _ in range(8):  # a candidate that opens and drops connections: the handlers left are bounded
                one()
            handlers = [t for t in threading.enumerate() if t not in before and t.name.endswith("(_serve)")]  # this proxy's
            assert 4 < len(handlers) <= 4 + 2 * 4  # past the cap (closed ones linger), within the cap and the lingering bound
            assert proxy.overload.startswith("more than 4 connections at once")
            proxy.close(wait=0.2)
    finally:
        host.sock.close()


def test_a_submission_past_the_runners_read_cap_fails_the_run(s8f, tmp_path):
    script = tmp_path / "big.py"
    script.write_text("import sys\nwith open(sys.argv[1], 'w') as f:\n    f.write('{\"answers\": [' + ' ' * (20 << 20) + ']}')\n")
    out = tmp_path / "out.json"
    code = main(
        [
            "run",
            "big",
            "--public",
            str(s8f.public),
            "--submission",
            str(out),
            "--memory",
            "64M",
            "--cmd",
            f"python {script} {{submission}}",
        ]
    )
    manifest = json.loads(manifest_path(out).read_text())
    assert code == 1 and not out.exists()
    assert manifest["error"] == "invalid submission: submission.json is larger than 16777216 bytes (refused)"
