"""The client side: `microctx submit` and `microctx leaderboard`, on httpx.

Every refusal is one line: what the server said, and for 429 when the quota resets and what is
left. The token comes from an environment variable (never an argument: arguments are visible to
every user of the machine in the process list) and is never printed.
"""

from __future__ import annotations

import base64
import os

import httpx
import orjson

from microctx._io import http
from microctx._io.jsonio import read_bytes
from microctx.contract.canonical import dumps
from microctx.errors import InputError, scrub_urls

# a submission is graded while the client waits: up to 2 minutes for the whole response, a board
# of any sane size is far below 16 MiB; redirects are not followed (the token stays with the server)
BOUNDS = http.Bounds(timeout_seconds=30.0, request_seconds=120.0, max_bytes=16 << 20)


class Refused(Exception):
    """The server answered, and did not score (or show) what was asked: one line."""


def _url(server: str, path: str) -> str:
    return server.rstrip("/") + path


def _refusal(response: httpx.Response) -> str:
    try:
        document = response.json()
    except ValueError:
        document = {}
    message = document.get("error") if isinstance(document, dict) else None
    line = f"HTTP {response.status_code}: {message or response.reason_phrase}"
    if response.status_code == 429 and isinstance(document, dict):
        line += (
            f" (resets at {document.get('resets_at')}; left today: {_left(document.get('remaining_today'))}, "
            f"left in total: {_left(document.get('remaining_total'))})"
        )
    return line


def _left(value: object) -> str:
    return "unlimited" if value is None else str(value)


def _request(method: str, url: str, **options) -> httpx.Response:
    """One request through the project's HTTP layer (`microctx._io.http`); InputError when no
    usable response came (unreachable, too slow, too large)."""
    with http.make_client(bounds=BOUNDS, follow_redirects=False) as client:
        try:
            return http.request(client, method, url, bounds=BOUNDS, budget=http.Budget(), **options)
        except http.HttpFailure as exc:
            raise InputError("--server", f"cannot reach {scrub_urls(url)}: {scrub_urls(str(exc))}") from None


def submit(submission: str, server: str, token_env: str, manifest: dict | None = None) -> dict:
    """POST a submission file; the scored result document, or Refused."""
    token = os.environ.get(token_env)
    if not token:
        raise InputError(f"${token_env}", "no token in this environment variable (see `microctx serve admin add-team`)")
    body = read_bytes(submission)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if manifest is not None:
        headers["X-Microctx-Manifest"] = base64.b64encode(orjson.dumps(manifest)).decode()
    response = _request("POST", _url(server, "/v1/submissions"), content=body, headers=headers)
    if response.status_code != 201:
        raise Refused(_refusal(response))
    return response.json()


def fetch_leaderboard(server: str) -> dict:
    response = _request("GET", _url(server, "/v1/leaderboard"))
    if response.status_code != 200:
        raise Refused(_refusal(response))
    return response.json()


def result_line(result: dict) -> str:
    quota = result.get("quota") or {}
    return (
        f"{result['team']}: {result['part']} {result['metric']} {result['score']:.3f} ({result['decision']}); "
        f"submission {result['id']}; left today: {_left(quota.get('remaining_today'))}, "
        f"left in total: {_left(quota.get('remaining_total'))}"
    )


def leaderboard_lines(board: dict) -> list[str]:
    lines = [
        f"{board['part']} board ({board['status']}): {board['records']} records in {board['components']} components",
        "rank_group\tteam\tscore\tci_low\tci_high\tlooks",
    ]
    for team in board["teams"]:
        lines.append(
            f"{team['rank_group']}\t{team['team']}\t{team['score']:.3f}\t{team['ci_low']:.3f}\t"
            f"{team['ci_high']:.3f}\t{team['looks']}"
        )
    return lines


def receipt_bytes(result: dict) -> bytes:
    """The signed receipt of a scored submission, as `microctx submit --receipt` writes it."""
    return dumps(result["receipt"])
