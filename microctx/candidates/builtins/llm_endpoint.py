"""llm's endpoint client: chat completions with retries, deadlines, streaming, usage and a response cache (see microctx.candidates.builtins.llm)."""

from __future__ import annotations

import contextlib
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from microctx.candidates.builtins.llm_config import MAX_RESPONSE_BYTES, RETRYABLE_STATUS, Config
from microctx.candidates.builtins.llm_prompts import Prompt
from microctx.candidates.usage import read_usage

# ---------------------------------------------------------------- calling the endpoint


@dataclass
class CallResult:
    content: str | None = None
    error: str = ""
    from_cache: bool = False


@dataclass
class Stats:
    """What the calls cost; updated under `lock` by the worker threads."""

    requests: int = 0
    retries: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    calls_without_usage: int = 0
    retry_wait_ms: int = 0
    ttft_ms: list = field(default_factory=list)
    latency_ms: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class CallFailed(Exception):
    def __init__(self, message: str, retryable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header as seconds from now (the HTTP layer's one rule: delta-seconds or an HTTP
    date); None if absent or bad."""
    from microctx._io.http import retry_after

    return retry_after(value)


class Endpoint:
    """Chat completions over httpx: retries, deadlines, streaming, usage, a response cache."""

    def __init__(self, config: Config, api_key: str | None, stats: Stats, clock=time.monotonic, sleep=time.sleep):
        from microctx._io.http import Bounds, make_client

        self.config = config
        self.stats = stats
        self.clock, self.sleep = clock, sleep
        self.started = clock()
        headers = {"Accept": "text/event-stream" if config.stream else "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # trust_env: a recording proxy given through HTTP(S)_PROXY (the sandbox's record mode) is used
        self.client = make_client(
            base_url=config.base_url,
            headers=headers,
            trust_env=True,
            bounds=Bounds(config.call_timeout, config.call_timeout, MAX_RESPONSE_BYTES),
            max_connections=config.concurrency,
            follow_redirects=False,
        )
        self.cache = Path(config.cache) if config.cache else None
        self._log_lock = threading.Lock()
        if self.cache is not None:
            self.cache.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        self.client.close()

    def _remaining(self) -> float | None:
        if not self.config.deadline:
            return None
        return self.config.deadline - (self.clock() - self.started)

    def _log(self, entry: dict) -> None:
        if self.cache is None:
            return
        line = orjson.dumps({"at": time.time(), **entry}) + b"\n"
        with self._log_lock, open(self.cache / "calls.jsonl", "ab") as handle:
            handle.write(line)

    def _cached(self, digest: str) -> str | None:
        if self.cache is None:
            return None
        path = self.cache / f"{digest}.json"
        try:
            stored = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return stored.get("content") if isinstance(stored, dict) and isinstance(stored.get("content"), str) else None

    def _store(self, digest: str, content: str, usage: dict) -> None:
        if self.cache is None:
            return
        from microctx._io.atomic import atomic_write

        atomic_write(
            self.cache / f"{digest}.json",
            orjson.dumps({"digest": digest, "model": self.config.model, "content": content, "usage": usage}),
        )

    def complete(self, prompt: Prompt) -> CallResult:
        """The prompt's answer text: from the cache, or from the endpoint with retries."""
        digest = prompt.digest(self.config)
        content = self._cached(digest)
        if content is not None:
            with self.stats.lock:
                self.stats.cache_hits += 1
            return CallResult(content, from_cache=True)
        body = prompt.request(self.config)
        if self.config.stream:
            body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        try:
            content, usage, ttft, latency, attempt = self._call(body, digest)
        except CallFailed as exc:
            with self.stats.lock:
                self.stats.failed_calls += 1
            return CallResult(None, str(exc) or "no attempt was made")
        with self.stats.lock:
            self.stats.latency_ms.append(latency)
            if ttft is not None:
                self.stats.ttft_ms.append(ttft)
            if usage:
                self.stats.input_tokens += usage["prompt_tokens"]
                self.stats.output_tokens += usage["completion_tokens"]
                self.stats.cached_tokens += usage["cached_tokens"]
            else:
                self.stats.calls_without_usage += 1
        self._log(
            {
                "digest": digest,
                "attempt": attempt,
                "ok": True,
                "ms": latency,
                "ttft_ms": ttft,
                "usage": usage,
                "records": len(prompt.ids),
            }
        )
        self._store(digest, content, usage)
        return CallResult(content)

    def _call(self, body: dict, digest: str) -> tuple[str, dict, int | None, int, int]:
        """(content, usage, ttft ms, latency ms, attempt index) of the first attempt that answers,
        retried through the HTTP layer (`retrying`); CallFailed when none does."""
        from microctx._io.http import Attempts, Budget, backoff, retrying

        counts = Attempts()

        def attempt() -> tuple[str, dict, int | None, int, int]:
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                raise CallFailed("the total deadline passed", False)
            timeout = self.config.call_timeout if remaining is None else min(self.config.call_timeout, remaining)
            with self.stats.lock:
                self.stats.requests += 1
                self.stats.retries += counts.attempts > 1
            start = self.clock()
            try:
                content, usage, ttft = self._send(body, timeout)
            except CallFailed as exc:
                ms = round((self.clock() - start) * 1000)
                self._log({"digest": digest, "attempt": counts.attempts - 1, "ok": False, "error": str(exc), "ms": ms})
                raise
            return content, usage, ttft, round((self.clock() - start) * 1000), counts.attempts - 1

        def decide(result: object, error: BaseException | None, number: int) -> float | None:
            if not isinstance(error, CallFailed) or not error.retryable or number > self.config.retries:
                return None
            wait = error.retry_after if error.retry_after is not None else backoff(number - 1, self.config.backoff, math.inf)
            wait = min(wait, self.config.max_backoff)
            remaining = self._remaining()
            if remaining is not None and wait >= remaining:
                raise CallFailed(f"{error}; no time left for a retry before the total deadline", False)
            with self.stats.lock:
                self.stats.retry_wait_ms += round(wait * 1000)
            return wait

        return retrying(attempt, decide, budget=Budget(sleep=self.sleep), counts=counts)

    def _send(self, body: dict, timeout: float) -> tuple[str, dict, int | None]:
        """One HTTP attempt through the HTTP layer: (content, usage, ms to first token or None);
        CallFailed otherwise."""
        from microctx._io.http import Bounds, Budget, HttpFailure, open_stream

        bounds = Bounds(timeout, timeout, MAX_RESPONSE_BYTES)
        start = self.clock()
        try:
            with open_stream(self.client, "POST", "/chat/completions", bounds=bounds, budget=Budget(timeout), json=body) as got:
                if got.status != 200:
                    with contextlib.suppress(HttpFailure):
                        got.read()  # within the cap: the connection can be used again
                    retryable = got.status in RETRYABLE_STATUS or got.status >= 500
                    raise CallFailed(f"HTTP {got.status}", retryable, retry_after_seconds(got.headers.get("retry-after")))
                if self.config.stream:
                    return self._read_stream(got.lines(), start)
                data = got.read()
        except HttpFailure as exc:
            raise _call_failure(exc, timeout) from None
        try:
            envelope = orjson.loads(data)
            content = envelope["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise CallFailed(f"not a chat completion response: {type(exc).__name__}", False) from None
        return content, _usage(envelope.get("usage")), None

    def _read_stream(self, lines, start: float) -> tuple[str, dict, int | None]:
        """The content, usage and ms to first token of a streamed answer (the layer's SSE reader)."""
        from microctx._io.http import SSE_DONE, sse_data

        parts: list[str] = []
        usage: dict = {}
        ttft = None
        done = False
        for payload in sse_data(lines):
            if payload == SSE_DONE:
                done = True
                break
            try:
                chunk = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise CallFailed("a stream event is not JSON", False) from None
            if not isinstance(chunk, dict):
                raise CallFailed("a stream event is not a JSON object", False)
            if chunk.get("usage"):
                usage = _usage(chunk["usage"])
            for choice in chunk.get("choices") or []:
                delta = (choice.get("delta") or {}).get("content") if isinstance(choice, dict) else None
                if isinstance(delta, str) and delta:
                    if ttft is None:
                        ttft = round((self.clock() - start) * 1000)
                    parts.append(delta)
        if not done:
            raise CallFailed("the stream ended without [DONE]", True)
        return "".join(parts), usage, ttft


def _call_failure(exc, timeout: float) -> CallFailed:
    """The HTTP layer's failure as this client's CallFailed (its message, whether to retry)."""
    if exc.kind == "timeout":
        return CallFailed(f"timed out (call deadline {timeout:g} s)", True)
    if exc.kind == "deadline":
        return CallFailed(f"the call took longer than {timeout:g} s", True)
    if exc.kind == "too_large":
        return CallFailed(f"the response is larger than {MAX_RESPONSE_BYTES} bytes", False)
    if exc.kind in ("connect", "network"):
        return CallFailed(f"connection failed: {exc.cause or exc.kind}", True)
    return CallFailed(str(exc), False)


def _usage(raw: object) -> dict:
    """prompt, completion and cached tokens of a response's `usage` ({} when absent or unusable)."""
    return read_usage(raw) or {}


def run_prompts(prompts: list[Prompt], endpoint: Endpoint, concurrency: int) -> list[CallResult]:
    """Every prompt's result, in order, with at most `concurrency` calls at once."""
    if concurrency <= 1 or len(prompts) <= 1:
        return [endpoint.complete(p) for p in prompts]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(endpoint.complete, prompts))
