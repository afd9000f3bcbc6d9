"""Local HTTP servers for the fetch and download tests (127.0.0.1, a free port, a daemon thread).

`FakeGitHub` plays the GitHub REST issues endpoint: it serves REST issue objects (built from real
s8f records by `rest_issue`) in pages linked by `Link` headers, filters by `state`, and replays
planted faults per page (a 403 with a rate-limit reset, a 502, ...). It records every request
(path and headers) so tests can check what the client sent.

`FileServer` serves fixed bytes by name, for the downloads of the published files.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

REPO_ID = 4242  # GitHub's next links use /repositories/{id}/issues; ours do too, so the client must follow them


def rest_issue(record: dict, owner_repo: str, *, null_body: bool = False) -> dict:
    """A public s8f record turned back into a REST API issue object (snake_case, state lower
    case, labels as objects, html_url), with the extra keys the API carries."""
    number = record["number"]
    api = f"https://api.github.com/repos/{owner_repo}/issues/{number}"
    return {
        "url": api,
        "repository_url": f"https://api.github.com/repos/{owner_repo}",
        "html_url": record["url"],
        "id": 900_000 + number,
        "node_id": f"I_node{number}",
        "number": number,
        "title": record["title"],
        "user": {"login": "someone", "id": 1, "type": "User"},
        "labels": [
            {"id": 7000 + i, "name": name, "color": "ededed", "default": False, "description": None}
            for i, name in enumerate(record["labels"] or [])
        ],
        "state": record["state"].lower(),
        "locked": False,
        "assignees": [],
        "comments": 0,
        "created_at": record["created_at"],
        "updated_at": record["updated_at"],
        "closed_at": record["closed_at"],
        "author_association": "OWNER",
        "body": None if null_body else record["body"],
        "reactions": {"total_count": 0},
    }


def rest_pull_request(number: int, owner_repo: str) -> dict:
    """A pull request as the issues endpoint lists it: an issue object with a `pull_request` key."""
    return {
        "url": f"https://api.github.com/repos/{owner_repo}/issues/{number}",
        "html_url": f"https://github.com/{owner_repo}/pull/{number}",
        "number": number,
        "title": f"A pull request #{number}",
        "body": "Fixes things.",
        "state": "open",
        "labels": [],
        "created_at": "2026-08-09T00:00:00Z",
        "updated_at": "2026-08-09T00:00:00Z",
        "closed_at": None,
        "pull_request": {
            "url": f"https://api.github.com/repos/{owner_repo}/pulls/{number}",
            "html_url": f"https://github.com/{owner_repo}/pull/{number}",
        },
    }


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict = field(default_factory=dict)

    @classmethod
    def json(cls, status: int, document, headers: dict | None = None) -> Reply:
        return cls(status, json.dumps(document).encode(), {"Content-Type": "application/json", **(headers or {})})


def rate_limited(seconds_ahead: int = 1, status: int = 403) -> Reply:
    """GitHub's primary rate-limit refusal: remaining 0, reset `seconds_ahead` from now."""
    reset = int(time.time()) + seconds_ahead
    return Reply.json(
        status,
        {"message": "API rate limit exceeded for 127.0.0.1."},
        {"x-ratelimit-limit": "60", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset)},
    )


def bad_gateway() -> Reply:
    return Reply(502, b"<html>502 Bad Gateway</html>", {"Content-Type": "text/html"})


class _Server:
    """A ThreadingHTTPServer on 127.0.0.1:0 whose handler calls `self.respond(path, headers)`."""

    def __init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                reply = owner.respond(self.path, dict(self.headers))
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, *args):  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        # a short poll so shutdown() returns at once rather than after the default half second
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def respond(self, path: str, headers: dict) -> Reply:  # pragma: no cover - overridden
        raise NotImplementedError

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


class FakeGitHub(_Server):
    """GET /repos/{owner}/{repo}/issues and /repositories/{REPO_ID}/issues, paged.

    `items` are REST objects in the order served. `page_size` caps per_page (to get several pages
    from few records). `faults[page]` is a list of Replies served, one per request, before that
    page is served normally. `token`, when set, is the only one accepted (others get 401).
    """

    def __init__(
        self,
        owner_repo: str,
        items: list[dict],
        *,
        page_size: int = 100,
        faults: dict[int, list[Reply]] | None = None,
        token: str | None = None,
    ) -> None:
        super().__init__()
        self.owner_repo = owner_repo
        self.items = items
        self.page_size = page_size
        self.faults = {page: list(replies) for page, replies in (faults or {}).items()}
        self.token = token
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()

    def respond(self, path: str, headers: dict) -> Reply:
        with self.lock:
            self.requests.append((path, headers))
        parts = urlsplit(path)
        if parts.path not in (f"/repos/{self.owner_repo}/issues", f"/repositories/{REPO_ID}/issues"):
            return Reply.json(404, {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"})
        if self.token is not None and headers.get("Authorization") != f"Bearer {self.token}":
            return Reply.json(401, {"message": "Bad credentials"})
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        page = int(query.get("page", "1"))
        with self.lock:
            pending = self.faults.get(page)
            if pending:
                return pending.pop(0)
        state = query.get("state", "open")
        items = [i for i in self.items if state == "all" or i["state"] == state]
        size = min(int(query.get("per_page", "30")), self.page_size)
        chunk = items[(page - 1) * size : page * size]
        links = []
        if page * size < len(items):
            base = f"{self.url}/repositories/{REPO_ID}/issues?state={state}&per_page={size}"
            links = [f'<{base}&page={page + 1}>; rel="next"', f'<{base}&page={-(-len(items) // size)}>; rel="last"']
        return Reply.json(200, chunk, {"Link": ", ".join(links)} if links else {})


class FileServer(_Server):
    """GET /files/{name} -> `files[name]`; anything else 404. `hits` counts requests per name."""

    def __init__(self, files: dict[str, bytes]) -> None:
        super().__init__()
        self.files = files
        self.hits: dict[str, int] = {}

    @property
    def base_url(self) -> str:
        return f"{self.url}/files"

    def respond(self, path: str, headers: dict) -> Reply:
        name = urlsplit(path).path.removeprefix("/files/")
        self.hits[name] = self.hits.get(name, 0) + 1
        if name not in self.files:
            return Reply(404, b"not found", {"Content-Type": "text/plain"})
        return Reply(200, self.files[name], {"Content-Type": "application/octet-stream"})


_EDGE_MODES = ("bad_link", "lying_gzip", "unknown_encoding", "redirect_loop")


class HostileServer:
    """A server that misbehaves on purpose, one way per `mode` (127.0.0.1, a free port, bounded):

    - "loop": every page links to itself as the next page (a `Link` loop);
    - "cycle": page 1 links to page 2, page 2 back to page 1;
    - "empty": empty pages, each linking to the next, forever (ends after `max_requests`);
    - "drip": a 200 whose body comes one byte every `drip_seconds` (at most `drip_bytes` bytes);
    - "bomb": a 200 whose gzip body inflates to `bomb_bytes` of spaces (about 1,000 times its size);
    - "secret_link": page 1 links to a next page carrying `access_token=` in its query, which 404s.
    The `echo_*` modes send back the token the client sent (its `Authorization: Bearer` value), as a
    hostile or careless server would; every next page they link to 404s with the link in its message:
    - "echo_path": the next page's path holds the token (`/repositories/TOKEN/issues`);
    - "echo_query": the next page's query holds it under an ordinary name (`q=TOKEN`);
    - "echo_encoded": the next page holds it percent-encoded, every character (`%67%68...`), in
      the path and the query;
    - "echo_cut": a 403 whose message holds the token across its 200th character;
    - "echo_escaped": a 403 whose body is not JSON and holds the token JSON-escaped (`\\u0067...`)
      and as HTML character references (`&#103;...`).
    Edge inputs: "bad_link" (a `Link` header whose next URL cannot be parsed), "lying_gzip"
    (`Content-Encoding: gzip` on a plain body), "unknown_encoding" (`Content-Encoding: br`),
    "redirect_loop" (a 302 to itself, forever).
    Every loop is bounded in count and time; `requests` counts what was asked.
    """

    def __init__(
        self,
        mode: str,
        *,
        drip_seconds: float = 1.0,
        drip_bytes: int = 60,
        bomb_bytes: int = 100 << 20,
        max_requests: int = 200,
        secret: str = "SECRETtoken123",
    ) -> None:
        import zlib

        self.mode, self.drip_seconds, self.drip_bytes, self.max_requests = mode, drip_seconds, drip_bytes, max_requests
        self.secret = secret
        self.requests = 0
        self.first = "/"
        self.bomb = b""
        if mode == "bomb":
            packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
            chunk = b" " * (1 << 20)
            self.bomb = b"".join(packer.compress(chunk) for _ in range(bomb_bytes >> 20)) + packer.flush()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                owner.requests += 1
                if owner.requests > owner.max_requests:
                    self.send_response(500)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                owner.handle(self)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def _json(self, handler, body: bytes, links: list[str] = (), status: int = 200, extra: dict | None = None) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        if links:
            handler.send_header("Link", ", ".join(links))
        for key, value in (extra or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def handle(self, handler) -> None:
        parts = urlsplit(handler.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        page = int(query.get("page", "1"))
        base = f"{self.url}{parts.path}?state=all&per_page=100"
        if self.mode == "loop":
            self._json(handler, b"[]", [f'<{base}&page={page}>; rel="next"'])
        elif self.mode == "cycle":  # page 2 links back to the very first URL asked for
            if "page" not in query:
                self.first = handler.path
            nxt = f"{base}&page=2" if "page" not in query else f"{self.url}{self.first}"
            self._json(handler, b"[]", [f'<{nxt}>; rel="next"'])
        elif self.mode == "empty":
            self._json(handler, b"[]", [f'<{base}&page={page + 1}>; rel="next"'])
        elif self.mode == "secret_link":
            if page == 1:
                self._json(handler, b"[]", [f'<{base}&page=2&access_token={self.secret}>; rel="next"'])
            else:
                self._json(handler, b'{"message": "Not Found"}', status=404)
        elif self.mode.startswith("echo_") or self.mode in _EDGE_MODES:
            self._misbehave(handler, page, base, handler.headers.get("Authorization", "").removeprefix("Bearer "))
        elif self.mode == "drip":
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(self.drip_bytes))
            handler.end_headers()
            try:
                for _ in range(self.drip_bytes):
                    handler.wfile.write(b" ")
                    handler.wfile.flush()
                    time.sleep(self.drip_seconds)
            except OSError:  # the client gave up
                pass
        elif self.mode == "bomb":
            self._json(handler, self.bomb, extra={"Content-Encoding": "gzip"})
        else:  # pragma: no cover
            raise ValueError(self.mode)

    def _misbehave(self, handler, page: int, base: str, token: str) -> None:
        """The `echo_*` and edge modes (see the class docstring)."""
        encoded = "".join(f"%{ord(c):02X}" for c in token)
        if page > 1:  # every next page: a 404 that names the URL asked for
            return self._json(handler, json.dumps({"message": f"Not Found: {handler.path}"}).encode(), status=404)
        nexts = {
            "echo_path": f"{self.url}/repositories/{token}/issues?state=all&page=2",
            "echo_query": f"{base}&page=2&q={token}",
            "echo_encoded": f"{self.url}/repositories/{encoded}/issues?state=all&page=2&q={encoded}",
            "bad_link": "http://[::1/issues?page=2",
        }
        if self.mode in nexts:
            return self._json(handler, b"[]", [f'<{nexts[self.mode]}>; rel="next"'])
        if self.mode == "echo_cut":
            message = "x" * 180 + token + " was not accepted here"
            return self._json(handler, json.dumps({"message": message}).encode(), status=403)
        if self.mode == "echo_escaped":
            escaped = "".join(f"\\u{ord(c):04x}" for c in token) + " or " + "".join(f"&#{ord(c)};" for c in token)
            return self._json(handler, f"refused: {escaped}".encode(), status=403)
        if self.mode == "lying_gzip":
            return self._json(handler, b"[]" + b" " * 100, extra={"Content-Encoding": "gzip"})
        if self.mode == "unknown_encoding":
            return self._json(handler, b"[]", extra={"Content-Encoding": "br"})
        if self.mode == "redirect_loop":
            handler.send_response(302)
            handler.send_header("Location", handler.path)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return None
        raise ValueError(self.mode)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)
