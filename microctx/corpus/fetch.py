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

import os
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
import orjson

from microctx.errors import InputError
from microctx.files import atomic_write

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
    timeout_seconds: float = 30.0


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
    return (f"{api_url.rstrip('/')}/repos/{owner}/{name}/issues"
            f"?state={state}&sort=created&direction=desc&per_page={PAGE_SIZE}")


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


def fetch_issues(repo: str, *, state: str = "all", limit: int | None = None, api_url: str = DEFAULT_API_URL,
                 token: Token | None = None, policy: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.time,
                 say: Callable[[str], None] | None = None, progress: bool | None = None,
                 transport: httpx.BaseTransport | None = None) -> FetchResult:
    """Fetch the repository's issues (pull requests skipped), at most `limit` of them.

    `sleep` and `clock` are injectable so tests can check waits without waiting; `say` receives
    the stderr notes (rate-limit waits, retries); `progress` None shows a bar only on a terminal.
    Raises InputError (one line, token-free) on a 401/403/404, on a network failure, and when a
    retry or wait bound is exceeded.
    """
    if state not in STATES:
        raise InputError(repo, f"state must be one of {', '.join(STATES)}, got {state!r}")
    if limit is not None and limit < 1:
        raise InputError(repo, f"limit must be at least 1, got {limit}")
    url = issues_url(api_url, repo, state)
    origin = _origin(url)
    say = say or _say_stderr
    result = FetchResult(rows=[])
    seen: set = set()
    bar = _progress_bar(repo, limit, progress)
    try:
        with httpx.Client(headers=_headers(token), timeout=policy.timeout_seconds,
                          follow_redirects=True, transport=transport) as client:
            while url and (limit is None or len(result.rows) < limit):
                response = _get(client, url, repo, token, policy, sleep, clock, say, result)
                page = _page_items(response, url, token)
                result.pages += 1
                for item in page:
                    if "pull_request" in item:
                        result.pull_requests_skipped += 1
                        continue
                    number = item.get("number")
                    if number in seen:
                        result.duplicates_skipped += 1
                        continue
                    seen.add(number)
                    result.rows.append(export_row(item))
                    bar.update(1)
                    if limit is not None and len(result.rows) >= limit:
                        break
                url = _next_url(response, origin, token)
    finally:
        bar.close()
    return result


def write_export(rows: list[dict], path: str | os.PathLike) -> None:
    """Write the rows as a JSON array, atomically (a failure leaves any old file as it was)."""
    atomic_write(path, orjson.dumps(rows, option=orjson.OPT_INDENT_2) + b"\n")


def check_output_folder(path: str | os.PathLike) -> None:
    """Refuse early (before any request) when the output's folder does not exist."""
    folder = os.path.dirname(os.fspath(path)) or "."
    if not os.path.isdir(folder):
        raise InputError(path, "output folder does not exist")


# --- one request, with its waits and retries --------------------------------------------------

def _get(client: httpx.Client, url: str, repo: str, token: Token | None, policy: RetryPolicy,
         sleep, clock, say, result: FetchResult) -> httpx.Response:
    """GET `url`, waiting out rate limits and retrying 5xx / dropped connections, within bounds."""
    server_failures = rate_waits = 0
    while True:
        result.requests += 1
        try:
            response = client.get(url)
        except httpx.ConnectError as exc:
            raise InputError(_where(url), f"cannot connect: {_scrub(str(exc), token)}") from None
        except httpx.TransportError as exc:
            problem = f"network error ({type(exc).__name__}: {_scrub(str(exc), token) or 'no detail'})"
            server_failures = _backoff(server_failures, problem, url, policy, sleep, say, result)
            continue
        if response.status_code < 300:
            return response
        wait = rate_limit_wait(response, clock(), policy)
        if wait is not None:
            rate_waits += 1
            if rate_waits > policy.rate_limit_waits:
                raise InputError(_where(url), f"still rate limited after {policy.rate_limit_waits} waits; giving up "
                                 "(try again later, or set GITHUB_TOKEN for a higher limit)")
            if wait > policy.max_rate_limit_wait_seconds:
                raise InputError(_where(url), f"rate limited for another {wait:.0f} s, longer than the "
                                 f"{policy.max_rate_limit_wait_seconds:.0f} s this command waits; try again later")
            until = datetime.fromtimestamp(clock() + wait, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            say(f"microctx fetch: rate limited ({response.status_code}); waiting {wait:.0f} s until {until} "
                f"(wait {rate_waits} of {policy.rate_limit_waits})")
            result.waits.append(wait)
            sleep(wait)
            continue
        if response.status_code >= 500:
            problem = f"server error {response.status_code} {response.reason_phrase}"
            server_failures = _backoff(server_failures, problem, url, policy, sleep, say, result)
            continue
        raise InputError(_where(url), _refusal(response, repo, token))


def _backoff(failures: int, problem: str, url: str, policy: RetryPolicy, sleep, say, result: FetchResult) -> int:
    """Wait before retry number `failures + 1`, or give up when the retries are spent."""
    if failures >= policy.server_retries:
        raise InputError(_where(url), f"{problem} after {failures + 1} attempts; giving up")
    wait = min(policy.backoff_seconds * 2 ** failures, policy.max_backoff_seconds)
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
    try:
        if "retry-after" in headers:
            return max(float(headers["retry-after"]), 0.0)
        if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
            return max(float(headers["x-ratelimit-reset"]) - now, 0.0) + 1.0
    except ValueError:
        pass
    return policy.secondary_limit_wait_seconds if response.status_code == 429 else None


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
        raise InputError(_where(str(response.url)), f"the next-page link leaves the API host "
                         f"({_scrub(urlsplit(url).netloc, token)}); refusing to follow it")
    return url


# --- small helpers ------------------------------------------------------------------------------

def _headers(token: Token | None) -> dict[str, str]:
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
               "User-Agent": "microctx-fetch"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token.reveal()}"
    return headers


def _origin(url: str) -> tuple:
    parts = urlsplit(url)
    return parts.scheme, parts.hostname, parts.port


def _where(url: str) -> str:
    return f"GET {url}"


def _scrub(text: str, token: Token | None) -> str:
    return token.scrub(text) if token is not None else text


def _say_stderr(message: str) -> None:
    from tqdm import tqdm

    tqdm.write(message, file=sys.stderr)


def _progress_bar(repo: str, limit: int | None, progress: bool | None):
    from tqdm import tqdm

    # disable=None: tqdm shows the bar only when stderr is a terminal
    return tqdm(total=limit, desc=repo, unit=" issues", file=sys.stderr, leave=False,
                disable=None if progress is None else not progress)
