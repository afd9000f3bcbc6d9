"""One GitHub REST request through the HTTP layer (microctx/_io/http.py): the token, the headers,
rate-limit waits and retries, a refusal as one line, the next-page link.

A 403/429 carrying `retry-after` or `x-ratelimit-remaining: 0` + `x-ratelimit-reset` waits until
the reset (said on stderr) and asks again; a 5xx or a dropped connection is retried with
exponential backoff; both give up with one clear line after a bound (`RetryPolicy`). The token is
sent only as `Authorization: Bearer ...` to the API's own host and is never printed: `Token`
hides it from repr/str, and every message is scrubbed of it by value (raw, percent-encoded, JSON-
or HTML-escaped) before it is cut. A token with a control character, a space or a non-ASCII
character is refused up front (it could not be sent as a header, nor scrubbed reliably).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx

from microctx._io.http import Attempts, Bounds, Budget, HttpFailure, backoff, request, retry_after, retrying
from microctx.errors import InputError, scrub_secret, scrub_url, secret_pattern, shown

TOKEN_ENV_VARS = ("GITHUB_TOKEN", "GH_TOKEN")  # first one set wins
API_VERSION = "2022-11-28"


@dataclass(frozen=True)
class RetryPolicy:
    """Bounds on waiting and retrying, per request."""

    server_retries: int = 5  # 5xx answers and dropped connections
    backoff_seconds: float = 1.0  # first retry wait; doubled each time
    max_backoff_seconds: float = 60.0
    rate_limit_waits: int = 3
    max_rate_limit_wait_seconds: float = 3900.0  # GitHub's primary limit resets within the hour
    secondary_limit_wait_seconds: float = 60.0  # a 429 without headers: GitHub asks for at least a minute
    timeout_seconds: float = 30.0  # connecting, and each read
    deadline_seconds: float = 4 * 3600.0  # the whole fetch, waits included: then exit 2
    request_deadline_seconds: float = 120.0  # one response, first byte to last (a server that drips)
    max_response_bytes: int = 64 << 20  # one page, after decompression (a gzip bomb stops here)
    max_pages: int = 20_000  # 2,000,000 issues and pull requests
    idle_pages: int = 3  # pages in a row with no new issue or pull request (empty, or repeats)

    @property
    def bounds(self) -> Bounds:
        return Bounds(self.timeout_seconds, self.request_deadline_seconds, self.max_response_bytes)


class Token:
    """An API token that never shows itself: repr() and str() name only where it came from."""

    __slots__ = ("_value", "source", "pattern")

    def __init__(self, value: str, source: str):
        check_token(value, source)
        self._value = value
        self.source = source
        self.pattern = secret_pattern(value)

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        return scrub_secret(text, self.pattern)

    def scrub_error(self, exc: InputError) -> InputError:
        """`exc` with the token hidden in each part (a last line of defence before it is printed)."""
        record = None if exc.record is None else self.scrub(str(exc.record))
        return InputError(self.scrub(exc.file), self.scrub(exc.message), record=record, field=exc.field)

    def __repr__(self) -> str:
        return f"Token(from {self.source}, hidden)"

    __str__ = __repr__

    def __reduce__(self):  # never pickled into a file either
        raise TypeError("a Token cannot be pickled")


def check_token(value: str, source: str) -> None:
    """Refuse a token that holds anything but printable ASCII (a newline, a control character, a
    space, a non-ASCII letter), naming the position, never the value."""
    for position, char in enumerate(value, 1):
        if "!" <= char <= "~":
            continue
        what = "a space" if char == " " else "a control character" if char.isascii() else "a non-ASCII character"
        raise InputError(
            source, f"the token holds {what} at position {position} of {len(value)}; a token is printable ASCII, refused"
        )


def token_from_env(environ: Mapping[str, str] = os.environ) -> Token | None:
    """The token in GITHUB_TOKEN, else GH_TOKEN; None when neither is set (or both are empty)."""
    for name in TOKEN_ENV_VARS:
        value = environ.get(name, "").strip()
        if value:
            return Token(value, name)
    return None


def api_headers(token: Token | None) -> dict[str, str]:
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION, "User-Agent": "microctx-fetch"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token.reveal()}"
    return headers


def origin(url: str) -> tuple:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


@dataclass
class Api:
    """One fetch's way to the API: the client, the token, the bounds, the clock."""

    client: httpx.Client
    repo: str
    token: Token | None
    policy: RetryPolicy
    budget: Budget
    clock: Callable[[], float]
    say: Callable[[str], None]

    @property
    def pattern(self) -> re.Pattern[str] | None:
        return self.token.pattern if self.token is not None else None

    def shown(self, text: str, limit: int = 300) -> str:
        """Text from outside fit for a message: the token scrubbed by value, then cut."""
        return shown(text, limit, self.pattern)

    def where(self, url: str) -> str:
        return f"GET {scrub_secret(scrub_url(scrub_secret(url, self.pattern)), self.pattern)}"

    def get(self, url: str, counts: Attempts) -> httpx.Response:
        """GET `url`, waiting out rate limits and retrying 5xx / dropped connections, within bounds."""
        failures = {"server": 0, "rate": 0}

        def attempt() -> httpx.Response:
            return request(self.client, "GET", url, bounds=self.policy.bounds, budget=self.budget)

        def decide(response: httpx.Response | None, error: BaseException | None, number: int) -> float | None:
            if error is not None:
                return self._after_failure(error, url, failures)
            assert response is not None
            if response.status_code < 300:
                return None
            wait = rate_limit_wait(response, self.clock(), self.policy)
            if wait is not None:
                return self._rate_wait(wait, response.status_code, url, failures)
            if response.status_code >= 500:
                return self._backoff(f"server error {response.status_code} {response.reason_phrase}", url, failures)
            raise InputError(self.where(url), refusal(response, self.repo, self.token))

        return retrying(attempt, decide, budget=self.budget, counts=counts)

    def _after_failure(self, error: BaseException, url: str, failures: dict[str, int]) -> float | None:
        if not isinstance(error, HttpFailure):
            return None  # a bug: raised as it is
        policy = self.policy
        if error.kind == "deadline":
            what = (
                f"the fetch's deadline of {policy.deadline_seconds:g} s"
                if error.total
                else f"the response deadline of {policy.request_deadline_seconds:g} s"
            )
            raise InputError(self.where(url), f"no complete response in time ({what}; the server is too slow); giving up")
        if error.kind == "too_large":
            raise InputError(
                self.where(url),
                f"the response is larger than {policy.max_response_bytes} bytes (after decompression); refusing it",
            )
        if not error.retryable:
            raise InputError(self.where(url), f"{self.shown(str(error))}; giving up")
        return self._backoff(self.shown(str(error)), url, failures)

    def _backoff(self, problem: str, url: str, failures: dict[str, int]) -> float:
        """The wait before the next retry, or give up when the retries (or the time) are spent."""
        policy, done = self.policy, failures["server"]
        if done >= policy.server_retries:
            raise InputError(self.where(url), f"{problem} after {done + 1} attempts; giving up")
        wait = backoff(done, policy.backoff_seconds, policy.max_backoff_seconds)
        if wait >= self.budget.remaining():
            raise InputError(
                self.where(url),
                f"{problem}; no time left for a retry before the deadline ({policy.deadline_seconds:g} s); giving up",
            )
        self.say(f"microctx fetch: {problem}; retrying in {wait:g} s (retry {done + 1} of {policy.server_retries})")
        failures["server"] = done + 1
        return wait

    def _rate_wait(self, wait: float, status: int, url: str, failures: dict[str, int]) -> float:
        policy = self.policy
        failures["rate"] += 1
        if failures["rate"] > policy.rate_limit_waits:
            raise InputError(
                self.where(url),
                f"still rate limited after {policy.rate_limit_waits} waits; giving up "
                "(try again later, or set GITHUB_TOKEN for a higher limit)",
            )
        if wait > policy.max_rate_limit_wait_seconds:
            raise InputError(
                self.where(url),
                f"rate limited for another {wait:.0f} s, longer than the "
                f"{policy.max_rate_limit_wait_seconds:.0f} s this command waits; try again later",
            )
        if wait >= self.budget.remaining():
            raise InputError(
                self.where(url),
                f"rate limited for another {wait:.0f} s, past the fetch's deadline ({policy.deadline_seconds:g} s); try again later",
            )
        until = datetime.fromtimestamp(self.clock() + wait, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.say(
            f"microctx fetch: rate limited ({status}); waiting {wait:.0f} s until {until} "
            f"(wait {failures['rate']} of {policy.rate_limit_waits})"
        )
        return wait

    def next_url(self, response: httpx.Response) -> str | None:
        """The `rel="next"` link; refused when it is malformed or leaves the API's host (the token
        would follow it)."""
        try:
            link = response.links.get("next")
            url = str(response.url.join(link["url"])) if link and link.get("url") else None
            found = origin(url) if url else None
        except (httpx.InvalidURL, ValueError, TypeError, KeyError):
            header = self.shown(response.headers.get("link", ""), 120)
            raise InputError(
                self.where(str(response.url)), f"the Link header's next-page link is malformed ({header}); giving up"
            ) from None
        if url is None:
            return None
        if found != origin(str(response.url)):
            host = self.shown(urlsplit(url).netloc.rsplit("@", 1)[-1], 120)
            raise InputError(
                self.where(str(response.url)), f"the next-page link leaves the API host ({host}); refusing to follow it"
            )
        return url


def rate_limit_wait(response: httpx.Response, now: float, policy: RetryPolicy = RetryPolicy()) -> float | None:
    """Seconds to wait when `response` is a rate-limit refusal; None when it is not one.

    `retry-after` (the layer's one rule: seconds or an HTTP date) wins; else
    `x-ratelimit-remaining: 0` with `x-ratelimit-reset` (epoch seconds) waits until the reset plus
    one second (the reset is rounded to whole seconds); a 429 with neither waits
    `policy.secondary_limit_wait_seconds`. A 403 without these headers is a permission refusal.
    """
    if response.status_code not in (403, 429):
        return None
    headers = response.headers
    after = retry_after(headers.get("retry-after"), now)
    if after is not None:
        return after
    reset = retry_after(headers.get("x-ratelimit-reset"), 0.0)  # epoch seconds: a number of seconds after 0
    if headers.get("x-ratelimit-remaining") == "0" and reset is not None:
        return max(reset - now, 0.0) + 1.0
    return policy.secondary_limit_wait_seconds if response.status_code == 429 else None


def refusal(response: httpx.Response, repo: str, token: Token | None) -> str:
    """One line saying why the API refused, what to do, and never the token."""
    status = f"{response.status_code} {response.reason_phrase}"
    detail = api_message(response, token)
    if response.status_code == 401:
        if token is None:
            return f"{status}: the API wants a token; set GITHUB_TOKEN or GH_TOKEN ({detail})"
        return f"{status}: the API refused the token from {token.source} (bad or expired?) ({detail})"
    if response.status_code == 404:
        seen_as = f"with the token from {token.source}" if token else "without a token"
        return f"{status}: no repository {repo} visible {seen_as} at this API ({detail})"
    if response.status_code == 410:
        return f"{status}: issues are disabled for {repo} ({detail})"
    return f"{status}: {detail}"


def api_message(response: httpx.Response, token: Token | None) -> str:
    """The API's `message`, or the body's text: scrubbed of the token first, then cut."""
    try:
        document = response.json()
        message = document.get("message") if isinstance(document, dict) else None
    except ValueError:
        message = None
    text = str(message) if message else (response.text.strip() or "no message")
    return shown(text, 200, token.pattern if token is not None else None)
