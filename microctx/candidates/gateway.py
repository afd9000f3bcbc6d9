"""The model gateway: the one way a sandboxed candidate reaches a model, counted by the runner.

With `--model-endpoint URL` (`GatewaySettings`), the runner serves an OpenAI-compatible endpoint
inside the sandbox at `GATEWAY_URL` (http://model.gateway/v1, through the proxy's socket; the
candidate gets it as OPENAI_BASE_URL and MICROCTX_MODEL_ENDPOINT, and a placeholder
OPENAI_API_KEY). Each request under /v1/ is forwarded to the real endpoint (HTTPS fine), with
the key read by the runner from `--model-key-env NAME` added by the gateway: the candidate never
holds it (not in its environment, its files or its manifest, where its value is redacted).
Direct connections to the endpoint's host:port are refused by the proxy while the gateway is on.

Counted from the responses, by the runner: calls made upstream, input, output and cached input
tokens (each response's `usage`, plain JSON or the last event of a stream), time to first token
(the first body bytes of the upstream's answer), errors, calls whose response carried no usage,
cache hits, and dollars at the given prices. Budgets (`max_calls`, `max_tokens`, `max_dollars`):
a call that would start past a budget is answered 403 without reaching the model, the run is
stopped at once and fails with that reason. A call already under way may take the token or dollar total past its
budget (its size is known only when it ends): the run fails all the same.

What the gateway cannot count: work the endpoint does that its `usage` does not report, tokens
of a response that carried no usage (`calls_without_usage` says how many), and anything a
candidate computes without a model.

With `GatewaySettings.cache` (a folder of the runner's, never bound into the sandbox), answers
with status 200 are kept under the SHA-256 of the request (method, path and the JSON body with
sorted keys) and served again without a call (`cache_hits`).
"""

from __future__ import annotations

import hashlib
import http.client
import socket
import statistics
import threading
import time
from urllib.parse import urlsplit

import h11
import orjson

from microctx.candidates.network import RecordingProxy, split_host_port
from microctx.candidates.proxy_http import _BODY_LIMIT, Refused, read_body
from microctx.candidates.settings import GatewaySettings
from microctx.candidates.usage import usage_from_response

GATEWAY_HOST = "model.gateway"
GATEWAY_URL = f"http://{GATEWAY_HOST}/v1"
GATEWAY_ENV = "MICROCTX_MODEL_ENDPOINT"
PLACEHOLDER_KEY = "microctx-gateway-holds-the-key"
_CALL_TIMEOUT = 600.0
_KEPT_HEADERS = {b"content-type", b"accept", b"openai-organization", b"openai-project", b"user-agent"}


class Gateway:
    """Serves GATEWAY_URL for one run: forwards, counts, enforces budgets, caches."""

    def __init__(self, settings: GatewaySettings, key: str | None):
        self.settings = settings
        self._key = key
        parts = urlsplit(settings.endpoint)
        self.scheme, self.base_path = parts.scheme, parts.path.rstrip("/")
        self.host, self.port = split_host_port(parts.netloc.rpartition("@")[2], 443 if parts.scheme == "https" else 80)
        self._lock = threading.Lock()
        self.counts = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
        self.counts.update(cache_hits=0, errors=0, calls_without_usage=0, refused_over_budget=0)
        self.ttft_ms: list[float] = []
        self.started_calls = 0
        self.over_budget = ""
        self.stop = None  # set by the runner: ends the run (a budget used up stops it at once)

    def serves(self, host: str, port: int) -> bool:
        return host.lower() == GATEWAY_HOST and port == 80

    def endpoint_address(self) -> tuple[str, int]:
        return self.host.lower(), self.port

    # --- budgets and counts --------------------------------------------------------------

    def dollars(self) -> float:
        s, c = self.settings, self.counts
        cached_price = s.price_in if s.price_cached is None else s.price_cached
        fresh = max(0, c["input_tokens"] - c["cached_tokens"])
        return (fresh * s.price_in + c["cached_tokens"] * cached_price + c["output_tokens"] * s.price_out) / 1e6

    def _past_budget(self) -> str:
        s, c = self.settings, self.counts
        if s.max_calls is not None and self.started_calls >= s.max_calls:
            return f"over budget: {s.max_calls} model calls (--max-model-calls) used up"
        if s.max_tokens is not None and c["input_tokens"] + c["output_tokens"] >= s.max_tokens:
            return f"over budget: {c['input_tokens'] + c['output_tokens']} tokens, the budget is {s.max_tokens} (--max-tokens)"
        if s.max_dollars is not None and self.dollars() >= s.max_dollars:
            return f"over budget: ${self.dollars():.6f}, the budget is ${s.max_dollars:g} (--max-dollars)"
        return ""

    def _past_size_budget(self) -> str:
        """Why the tokens or dollars so far are past their budget ("" when they are not)."""
        s, c = self.settings, self.counts
        tokens = c["input_tokens"] + c["output_tokens"]
        if s.max_tokens is not None and tokens > s.max_tokens:
            return f"over budget: {tokens} tokens, the budget is {s.max_tokens} (--max-tokens)"
        if s.max_dollars is not None and self.dollars() > s.max_dollars:
            return f"over budget: ${self.dollars():.6f}, the budget is ${s.max_dollars:g} (--max-dollars)"
        return ""

    def _start_call(self) -> str:
        """ "" and a call counted as started, or why the budget refuses it."""
        with self._lock:
            why = self._past_budget()
            if why:
                self.counts["refused_over_budget"] += 1
                self.over_budget = self.over_budget or why
                return why
            self.started_calls += 1
            return ""

    def _count(self, status: int | None, usage: dict | None, ttft: float | None) -> None:
        with self._lock:
            self.counts["model_calls"] += 1
            if status != 200:
                self.counts["errors"] += 1
            elif usage is None:
                self.counts["calls_without_usage"] += 1
            if usage is not None:
                self.counts["input_tokens"] += usage["prompt_tokens"]
                self.counts["output_tokens"] += usage["completion_tokens"]
                self.counts["cached_tokens"] += usage["cached_tokens"]
            if ttft is not None:
                self.ttft_ms.append(ttft * 1000)
            self.over_budget = self.over_budget or self._past_size_budget()

    def record(self) -> dict:
        """The manifest's `gateway` object."""
        from microctx.errors import scrub_url

        s = self.settings
        with self._lock:
            ttft = sorted(self.ttft_ms)
            return {
                "endpoint": scrub_url(s.endpoint),
                "url_inside": GATEWAY_URL,
                "key_env": s.key_env,
                **self.counts,
                "dollars": round(self.dollars(), 6),
                "ttft_ms_median": round(statistics.median(ttft), 1) if ttft else None,
                "ttft_ms_max": round(ttft[-1], 1) if ttft else None,
                "budget": {"max_calls": s.max_calls, "max_tokens": s.max_tokens, "max_dollars": s.max_dollars},
                "prices_per_million": {"in": s.price_in, "out": s.price_out, "cached": s.price_cached},
                "over_budget": self.over_budget or None,
            }

    # --- serving ---------------------------------------------------------------------------

    def handle(self, proxy: RecordingProxy, client: socket.socket, conn: h11.Connection, request: h11.Request, path: str) -> None:
        method = request.method.decode("ascii", "replace")
        target = f"http://{GATEWAY_HOST}{path}"
        if path != "/v1" and not path.startswith("/v1/"):
            raise Refused(404, "the model gateway serves /v1/ only", method, target, GATEWAY_HOST, 80)
        body = read_body(proxy, client, conn, method, target)
        try:
            digest = _digest(method, path, body)
            cached = self._cached(digest)
            if cached is not None:
                with self._lock:
                    self.counts["cache_hits"] += 1
                _answer(client, conn, 200, cached[0], cached[1])
                return
            why = self._start_call()
            if why:  # 403, not 429: no client retries it; and the run is stopped
                error = orjson.dumps({"error": {"message": why, "type": "microctx_budget", "code": "over_budget"}})
                _answer(client, conn, 403, "application/json", error)
                if self.stop is not None:
                    self.stop()
                return
            self._forward(client, conn, request, method, path[len("/v1") :], body, digest)
        finally:
            proxy.release(len(body))

    def _upstream(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=_CALL_TIMEOUT)
        return http.client.HTTPConnection(self.host, self.port, timeout=_CALL_TIMEOUT)

    def _forward(self, client, conn, request: h11.Request, method: str, rest: str, body: bytes, digest: str) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers if k.lower() in _KEPT_HEADERS}
        headers["Accept-Encoding"] = "identity"
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        started, ttft, status, captured = time.monotonic(), None, None, bytearray()
        upstream = self._upstream()
        try:
            upstream.request(method, self.base_path + rest, body=body, headers=headers)
            response = upstream.getresponse()
            status, ctype = response.status, response.getheader("Content-Type", "application/json")
            _send(client, conn, h11.Response(status_code=status, headers=[(b"content-type", ctype.encode("latin-1"))]))
            while chunk := response.read1(65536):
                ttft = ttft if ttft is not None else time.monotonic() - started
                _send(client, conn, h11.Data(data=chunk))
                if len(captured) + len(chunk) <= _BODY_LIMIT:
                    captured += chunk
            _send(client, conn, h11.EndOfMessage())
        except (OSError, http.client.HTTPException) as exc:
            if status is None:
                message = orjson.dumps(
                    {"error": {"message": f"the model endpoint failed: {type(exc).__name__}", "type": "gateway"}}
                )
                _answer(client, conn, 502, "application/json", message)
            self._count(status or 502, None, ttft)
            return
        finally:
            upstream.close()
        usage = usage_from_response(ctype, bytes(captured)) if status == 200 else None
        self._count(status, usage, ttft)
        if status == 200 and len(captured) < _BODY_LIMIT:
            self._store(digest, ctype, bytes(captured))

    def _cached(self, digest: str) -> tuple[str, bytes] | None:
        if self.settings.cache is None:
            return None
        try:
            stored = orjson.loads((_cache_path(self.settings.cache, digest)).read_bytes())
            return stored["content_type"], stored["body"].encode()
        except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
            return None

    def _store(self, digest: str, ctype: str, body: bytes) -> None:
        if self.settings.cache is None:
            return
        from microctx._io.atomic import atomic_write

        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return
        atomic_write(
            _cache_path(self.settings.cache, digest), orjson.dumps({"digest": digest, "content_type": ctype, "body": text})
        )


def _cache_path(folder: str, digest: str):
    from pathlib import Path

    return Path(folder) / f"{digest}.json"


def _digest(method: str, path: str, body: bytes) -> str:
    try:
        canonical = orjson.dumps(orjson.loads(body), option=orjson.OPT_SORT_KEYS) if body else b""
    except orjson.JSONDecodeError:
        canonical = body
    return hashlib.sha256(method.encode() + b" " + path.encode() + b"\n" + canonical).hexdigest()


def _send(client: socket.socket, conn: h11.Connection, event) -> None:
    data = conn.send(event)
    if data:
        client.sendall(data)


def _answer(client: socket.socket, conn: h11.Connection, status: int, ctype: str, body: bytes) -> None:
    headers = [(b"content-type", ctype.encode("latin-1")), (b"content-length", str(len(body)).encode())]
    _send(client, conn, h11.Response(status_code=status, headers=headers))
    _send(client, conn, h11.Data(data=body))
    _send(client, conn, h11.EndOfMessage())
