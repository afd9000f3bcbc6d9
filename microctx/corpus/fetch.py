"""Fetching a repository's issues from the GitHub REST API into a raw export.

In: `OWNER/REPO`, a state filter (all, open, closed), an optional limit on the number of issues,
the API root (https://api.github.com, a GitHub Enterprise `https://HOST/api/v3`, or a test
server) and a token from GITHUB_TOKEN or GH_TOKEN (optional; without one GitHub allows 60
requests an hour).
Out: export rows in the shape of `gh issue list --json
number,title,body,state,labels,createdAt,updatedAt,closedAt,url` (state upper case, labels
`[{"name": ...}]`, a null body as ""), newest first, which `microctx freeze` reads directly.

How it talks to the API: `GET {api}/repos/{owner}/{repo}/issues?state=...&per_page=100`, then
every page the `Link: <...>; rel="next"` header names. Pull requests (objects with a
`pull_request` key) are skipped and not counted against the limit. A 403/429 carrying
`retry-after` or `x-ratelimit-remaining: 0` + `x-ratelimit-reset` waits until the reset (said on
stderr) and asks again; a 5xx or a dropped connection is retried with exponential backoff; both
give up with one clear line after a bound (`RetryPolicy`). The token is sent only as
`Authorization: Bearer ...` to the API's own host, never printed, logged or written: `Token`
hides it from repr/str and every message built from a response is scrubbed of it.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
import orjson

from microctx._io.atomic import atomic_write
from microctx.corpus.deadline import TimeUp, call_within
from microctx.errors import InputError, scrub_url, scrub_urls

DEFAULT_API_URL = "https://api.github.com"
TOKEN_ENV_VARS = ("GITHUB_TOKEN", "GH_TOKEN")  # first one set wins
STATES = ("all", "open", "closed")
PAGE_SIZE = 100  # the REST API's maximum
API_VERSION = "2022-11-28"
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


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


class Token:
    """An API token that never shows itself: repr() and str() name only where it came from."""

    __slots__ = ("_value", "source")

    def __init__(self, value: str, source: str):
        self._value = value
        self.source = source

    def reveal(self) -> str:
        return self._value

    def scrub(self, text: str) -> str:
        return text.replace(self._value, "[token hidden]") if self._value else text

    def __repr__(self) -> str:
        return f"Token(from {self.source}, hidden)"

    __str__ = __repr__

    def __reduce__(self):  # never pickled into a file either
        raise TypeError("a Token cannot be pickled")


def token_from_env(environ: Mapping[str, str] = os.environ) -> Token | None:
    """The token in GITHUB_TOKEN, else GH_TOKEN; None when neither is set (or both are empty)."""
    for name in TOKEN_ENV_VARS:
        value = environ.get(name, "").strip()
        if value:
            return Token(value, name)
    return None


@dataclass
class FetchResult:
    rows: list[dict]  # export rows, API order (newest first)
    pull_requests_skipped: int = 0
    duplicates_skipped: int = 0  # an issue seen again on a later page (the list shifted while paging)
    pages: int = 0
    requests: int = 0
    waits: list[float] = field(default_factory=list)  # seconds slept, rate limits and backoffs


def check_repo(repo: str) -> tuple[str, str]:
    """`OWNER/REPO` -> (owner, repo); anything else is an InputError."""
    if not _REPO.match(repo):
        raise InputError(repo, "expected OWNER/REPO (letters, digits, '-', '_', '.')")
    owner, name = repo.split("/")
    return owner, name


def issues_url(api_url: str, repo: str, state: str) -> str:
    """The first page's URL."""
    owner, name = check_repo(repo)
    return f"{api_url.rstrip('/')}/repos/{owner}/{name}/issues?state={state}&sort=created&direction=desc&per_page={PAGE_SIZE}"


def source_string(repo: str, state: str, limit: int | None, api_url: str = DEFAULT_API_URL) -> str:
    """A provenance string for `freeze --source`, in the published corpus's form
    (`github.com/OWNER/REPO/issues?state=all&limit=1000`)."""
    host = urlsplit(api_url).hostname or "github.com"
    host = "github.com" if host == "api.github.com" else host
    query = f"state={state}" + (f"&limit={limit}" if limit else "")
    return f"{host}/{repo}/issues?{query}"


def export_row(item: dict) -> dict:
    """One REST issue object -> one `gh issue list --json ...` row.

    Validation is left to `microctx freeze` (it names the file, record and field); this only
    renames and reshapes: snake_case -> camelCase, state upper case, labels to `{"name"}`
    objects, a null body to "" (as gh writes it), `html_url` as `url`.
    """
    state = item.get("state")
    labels = item.get("labels") or []
    return {
        "number": item.get("number"),
        "title": item.get("title"),
        "body": item.get("body") if item.get("body") is not None else "",
        "state": state.upper() if isinstance(state, str) else state,
        "labels": [{"name": label.get("name") if isinstance(label, dict) else label} for label in labels],
        "createdAt": item.get("created_at"),
        "updatedAt": item.get("updated_at"),
        "closedAt": item.get("closed_at"),
        "url": item.get("html_url"),
    }


def fetch_issues(
    repo: str,
    *,
    state: str = "all",
    limit: int | None = None,
    api_url: str = DEFAULT_API_URL,
    token: Token | None = None,
    policy: RetryPolicy = RetryPolicy(),
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.time,
    say: Callable[[str], None] | None = None,
    progress: bool | None = None,
    transport: httpx.BaseTransport | None = None,
) -> FetchResult:
    """Fetch the repository's issues (pull requests skipped), at most `limit` of them.

    `sleep` and `clock` are injectable so tests can check waits without waiting; `say` receives
    the stderr notes (rate-limit waits, retries); `progress` None shows a bar only on a terminal.
    Raises InputError (one line, token-free) on a 401/403/404, on a network failure, and when a
    retry or wait bound is exceeded.
    """
    check_request(repo, state, limit, api_url)
    url = issues_url(api_url, repo, state)
    origin = _origin(url)
    say = say or _say_stderr
    result = FetchResult(rows=[])
    clock_ = _Deadline(policy.deadline_seconds, sleep)
    bar = _progress_bar(repo, limit, progress)
    try:
        with httpx.Client(
            headers=_headers(token), timeout=policy.timeout_seconds, follow_redirects=True, transport=transport
        ) as client:
            _read_pages(client, url, origin, repo, limit, token, policy, clock_, clock, say, result, bar)
    finally:
        bar.close()
    return result


def _read_pages(
    client: httpx.Client,
    url: str | None,
    origin: tuple,
    repo: str,
    limit: int | None,
    token: Token | None,
    policy: RetryPolicy,
    deadline: _Deadline,
    clock,
    say,
    result: FetchResult,
    bar,
) -> None:
    """Follow the pages from `url` until the last one or `limit` issues, within the policy's bounds:
    the deadline, the page cap, no page read twice (a `Link` loop), and no run of pages that bring
    nothing new."""
    seen: set[int] = set()
    visited: set[str] = set()
    idle = 0
    while url and (limit is None or len(result.rows) < limit):
        if url in visited:
            raise InputError(_where(url), "the next-page link points back to a page already read (a Link loop); giving up")
        if result.pages >= policy.max_pages:
            raise InputError(_where(url), f"more than {policy.max_pages} pages; giving up")
        visited.add(url)
        response = _get(client, url, repo, token, policy, deadline.sleep, clock, say, result, deadline)
        page = _page_items(response, url, token)
        result.pages += 1
        new = 0
        for index, item in enumerate(page):
            number = _item_number(item, url, index)
            if number in seen:
                result.duplicates_skipped += 1
                continue
            seen.add(number)
            new += 1
            if "pull_request" in item:
                result.pull_requests_skipped += 1
                continue
            _check_item(item, url, index)
            result.rows.append(export_row(item))
            bar.update(1)
            if limit is not None and len(result.rows) >= limit:
                break
        idle = 0 if new else idle + 1
        url = _next_url(response, origin, token)
        if url and idle >= policy.idle_pages:
            raise InputError(_where(url), f"{idle} pages in a row brought no new issue (empty or repeated pages); giving up")


def check_request(repo: str, state: str, limit: int | None, api_url: str) -> None:
    """Everything about a fetch that can be wrong before the first request, refused at once."""
    check_repo(repo)
    if state not in STATES:
        raise InputError(repo, f"state must be one of {', '.join(STATES)}, got {state!r}")
    if limit is not None and limit < 1:
        raise InputError(repo, f"limit must be at least 1, got {limit}")
    check_api_url(api_url)


def check_api_url(api_url: str) -> None:
    """Refuse at once an API root that cannot work (not http(s), no host, a bad port, a query):
    a configuration error, not something to retry."""
    try:
        parts = urlsplit(api_url)
        port = parts.port
        httpx.URL(api_url)
    except (ValueError, httpx.InvalidURL) as exc:
        raise InputError("--api-url", f"not a valid URL: {scrub_url(api_url)} ({exc})") from None
    if parts.scheme not in ("http", "https"):
        raise InputError("--api-url", f"expected an http:// or https:// URL, got {scrub_url(api_url)}")
    if not parts.hostname:
        raise InputError("--api-url", f"no host in {scrub_url(api_url)}")
    if parts.username or parts.password:
        raise InputError("--api-url", "a user or password in the URL is refused; put the token in GITHUB_TOKEN")
    if parts.query or parts.fragment:
        raise InputError("--api-url", f"expected an API root without a query or fragment, got {scrub_url(api_url)}")
    del port


def _item_number(item: dict, url: str, index: int) -> int:
    number = item.get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        raise InputError(
            _where(url), f"expected a positive integer, got {_shown(number)}", record=f"item {index}", field="number"
        )
    return number


def _check_item(item: dict, url: str, index: int) -> None:
    """The fields `export_row` reshapes must have their API types (the rest is checked by freeze)."""
    where = f"item {index} (number {item['number']})"
    labels = item.get("labels")
    if labels is not None and not (
        isinstance(labels, list)
        and all(isinstance(x, str) or (isinstance(x, dict) and isinstance(x.get("name"), str)) for x in labels)
    ):
        raise InputError(
            _where(url),
            f"expected an array of label objects with a string name, got {_shown(labels)}",
            record=where,
            field="labels",
        )
    for key in ("title", "state", "created_at", "updated_at", "html_url"):
        if not isinstance(item.get(key), str):
            raise InputError(_where(url), f"expected a string, got {_shown(item.get(key))}", record=where, field=key)
    for key in ("body", "closed_at"):
        if item.get(key) is not None and not isinstance(item.get(key), str):
            raise InputError(_where(url), f"expected a string or null, got {_shown(item.get(key))}", record=where, field=key)


def _shown(value: object) -> str:
    return " ".join(orjson.dumps(value, default=str).decode()[:80].split())


class _Deadline:
    """The fetch's total deadline. Time counts as the larger of the wall clock and the waits
    slept (tests inject a `sleep` that returns at once)."""

    def __init__(self, seconds: float, sleep: Callable[[float], None]) -> None:
        self.seconds = seconds
        self.start = time.monotonic()
        self.slept = 0.0
        self._sleep = sleep

    def remaining(self) -> float:
        return self.seconds - max(time.monotonic() - self.start, self.slept)

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self._sleep(seconds)


def write_export(rows: list[dict], path: str | os.PathLike) -> None:
    """Write the rows as a JSON array, atomically (a failure leaves any old file as it was)."""
    atomic_write(path, orjson.dumps(rows, option=orjson.OPT_INDENT_2) + b"\n")


def check_output_folder(path: str | os.PathLike) -> None:
    """Refuse early (before any request) when the output's folder does not exist."""
    folder = os.path.dirname(os.fspath(path)) or "."
    if not os.path.isdir(folder):
        raise InputError(path, "output folder does not exist")


# --- one request, with its waits and retries --------------------------------------------------


def _get(
    client: httpx.Client,
    url: str,
    repo: str,
    token: Token | None,
    policy: RetryPolicy,
    sleep,
    clock,
    say,
    result: FetchResult,
    deadline: _Deadline | None = None,
) -> httpx.Response:
    """GET `url`, waiting out rate limits and retrying 5xx / dropped connections, within bounds."""
    deadline = deadline or _Deadline(policy.deadline_seconds, sleep)
    sleep = deadline.sleep
    server_failures = rate_waits = 0
    while True:
        result.requests += 1
        try:
            response = _bounded_get(client, url, policy, deadline)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:  # configuration: retrying cannot help
            raise InputError(_where(url), f"cannot request this URL: {_scrub(str(exc), token)}") from None
        except httpx.ConnectError as exc:
            raise InputError(_where(url), f"cannot connect: {_scrub(str(exc), token)}") from None
        except httpx.TransportError as exc:
            problem = f"network error ({type(exc).__name__}: {_scrub(str(exc), token) or 'no detail'})"
            server_failures = _backoff(server_failures, problem, url, policy, sleep, say, result, deadline)
            continue
        if response.status_code < 300:
            return response
        wait = rate_limit_wait(response, clock(), policy)
        if wait is not None:
            rate_waits += 1
            if rate_waits > policy.rate_limit_waits:
                raise InputError(
                    _where(url),
                    f"still rate limited after {policy.rate_limit_waits} waits; giving up "
                    "(try again later, or set GITHUB_TOKEN for a higher limit)",
                )
            if wait > policy.max_rate_limit_wait_seconds:
                raise InputError(
                    _where(url),
                    f"rate limited for another {wait:.0f} s, longer than the "
                    f"{policy.max_rate_limit_wait_seconds:.0f} s this command waits; try again later",
                )
            if wait >= deadline.remaining():
                raise InputError(
                    _where(url),
                    f"rate limited for another {wait:.0f} s, past the fetch's deadline "
                    f"({policy.deadline_seconds:g} s); try again later",
                )
            until = datetime.fromtimestamp(clock() + wait, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            say(
                f"microctx fetch: rate limited ({response.status_code}); waiting {wait:.0f} s until {until} "
                f"(wait {rate_waits} of {policy.rate_limit_waits})"
            )
            result.waits.append(wait)
            sleep(wait)
            continue
        if response.status_code >= 500:
            problem = f"server error {response.status_code} {response.reason_phrase}"
            server_failures = _backoff(server_failures, problem, url, policy, sleep, say, result, deadline)
            continue
        raise InputError(_where(url), _refusal(response, repo, token))


class _TooLarge(Exception):
    pass


def _bounded_get(client: httpx.Client, url: str, policy: RetryPolicy, deadline: _Deadline) -> httpx.Response:
    """GET `url` within the request deadline (and what is left of the whole fetch's): the response
    is read in a worker thread and abandoned when time is up, so a server that drips a byte every
    few seconds cannot hold the fetch; its body is capped at `max_response_bytes` after
    decompression (read and inflated piece by piece, so a gzip bomb never fills memory)."""
    seconds = min(policy.request_deadline_seconds, deadline.remaining())
    if seconds <= 0:
        raise InputError(_where(url), f"the fetch's deadline ({policy.deadline_seconds:g} s) has passed; giving up")
    cancel = threading.Event()
    try:
        return call_within(lambda: _read_response(client, url, policy, seconds, cancel), seconds, "microctx-fetch")
    except TimeUp:
        cancel.set()
        what = (
            f"the fetch's deadline of {policy.deadline_seconds:g} s"
            if seconds < policy.request_deadline_seconds
            else f"the response deadline of {policy.request_deadline_seconds:g} s"
        )
        raise InputError(_where(url), f"no complete response in time ({what}; the server is too slow); giving up") from None
    except _TooLarge:
        raise InputError(
            _where(url), f"the response is larger than {policy.max_response_bytes} bytes (after decompression); refusing it"
        ) from None


_DECODERS = {
    "gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    "x-gzip": lambda: zlib.decompressobj(16 + zlib.MAX_WBITS),
    "deflate": lambda: zlib.decompressobj(),
    "identity": None,
    "": None,
}


def _read_response(
    client: httpx.Client, url: str, policy: RetryPolicy, seconds: float, cancel: threading.Event
) -> httpx.Response:
    cap = policy.max_response_bytes
    timeout = httpx.Timeout(min(policy.timeout_seconds, seconds))
    with client.stream("GET", url, timeout=timeout) as streamed:
        encoding = streamed.headers.get("content-encoding", "").strip().lower()
        if encoding not in _DECODERS:
            raise httpx.DecodingError(f"unsupported content encoding {encoding!r}")
        make = _DECODERS[encoding]
        decoder = make() if make is not None else None
        body = bytearray()
        for chunk in streamed.iter_raw():
            if cancel.is_set():
                raise _TooLarge  # abandoned: whatever we raise is never looked at
            if decoder is None:
                body += chunk
            else:
                data = decoder.decompress(chunk, cap + 1 - len(body))
                body += data
                while decoder.unconsumed_tail and len(body) <= cap:
                    body += decoder.decompress(decoder.unconsumed_tail, cap + 1 - len(body))
            if len(body) > cap:
                raise _TooLarge
        headers = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")]
        return httpx.Response(streamed.status_code, headers=headers, content=bytes(body), request=streamed.request)


def _backoff(
    failures: int, problem: str, url: str, policy: RetryPolicy, sleep, say, result: FetchResult, deadline: _Deadline | None = None
) -> int:
    """Wait before retry number `failures + 1`, or give up when the retries (or the time) are spent."""
    if failures >= policy.server_retries:
        raise InputError(_where(url), f"{problem} after {failures + 1} attempts; giving up")
    wait = min(policy.backoff_seconds * 2**failures, policy.max_backoff_seconds)
    if deadline is not None and wait >= deadline.remaining():
        raise InputError(
            _where(url), f"{problem}; no time left for a retry before the deadline ({policy.deadline_seconds:g} s); giving up"
        )
    say(f"microctx fetch: {problem}; retrying in {wait:g} s (retry {failures + 1} of {policy.server_retries})")
    result.waits.append(wait)
    sleep(wait)
    return failures + 1


def rate_limit_wait(response: httpx.Response, now: float, policy: RetryPolicy = RetryPolicy()) -> float | None:
    """Seconds to wait when `response` is a rate-limit refusal; None when it is not one.

    `retry-after` (seconds) wins; else `x-ratelimit-remaining: 0` with `x-ratelimit-reset` (epoch
    seconds) waits until the reset plus one second (the reset is rounded to whole seconds); a 429
    with neither waits `policy.secondary_limit_wait_seconds`. A 403 without these headers is a
    permission refusal, not a rate limit.
    """
    if response.status_code not in (403, 429):
        return None
    headers = response.headers
    retry_after = _finite(headers.get("retry-after"))
    if retry_after is not None:
        return max(retry_after, 0.0)
    reset = _finite(headers.get("x-ratelimit-reset"))
    if headers.get("x-ratelimit-remaining") == "0" and reset is not None:
        return max(reset - now, 0.0) + 1.0
    return policy.secondary_limit_wait_seconds if response.status_code == 429 else None


def _finite(text: str | None) -> float | None:
    """A header's number when it is one and finite (`nan`, `inf` and words are ignored)."""
    try:
        value = float(text) if text is not None else math.nan
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _refusal(response: httpx.Response, repo: str, token: Token | None) -> str:
    """One line saying why the API refused, what to do, and never the token."""
    status = f"{response.status_code} {response.reason_phrase}"
    detail = _api_message(response, token)
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


def _api_message(response: httpx.Response, token: Token | None) -> str:
    try:
        message = response.json().get("message")
    except (ValueError, AttributeError):
        message = None
    text = str(message) if message else (response.text.strip() or "no message")
    return _scrub(" ".join(text.split())[:200], token)


def _page_items(response: httpx.Response, url: str, token: Token | None) -> list[dict]:
    try:
        page = orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise InputError(_where(url), f"the API answered with invalid JSON: {_scrub(str(exc), token)}") from None
    if not isinstance(page, list) or not all(isinstance(item, dict) for item in page):
        raise InputError(_where(url), "the API answered with something other than an array of issue objects")
    return page


def _next_url(response: httpx.Response, origin: tuple, token: Token | None) -> str | None:
    """The `rel="next"` link; refused when it leaves the API's host (the token would follow it)."""
    link = response.links.get("next")
    if not link or not link.get("url"):
        return None
    url = str(response.url.join(link["url"]))
    if _origin(url) != origin:
        host = urlsplit(url).netloc.rsplit("@", 1)[-1]
        raise InputError(
            _where(str(response.url)), f"the next-page link leaves the API host ({_scrub(host, token)}); refusing to follow it"
        )
    return url


# --- small helpers ------------------------------------------------------------------------------


def _headers(token: Token | None) -> dict[str, str]:
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION, "User-Agent": "microctx-fetch"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token.reveal()}"
    headers["Accept-Encoding"] = "gzip, deflate"  # the encodings `_read_response` inflates within its cap
    return headers


def _origin(url: str) -> tuple:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def _where(url: str) -> str:
    return f"GET {scrub_url(url)}"


def _scrub(text: str, token: Token | None) -> str:
    text = scrub_urls(text)
    return token.scrub(text) if token is not None else text


def _say_stderr(message: str) -> None:
    from tqdm import tqdm

    tqdm.write(message, file=sys.stderr)


def _progress_bar(repo: str, limit: int | None, progress: bool | None):
    from tqdm import tqdm

    # disable=None: tqdm shows the bar only when stderr is a terminal
    return tqdm(
        total=limit, desc=repo, unit=" issues", file=sys.stderr, leave=False, disable=None if progress is None else not progress
    )
