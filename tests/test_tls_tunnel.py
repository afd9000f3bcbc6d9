"""A real TLS connection through the sandbox's proxy: a local HTTPS server on 127.0.0.1 with a
self-signed certificate (made here with `cryptography`), allowed with --allow-host; the sandboxed
candidate reaches it through the proxy's CONNECT tunnel with real TLS (certificate checked), the
call succeeds and is logged as an opaque tunnel, and plain bytes sent into a tunnel are still
refused before they reach the server."""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from microctx.candidates.runner import manifest_path
from microctx.cli import main
from tests.tls import self_signed

PROBE = """\
import hashlib, json, os, socket, ssl, sys, urllib.request
submission, cafile, url = sys.argv[1], sys.argv[2], sys.argv[3]
context = ssl.create_default_context(cafile=cafile)  # the server's own certificate, checked
opener = urllib.request.build_opener(urllib.request.ProxyHandler(), urllib.request.HTTPSHandler(context=context))
report = {"proxy": os.environ.get("HTTPS_PROXY")}
with opener.open(url + "/hello", timeout=20) as answer:
    report["tls"] = [answer.status, answer.read().decode()]
proxy = os.environ["HTTPS_PROXY"].split("//", 1)[1].rstrip("/")
host = url.split("//", 1)[1]
with socket.create_connection((proxy.rsplit(":", 1)[0], int(proxy.rsplit(":", 1)[1])), timeout=10) as raw:
    raw.sendall(f"CONNECT {host} HTTP/1.1\\r\\nHost: {host}\\r\\n\\r\\n".encode())
    report["connect"] = raw.recv(4096).decode().split("\\r\\n")[0]
    raw.sendall(f"GET /plain HTTP/1.1\\r\\nHost: {host}\\r\\n\\r\\n".encode())  # no handshake: plain HTTP in the tunnel
    try:
        report["after_plain"] = raw.recv(4096).decode(errors="replace")
    except OSError as exc:
        report["after_plain"] = type(exc).__name__
digest = hashlib.sha256(open("public.json", "rb").read()).hexdigest()
json.dump({"corpus_sha256": digest, "answers": [], "probe": report}, open(submission, "w"))
"""


@pytest.fixture
def tls_server(tmp_path):
    """An HTTPS server on 127.0.0.1 that logs the path of every request it reads (after a handshake)."""
    folder = tmp_path / "tls"
    folder.mkdir()
    cert, key = self_signed(folder)
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            seen.append(self.path)
            data = b"hello over tls"
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], cert, seen
    server.shutdown()
    server.server_close()


def test_a_real_tls_call_goes_through_the_tunnel_and_plain_bytes_in_one_are_refused(s8f, tmp_path, tls_server):
    port, cert, seen = tls_server
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    out = tmp_path / "probe.json"
    allowed = f"127.0.0.1:{port}"
    argv = ["run", "tls-probe", "--public", str(s8f.public), "--submission", str(out)]
    argv += ["--cmd", f"python {script} {{submission}} {cert} https://{allowed}", "--network", "record", "--allow-host", allowed]
    code = main(argv)
    manifest = json.loads(manifest_path(out).read_text())
    assert code == 0, manifest["error"]
    probe = json.loads(out.read_text())["probe"]
    assert probe["tls"] == [200, "hello over tls"] and probe["proxy"].startswith("http://127.0.0.1:")
    assert probe["connect"] == "HTTP/1.1 200 Connection established" and probe["after_plain"] == ""  # closed, no answer
    assert seen == ["/hello"]  # the plain request never reached the server
    requests = manifest["network"]["requests"]
    tunnels = [r for r in requests if r["method"] == "CONNECT"]
    assert len(tunnels) == 2 == len(requests)
    good = next(r for r in tunnels if not r.get("error"))
    assert good["status"] == 200 and good["bytes_in"] > 0 and good["bytes_out"] > 0
    assert "usage" not in good and good.get("path") is None  # opaque: the proxy saw bytes, not the call
    assert [r.get("error") for r in tunnels if r.get("error")] == ["not TLS inside the tunnel (closed)"]
    assert [d["reason"].split(":")[0] for d in manifest["network"]["denied"]] == ["not TLS inside the tunnel"]


def test_the_forwarder_and_the_proxy_share_one_pump(tmp_path):
    """The forwarder runs inside the sandbox without microctx, so its script carries the pump's text;
    the proxy imports the same function. A copy that drifted would be a second `relay`."""
    import socket
    import subprocess
    import sys

    from microctx.candidates import proxy_http, pump
    from microctx.candidates.forwarder import FORWARDER, forwarder_argv

    assert proxy_http.relay is pump.relay
    text = open(pump.__file__, encoding="utf-8").read()
    assert FORWARDER.startswith(text) and FORWARDER.count("def relay(") == 1
    # the script, run as the sandbox runs it (-I -S: no microctx), pipes a connection to a Unix socket
    path = tmp_path / "echo.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen(1)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = forwarder_argv(sys.executable, str(path), port, [sys.executable, "-c", "import time; time.sleep(30)"])
    child = subprocess.Popen(argv, start_new_session=True)  # its own group: the forked pipe goes with it
    try:
        for _ in range(100):
            try:
                client = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                import time

                time.sleep(0.05)
        with client:
            conn, _ = server.accept()
            with conn:
                client.sendall(b"ping")
                assert conn.recv(4) == b"ping"
                conn.sendall(b"pong")
                assert client.recv(4) == b"pong"
    finally:
        import os
        import signal

        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        server.close()
