"""The one HTTP layer: every request microctx makes (fetch, the published-data download, the llm
built-in's model client) goes through here, on httpx.

- `Bounds`: a timeout for connecting and for each read, a deadline for one whole response (first
  byte to last), and a cap on its body after decompression (a gzip bomb stops at the cap).
- `Budget`: the deadline of a whole operation on the monotonic clock; the waits slept count too
  (tests inject a `sleep` that returns at once). Deadlines are checked between chunks, and each
  read's timeout is never longer than what is left, so nothing runs in an abandoned thread.
- `open_stream` / `request`: one request within its bounds; every failure (a refused connection,
  a timeout, a lying `Content-Encoding`, a redirect loop, a body past the cap) is an `HttpFailure`
  with a kind and whether asking again can help.
- `retry_after`: the one `Retry-After` rule (delta-seconds or an HTTP date, capped).
- `retrying`: retries through tenacity; the caller's `decide` says how long to wait before the next
  attempt (or gives up), and `Attempts` counts every attempt, retry and wait.
- `sse_data`: the one server-sent events reader.
- Transports are injectable (`make_client(transport=...)`), as httpx does it.
"""

from __future__ import annotations

import math
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

import httpx

T = TypeVar("T")


@dataclass(frozen=True)
class Bounds:
    """Limits on one request."""

    timeout_seconds: float = 30.0  # connecting, and each read
    request_seconds: float = 120.0  # one response, first byte to last (a server that drips)
    max_bytes: int = 64 << 20  # the body, after decompression


class Budget:
    """A whole operation's deadline. Time counts as the larger of the monotonic clock's and the
    waits slept (so an injected `sleep` that returns at once still spends the budget)."""

    def __init__(self, seconds: float = math.inf, sleep: Callable[[float], None] = time.sleep) -> None:
        self.seconds = seconds
        self.start = time.monotonic()
        self.slept = 0.0
        self._sleep = sleep

    def remaining(self) -> float:
        return self.seconds - max(time.monotonic() - self.start, self.slept)

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self._sleep(seconds)


class HttpFailure(Exception):
    """No usable response. `kind`: config, connect, network, timeout, deadline, too_large, decoding,
    redirects. `retryable`: whether asking again can help. `total`: for a deadline, whether it was the
    whole operation's (else the one response's)."""

    def __init__(self, kind: str, message: str, *, retryable: bool = False, total: bool = False, cause: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = retryable
        self.total = total
        self.cause = cause  # the name of httpx's exception, when there was one


def make_client(
    *,
    headers: dict[str, str] | None = None,
    bounds: Bounds = Bounds(),
    transport: httpx.BaseTransport | None = None,
    base_url: str = "",
    trust_env: bool = False,
    max_connections: int | None = None,
    follow_redirects: bool = True,
) -> httpx.Client:
    """An httpx client with the layer's defaults: redirects followed (at most 10; httpx drops the
    Authorization header when one leaves the origin), the bounds' timeout, and only the encodings
    `Stream` inflates within its cap asked for."""
    sent = {"Accept-Encoding": "gzip, deflate", **(headers or {})}
    return httpx.Client(
        base_url=base_url,
        headers=sent,
        timeout=httpx.Timeout(bounds.timeout_seconds),
        follow_redirects=follow_redirects,
        max_redirects=10,
        transport=transport,
        trust_env=trust_env,
        limits=httpx.Limits(max_connections=max_connections),
    )


_DECODERS: dict[str, Callable[[], Any] | None] = {
    "gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    "x-gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    "deflate": lambda: zlib.decompressobj(),
    "identity": None,
}


_PIECE = 1 << 20  # inflated bytes per step


def _decoder(header: str) -> Any:
    """The decompressor a `Content-Encoding` asks for (None: none); anything else is refused."""
    names = [name.strip().lower() for name in header.split(",") if name.strip().lower() not in ("", "identity")]
    if not names:
        return None
    if len(names) > 1 or names[0] not in _DECODERS:
        raise HttpFailure("decoding", f"unsupported Content-Encoding {header.strip()[:40]!r}")
    make = _DECODERS[names[0]]
    return make() if make is not None else None


def _late(bounds: Bounds, total: bool) -> HttpFailure:
    what = "the operation's deadline" if total else f"the response deadline of {bounds.request_seconds:g} s"
    return HttpFailure("deadline", f"no complete response in time ({what})", total=total)


class Stream:
    """An open response: status and headers, and its body read within the bounds."""

    def __init__(self, response: httpx.Response, bounds: Bounds, ends_at: float, total: bool) -> None:
        self.response = response
        self.status = response.status_code
        self.headers = response.headers
        self.bounds = bounds
        self.ends_at = ends_at  # monotonic
        self.total = total  # the operation's deadline comes before the response's
        self.size = 0

    def chunks(self) -> Iterator[bytes]:
        """The body, inflated piece by piece; HttpFailure past the cap or the deadline."""
        cap = self.bounds.max_bytes
        decoder = _decoder(self.headers.get("content-encoding", ""))
        received = False
        for raw in self.response.iter_raw():
            received = received or bool(raw)
            if time.monotonic() > self.ends_at:
                raise _late(self.bounds, self.total)
            for data in (raw,) if decoder is None else self._inflate(decoder, raw):
                self.size += len(data)
                if self.size > cap:
                    raise HttpFailure("too_large", f"the response is larger than {cap} bytes (after decompression)")
                yield data
        if decoder is not None and received and not decoder.eof:
            raise HttpFailure("decoding", "the compressed body ends early (a lying Content-Encoding?)")

    def _inflate(self, decoder: Any, raw: bytes) -> Iterator[bytes]:
        """One raw chunk inflated in pieces of at most `_PIECE` bytes (so a bomb is refused at the
        cap without ever holding more than a piece beyond it)."""
        pending = raw
        try:
            while pending:
                piece = decoder.decompress(pending, _PIECE)
                pending = decoder.unconsumed_tail
                if piece:
                    yield piece
        except zlib.error:
            encoding = self.headers.get("content-encoding", "").strip()[:40]
            raise HttpFailure("decoding", f"the body is not valid {encoding} as its Content-Encoding says") from None

    def read(self) -> bytes:
        return b"".join(self.chunks())

    def lines(self) -> Iterator[str]:
        """The body's lines (UTF-8, line ends removed), for a server-sent event stream."""
        pending = b""
        for chunk in self.chunks():
            pending += chunk
            *done, pending = pending.split(b"\n")
            for line in done:
                yield line.rstrip(b"\r").decode("utf-8", "replace")
        if pending:
            yield pending.rstrip(b"\r").decode("utf-8", "replace")

    def buffered(self) -> httpx.Response:
        """The whole response, read within the bounds, as an httpx.Response (body decompressed)."""
        body = self.read()
        skip = ("content-encoding", "content-length")
        headers = [(k, v) for k, v in self.headers.multi_items() if k.lower() not in skip]
        return httpx.Response(self.status, headers=headers, content=body, request=self.response.request)


@contextmanager
def open_stream(
    client: httpx.Client, method: str, url: str, *, bounds: Bounds, budget: Budget, **options: Any
) -> Iterator[Stream]:
    """One request within `bounds` and what is left of `budget`; httpx's errors become HttpFailure."""
    seconds = min(bounds.request_seconds, budget.remaining())
    total = seconds < bounds.request_seconds
    if seconds <= 0:
        raise HttpFailure("deadline", "the operation's deadline has passed", total=True)
    ends_at = time.monotonic() + seconds
    timeout = httpx.Timeout(min(bounds.timeout_seconds, seconds))
    try:
        with client.stream(method, url, timeout=timeout, **options) as response:
            yield Stream(response, bounds, ends_at, total)
    except httpx.TimeoutException as exc:
        if time.monotonic() >= ends_at - 0.05:
            raise _late(bounds, total) from None
        raise HttpFailure("timeout", f"timed out ({type(exc).__name__})", retryable=True, cause=type(exc).__name__) from None
    except httpx.HTTPError as exc:
        raise _failure(exc) from None


def _failure(exc: httpx.HTTPError) -> HttpFailure:
    """httpx's exception as an HttpFailure of the right kind."""
    detail, cause = str(exc) or "no detail", type(exc).__name__
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.InvalidURL | httpx.LocalProtocolError):
        return HttpFailure("config", f"cannot request this URL: {detail}", cause=cause)
    if isinstance(exc, httpx.ConnectError):
        return HttpFailure("connect", f"cannot connect: {detail}", cause=cause)
    if isinstance(exc, httpx.TooManyRedirects):
        return HttpFailure("redirects", "too many redirects (a redirect loop?)", cause=cause)
    if isinstance(exc, httpx.DecodingError):
        return HttpFailure("decoding", f"the body cannot be decoded: {detail}", cause=cause)
    if isinstance(exc, httpx.TransportError):
        return HttpFailure("network", f"network error ({cause}: {detail})", retryable=True, cause=cause)
    return HttpFailure("network", f"{cause}: {detail}", cause=cause)


def request(client: httpx.Client, method: str, url: str, *, bounds: Bounds, budget: Budget, **options: Any) -> httpx.Response:
    """The whole response of one request, read within the bounds (see `open_stream`)."""
    with open_stream(client, method, url, bounds=bounds, budget=budget, **options) as stream:
        return stream.buffered()


def retry_after(value: str | None, now: float | None = None, cap: float = math.inf) -> float | None:
    """A `Retry-After` header as seconds from `now` (epoch seconds; default: the clock), at most
    `cap`: delta-seconds (negative counts as 0) or an HTTP date (past counts as 0); None when it is
    absent or unusable (`nan`, `inf`, words)."""
    text = (value or "").strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(text).timestamp() - (time.time() if now is None else now)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    if not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), cap)


def backoff(failures: int, first: float, cap: float) -> float:
    """Exponential backoff: the wait before retry number `failures + 1`."""
    return min(first * 2 ** min(failures, 64), cap)


@dataclass
class Attempts:
    """What a call with retries cost: every attempt counted, every wait recorded."""

    attempts: int = 0
    retries: int = 0
    waits: list[float] = field(default_factory=list)


Decide = Callable[[Any, BaseException | None, int], float | None]


def retrying(attempt: Callable[[], T], decide: Decide, *, budget: Budget, counts: Attempts) -> T:
    """`attempt()` until `decide(result, error, attempt_number)` returns None (then the result is
    returned, or the error raised); a number is the seconds to sleep (within `budget`) before the
    next attempt. `decide` gives up by raising its own exception. Run by tenacity."""
    import tenacity

    planned: dict[int, float] = {}

    def should_retry(state: tenacity.RetryCallState) -> bool:
        outcome = state.outcome
        assert outcome is not None
        error = outcome.exception()
        wait = decide(None if error else outcome.result(), error, state.attempt_number)
        if wait is not None:
            planned[state.attempt_number] = wait
        return wait is not None

    def counted(state: tenacity.RetryCallState) -> None:
        counts.attempts += 1

    def waited(state: tenacity.RetryCallState) -> None:
        counts.retries += 1
        counts.waits.append(planned[state.attempt_number])

    engine = tenacity.Retrying(
        retry=should_retry,
        wait=lambda state: planned[state.attempt_number],
        stop=tenacity.stop_never,
        sleep=budget.sleep,
        before=counted,
        before_sleep=waited,
        reraise=True,
    )
    return engine(attempt)


SSE_DONE = "[DONE]"


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The payload of each `data:` line of a server-sent event stream (one event a line, as the chat
    completion APIs send them), up to and including the `[DONE]` sentinel; other lines are skipped."""
    for line in lines:
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        yield payload
        if payload == SSE_DONE:
            return
