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
stopped at once and fails with that reason. Token and dollar budgets are kept before a call is
forwarded (microctx.candidates.model_budget): each call reserves its worst case (input estimate
plus its output bound, which the gateway caps or sets to what is left), waits while the calls in
flight hold the room it needs, and is refused when it cannot fit at all; so calls in flight never
take the totals past the budget, under the conditions model_budget states.

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
import time
from pathlib import Path
from urllib.parse import urlsplit

import h11
import orjson

from microctx.candidates.model_budget import Ask, Budget, Reservation, dollars_of, read_ask
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
        self.budget = Budget(settings)
        self._lock = self.budget.cond  # one lock: the counts and the reservations change together
        self.counts = {"model_calls": 0, "input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
        self.counts.update(cache_hits=0, errors=0, calls_without_usage=0, refused_over_budget=0, refused_unbounded=0)
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
        c = self.counts
        return dollars_of(self.settings, c["input_tokens"], c["cached_tokens"], c["output_tokens"])

    def _past_size_budget(self) -> str:
        """Why the tokens or dollars spent are past their budget ("" when they are not): only an endpoint
        that reports more than it was allowed (model_budget's conditions) gets here."""
        s, b = self.settings, self.budget
        if s.max_tokens is not None and b.used_tokens > s.max_tokens:
            return f"over budget: {b.used_tokens} tokens, the budget is {s.max_tokens} (--max-tokens)"
        if s.max_dollars is not None and b.used_dollars > s.max_dollars:
            return f"over budget: ${b.used_dollars:.6f}, the budget is ${s.max_dollars:g} (--max-dollars)"
        return ""

    def _start_call(self, ask: Ask) -> tuple[str, int | None, Reservation]:
        """("", the output bound to set or None, the call's reservation) and the call counted as
        started, or why the budget refuses it (the call budget first, then the room left)."""
        with self._lock:
            s = self.settings
            why = f"over budget: {s.max_calls} model calls (--max-model-calls) used up"
            cap, reservation = None, Reservation()
            if s.max_calls is None or self.started_calls < s.max_calls:
                why = self._past_size_budget()
            if not why:
                why, cap, reservation = self.budget.reserve(ask)
            if why:
                self.counts["refused_over_budget"] += 1
                self.over_budget = self.over_budget or why
                return why, None, reservation
            self.started_calls += 1
            return "", cap, reservation

    def _count(self, status: int | None, usage: dict | None, ttft: float | None, reservation: Reservation) -> None:
        with self._lock:
            self.budget.settle(reservation, status, usage)
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
                "capped_calls": self.budget.capped_calls,
                "waited_calls": self.budget.waited_calls,
                "charged_without_usage_tokens": self.budget.charged_without_usage_tokens,
                "unsettled_calls": self.budget.in_flight,  # still under way when the manifest was written
            }

    # --- serving ---------------------------------------------------------------------------

    def handle(self, proxy: RecordingProxy, client: socket.socket, conn: h11.Connection, request: h11.Request, path: str) -> None:
        method = request.method.decode("ascii", "replace")
        target = f"http://{GATEWAY_HOST}{path}"
        body = read_body(proxy, client, conn, method, target)  # read first: a refusal then closes a drained connection
        try:
            if path != "/v1" and not path.startswith("/v1/") or _leaves(path):
                raise Refused(404, "the model gateway serves /v1/ only", method, target, GATEWAY_HOST, 80)
            digest = _digest(method, path, body)
            cached = self._cached(digest)
            if cached is not None:
                with self._lock:
                    self.counts["cache_hits"] += 1
                _answer(client, conn, 200, cached[0], cached[1])
                return
            ask = read_ask(method, path[len("/v1") :], body) if self.budget.sized else Ask(0)
            if isinstance(ask, str):  # a call whose spending the gateway cannot bound: refused, the run goes on
                with self._lock:
                    self.counts["refused_unbounded"] += 1
                error = orjson.dumps({"error": {"message": ask, "type": "microctx_budget", "code": "unbounded"}})
                _answer(client, conn, 400, "application/json", error)
                return
            why, cap, reservation = self._start_call(ask)
            if why:  # 403, not 429: no client retries it; and the run is stopped
                error = orjson.dumps({"error": {"message": why, "type": "microctx_budget", "code": "over_budget"}})
                _answer(client, conn, 403, "application/json", error)
                if self.stop is not None:
                    self.stop()
                return
            if cap is not None and isinstance(ask, Ask) and ask.field is not None:  # the output bound set to what is left
                body = orjson.dumps({**orjson.loads(body), ask.field: cap})
                digest = _digest(method, path, body)  # kept under what was sent: a capped answer never answers the uncapped call
            self._forward(client, conn, request, method, path[len("/v1") :], body, digest, reservation)
        finally:
            proxy.release(len(body))

    def _upstream(self) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=_CALL_TIMEOUT)
        return http.client.HTTPConnection(self.host, self.port, timeout=_CALL_TIMEOUT)

    def _forward(
        self, client, conn, request: h11.Request, method: str, rest: str, body: bytes, digest: str, reservation: Reservation
    ) -> None:
        """Send the call upstream and relay the answer. The answer is read to its end even when the
        candidate is gone (killed, or cut off at the end of the run), so its usage is still counted;
        the call is settled exactly once, whatever fails."""
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.headers if k.lower() in _KEPT_HEADERS}
        headers["Accept-Encoding"] = "identity"
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        started, ttft, status, captured, usage = time.monotonic(), None, None, bytearray(), None
        relay = _Relay(client, conn)
        upstream = self._upstream()
        try:
            upstream.request(method, self.base_path + rest, body=body, headers=headers)
            response = upstream.getresponse()
            status, ctype = response.status, response.getheader("Content-Type", "application/json")
            relay.send(h11.Response(status_code=status, headers=[(b"content-type", ctype.encode("latin-1"))]))
            while chunk := response.read1(65536):
                ttft = ttft if ttft is not None else time.monotonic() - started
                relay.send(h11.Data(data=chunk))
                if len(captured) + len(chunk) <= _BODY_LIMIT:
                    captured += chunk
            relay.send(h11.EndOfMessage())
            usage = usage_from_response(ctype, bytes(captured)) if status == 200 else None
            if status == 200 and len(captured) < _BODY_LIMIT and relay.ok:
                self._store(digest, ctype, bytes(captured))
        except (OSError, http.client.HTTPException) as exc:  # the endpoint failed
            if status is None:
                message = orjson.dumps(
                    {"error": {"message": f"the model endpoint failed: {type(exc).__name__}", "type": "gateway"}}
                )
                relay.answer(502, message)
            status = status or 502
        finally:
            upstream.close()
            self._count(status, usage, ttft, reservation)

    def drain(self, timeout: float) -> int:
        """Wait up to `timeout` seconds for the calls in flight to end (their usage counted); how many did not."""
        with self._lock:
            self._lock.wait_for(lambda: self.budget.in_flight == 0, timeout=timeout)
            return self.budget.in_flight

    def _cached(self, digest: str) -> tuple[str, bytes] | None:
        if self.settings.cache is None:
            return None
        from microctx.candidates.run_files import read_regular

        entry = _cache_path(self.settings.cache, digest)
        data, _ = read_regular(entry.parent, entry.name, 4 * _BODY_LIMIT)  # no link, no FIFO
        try:
            stored = orjson.loads(data) if data is not None else None
            return (stored["content_type"], stored["body"].encode()) if stored is not None else None
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError):
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


def _leaves(path: str) -> bool:
    """True when a path under /v1/ may name another place once the endpoint's server reads it: a
    `.` or `..` segment (`/v1/../admin`), also percent-encoded, once or more (`%2e%2e`, `%252e`), a
    slash or backslash percent-encoded inside a segment (`..%2f`), a backslash, or `..;` (read as `..`
    by some servers). The gateway
    sends the path as it is, with the key: the server (or a proxy before it) would normalise it."""
    from urllib.parse import unquote

    bare = path.split("?", 1)[0]
    for _ in range(4):
        decoded = unquote(bare)
        if decoded.count("/") != bare.count("/"):  # an encoded slash: a separator once decoded
            return True
        if decoded == bare:
            break
        bare = decoded
    else:
        return True  # still encoded after four rounds
    return "\\" in bare or any(segment.split(";", 1)[0] in (".", "..") for segment in bare.split("/"))  # `..;` too


def _cache_path(folder: str, digest: str) -> Path:
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


class _Relay:
    """The answer's way back to the candidate; once the candidate is gone, the rest is dropped (ok False)."""

    def __init__(self, client: socket.socket, conn: h11.Connection):
        self.client, self.conn, self.ok = client, conn, True

    def send(self, event) -> None:
        if self.ok:
            try:
                _send(self.client, self.conn, event)
            except (OSError, h11.LocalProtocolError):
                self.ok = False

    def answer(self, status: int, body: bytes) -> None:
        if self.ok:
            try:
                _answer(self.client, self.conn, status, "application/json", body)
            except (OSError, h11.LocalProtocolError):
                self.ok = False


def _answer(client: socket.socket, conn: h11.Connection, status: int, ctype: str, body: bytes) -> None:
    headers = [(b"content-type", ctype.encode("latin-1")), (b"content-length", str(len(body)).encode())]
    _send(client, conn, h11.Response(status_code=status, headers=headers))
    _send(client, conn, h11.Data(data=body))
    _send(client, conn, h11.EndOfMessage())
