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
`pull_request` key) are skipped and not counted against the limit. One request, its waits and
retries, the token and the refusals are in `microctx.corpus.github`, on the HTTP layer
(`microctx._io.http`).
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx
import orjson

from microctx._io.atomic import atomic_write
from microctx._io.http import Attempts, Budget, make_client
from microctx.corpus.github import (
    TOKEN_ENV_VARS,
    Api,
    RetryPolicy,
    Token,
    api_headers,
    rate_limit_wait,
    token_from_env,
)
from microctx.errors import InputError, scrub_url

__all__ = [
    "DEFAULT_API_URL",
    "TOKEN_ENV_VARS",
    "FetchResult",
    "RetryPolicy",
    "Token",
    "check_request",
    "export_row",
    "fetch_issues",
    "rate_limit_wait",
    "source_string",
    "token_from_env",
    "write_export",
]

DEFAULT_API_URL = "https://api.github.com"
STATES = ("all", "open", "closed")
PAGE_SIZE = 100  # the REST API's maximum
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


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
    policy: RetryPolicy | None = None,
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
    policy = policy or RetryPolicy()
    check_request(repo, state, limit, api_url)
    url = issues_url(api_url, repo, state)
    result = FetchResult(rows=[])
    bar = _progress_bar(repo, limit, progress)
    budget = Budget(policy.deadline_seconds, sleep)
    try:
        with make_client(headers=api_headers(token), bounds=policy.bounds, transport=transport) as client:
            api = Api(client, repo, token, policy, budget, clock, say or _say_stderr)
            _read_pages(api, url, limit, result, bar)
    finally:
        bar.close()
    return result


def _read_pages(api: Api, url: str | None, limit: int | None, result: FetchResult, bar) -> None:
    """Follow the pages from `url` until the last one or `limit` issues, within the policy's bounds:
    the deadline, the page cap, no page read twice (a `Link` loop), and no run of pages that bring
    nothing new."""
    seen: set[int] = set()
    visited: set[str] = set()
    idle = 0
    policy = api.policy
    while url and (limit is None or len(result.rows) < limit):
        if url in visited:
            raise InputError(api.where(url), "the next-page link points back to a page already read (a Link loop); giving up")
        if result.pages >= policy.max_pages:
            raise InputError(api.where(url), f"more than {policy.max_pages} pages; giving up")
        visited.add(url)
        counts = Attempts()
        try:
            response = api.get(url, counts)
        finally:
            result.requests += counts.attempts
            result.waits.extend(counts.waits)
        page = _page_items(api, response, url)
        result.pages += 1
        new = _take_page(api, page, url, limit, seen, result, bar)
        idle = 0 if new else idle + 1
        url = api.next_url(response)
        if url and idle >= policy.idle_pages:
            raise InputError(api.where(url), f"{idle} pages in a row brought no new issue (empty or repeated pages); giving up")


def _take_page(api: Api, page: list[dict], url: str, limit: int | None, seen: set[int], result: FetchResult, bar) -> int:
    """Add the page's new issues to `result` (up to `limit`); the number of new items on it."""
    new = 0
    for index, item in enumerate(page):
        number = _item_number(api, item, url, index)
        if number in seen:
            result.duplicates_skipped += 1
            continue
        seen.add(number)
        new += 1
        if "pull_request" in item:
            result.pull_requests_skipped += 1
            continue
        _check_item(api, item, url, index)
        result.rows.append(export_row(item))
        bar.update(1)
        if limit is not None and len(result.rows) >= limit:
            break
    return new


def _page_items(api: Api, response: httpx.Response, url: str) -> list[dict]:
    try:
        page = orjson.loads(response.content)
    except orjson.JSONDecodeError as exc:
        raise InputError(api.where(url), f"the API answered with invalid JSON: {api.shown(str(exc))}") from None
    if not isinstance(page, list) or not all(isinstance(item, dict) for item in page):
        raise InputError(api.where(url), "the API answered with something other than an array of issue objects")
    return page


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


def _item_number(api: Api, item: dict, url: str, index: int) -> int:
    number = item.get("number")
    if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
        raise InputError(
            api.where(url), f"expected a positive integer, got {_shown(api, number)}", record=f"item {index}", field="number"
        )
    return number


def _check_item(api: Api, item: dict, url: str, index: int) -> None:
    """The fields `export_row` reshapes must have their API types (the rest is checked by freeze)."""
    where = f"item {index} (number {item['number']})"
    labels = item.get("labels")
    if labels is not None and not (
        isinstance(labels, list)
        and all(isinstance(x, str) or (isinstance(x, dict) and isinstance(x.get("name"), str)) for x in labels)
    ):
        raise InputError(
            api.where(url),
            f"expected an array of label objects with a string name, got {_shown(api, labels)}",
            record=where,
            field="labels",
        )
    for key in ("title", "state", "created_at", "updated_at", "html_url"):
        if not isinstance(item.get(key), str):
            raise InputError(api.where(url), f"expected a string, got {_shown(api, item.get(key))}", record=where, field=key)
    for key in ("body", "closed_at"):
        if item.get(key) is not None and not isinstance(item.get(key), str):
            raise InputError(
                api.where(url), f"expected a string or null, got {_shown(api, item.get(key))}", record=where, field=key
            )


def _shown(api: Api, value: object) -> str:
    return api.shown(orjson.dumps(value, default=str).decode(), 80)


def write_export(rows: list[dict], path: str | os.PathLike) -> None:
    """Write the rows as a JSON array, atomically (a failure leaves any old file as it was)."""
    atomic_write(path, orjson.dumps(rows, option=orjson.OPT_INDENT_2) + b"\n")


def check_output_folder(path: str | os.PathLike) -> None:
    """Refuse early (before any request) when the output's folder does not exist."""
    folder = os.path.dirname(os.fspath(path)) or "."
    if not os.path.isdir(folder):
        raise InputError(path, "output folder does not exist")


def _say_stderr(message: str) -> None:
    from tqdm import tqdm

    tqdm.write(message, file=sys.stderr)


def _progress_bar(repo: str, limit: int | None, progress: bool | None):
    from tqdm import tqdm

    # disable=None: tqdm shows the bar only when stderr is a terminal
    return tqdm(
        total=limit, desc=repo, unit=" issues", file=sys.stderr, leave=False, disable=None if progress is None else not progress
    )
