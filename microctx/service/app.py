"""The HTTP service (Starlette): the routes, bearer-token checks, and hostile-request limits.

Routes: `POST /v1/submissions` (the submission document as the JSON body, `Authorization:
Bearer TOKEN`, optionally the run manifest as base64 JSON in `X-Microctx-Manifest`);
`GET /v1/submissions/{id}` (the team's own only); `GET /v1/quota`; `GET /v1/leaderboard`
(JSON); `GET /v1/public-key`; `GET /` (the page). Status codes: 401 no valid token, 408 a body
slower than BODY_TIMEOUT, 409 closed, 413 larger than the size limit, 422 not scorable (not
counted), 429 over quota (with the reset time and what is left), 503 the service's own failure
(refunded). Database work runs in the thread pool; the event loop only moves bytes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from dataclasses import dataclass, field

import orjson
from sqlalchemy import select
from sqlalchemy.engine import Engine
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from microctx.service import intake, leaderboard, page
from microctx.service.competition import Competition, Rejected
from microctx.service.db import ledger, reading, submissions
from microctx.service.quotas import QuotaExceeded, usage
from microctx.service.receipts import public_key_line
from microctx.service.state import competition_row, utc_now
from microctx.service.tokens import bearer_token, team_of_token

MAX_BODY = 8 * 1024 * 1024
MAX_MANIFEST = 8 * 1024
BODY_TIMEOUT = 30.0


@dataclass
class Service:
    engine: Engine
    comp: Competition
    settings: intake.Settings
    max_body: int = MAX_BODY
    body_timeout: float = BODY_TIMEOUT
    _board: dict = field(default_factory=dict)

    def team(self, request: Request):
        with reading(self.engine) as connection:
            return team_of_token(connection, bearer_token(request.headers.get("authorization")))

    def cached_board(self) -> dict:
        """The board, recomputed only when the ledger or the status changed."""
        with reading(self.engine) as connection:
            key = (
                connection.execute(select(ledger.c.id).order_by(ledger.c.id.desc()).limit(1)).scalar(),
                competition_row(connection).status,
            )
        if self._board.get("key") != key:
            self._board = {"key": key, "board": leaderboard.board(self.engine, self.comp)}
        return self._board["board"]


def _error(status: int, message: str, **extra) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    return JSONResponse({"error": message, **extra}, status_code=status, headers=headers)


UNAUTHORIZED = "no valid token: send Authorization: Bearer TOKEN (from `microctx serve admin add-team`)"


class _TooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The body, at most `limit` bytes (else _TooLarge), within `timeout` seconds (else TimeoutError)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge()

    async def collect() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _TooLarge()
            chunks.append(chunk)
        return b"".join(chunks)

    return await asyncio.wait_for(collect(), timeout)


def _manifest(request: Request) -> dict | None:
    header = request.headers.get("x-microctx-manifest")
    if header is None:
        return None
    try:
        if len(header) > MAX_MANIFEST:
            raise ValueError(f"larger than {MAX_MANIFEST} bytes")
        document = orjson.loads(base64.b64decode(header, validate=True))
    except (ValueError, binascii.Error) as exc:
        raise Rejected(f"X-Microctx-Manifest: expected base64 of a JSON object: {exc}") from None
    if not isinstance(document, dict):
        raise Rejected("X-Microctx-Manifest: expected base64 of a JSON object")
    return document


async def post_submission(request: Request) -> Response:
    service: Service = request.app.state.service
    team = await run_in_threadpool(service.team, request)
    if team is None:
        return _error(401, UNAUTHORIZED)
    try:
        body = await _read_body(request, service.max_body, service.body_timeout)
        result = await run_in_threadpool(
            intake.accept, service.engine, service.comp, service.settings, team, body, _manifest(request)
        )
    except _TooLarge:
        return _error(413, f"the submission is larger than {service.max_body} bytes", limit=service.max_body)
    except TimeoutError:
        return _error(408, f"the body did not arrive within {service.body_timeout:g} s")
    except Rejected as exc:
        return _error(422, str(exc), counted=False)
    except QuotaExceeded as exc:
        return _error(429, "the submission quota is used up", **exc.state.as_json(), counted=False)
    except intake.Closed as exc:
        return _error(409, str(exc), counted=False)
    except intake.Revoked:
        return _error(401, UNAUTHORIZED, counted=False)
    except intake.Refunded as exc:
        return _error(
            503,
            "the service failed to score this submission; it was refunded (not counted)",
            submission_id=exc.submission_id,
            counted=False,
        )
    return JSONResponse(result, status_code=201)


def _own_submission(service: Service, team, submission_id: str) -> dict | None:
    with reading(service.engine) as connection:
        row = connection.execute(
            select(submissions).where(submissions.c.id == submission_id, submissions.c.team_id == team.id)
        ).first()
    if row is None:
        return None
    if row.state != "scored":
        return {"id": row.id, "team": team.name, "received_at": row.received_at, "state": row.state, "counted": False}
    return intake.result_document(
        row.id, team.name, row.received_at, row.released, row.decision, orjson.loads(row.receipt), service.settings.ladder
    )


async def get_submission(request: Request) -> Response:
    service: Service = request.app.state.service
    team = await run_in_threadpool(service.team, request)
    if team is None:
        return _error(401, UNAUTHORIZED)
    found = await run_in_threadpool(_own_submission, service, team, request.path_params["submission_id"])
    return JSONResponse(found) if found is not None else _error(404, "no such submission of this team")


def _quota(service: Service, team) -> dict:
    with reading(service.engine) as connection:
        state = usage(connection, team.id, utc_now(), service.settings.quota)
    return {
        "team": team.name,
        "daily_quota": service.settings.quota.daily,
        "total_quota": service.settings.quota.total,
        **state.as_json(),
    }


async def get_quota(request: Request) -> Response:
    service: Service = request.app.state.service
    team = await run_in_threadpool(service.team, request)
    if team is None:
        return _error(401, UNAUTHORIZED)
    return JSONResponse(await run_in_threadpool(_quota, service, team))


async def get_leaderboard(request: Request) -> Response:
    return JSONResponse(await run_in_threadpool(request.app.state.service.cached_board))


async def get_page(request: Request) -> Response:
    document = await run_in_threadpool(request.app.state.service.cached_board)
    return HTMLResponse(
        page.render(document), headers={"Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'"}
    )


def _key(service: Service) -> str:
    with reading(service.engine) as connection:
        return public_key_line(competition_row(connection).signing_key)


async def get_public_key(request: Request) -> Response:
    return JSONResponse({"key": await run_in_threadpool(_key, request.app.state.service)})


class _OneFraming:
    """A request carrying both `Transfer-Encoding` and `Content-Length` is refused (400) and its
    connection closed (RFC 9112, 6.3): a proxy in front that framed it by its length would read
    the rest of the chunked body as the start of the next request (request smuggling); h11 reads
    it as chunked and served the request pipelined after it on the same connection."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        names = {name.lower() for name, _ in scope.get("headers", ())} if scope["type"] == "http" else set()
        if {b"transfer-encoding", b"content-length"} <= names:
            body = orjson.dumps({"error": "both Transfer-Encoding and Content-Length: refused (ambiguous framing)"})
            headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def create_app(service: Service) -> Starlette:
    from starlette.middleware import Middleware

    app = Starlette(
        middleware=[Middleware(_OneFraming)],
        routes=[
            Route("/", get_page, methods=["GET"]),
            Route("/v1/submissions", post_submission, methods=["POST"]),
            Route("/v1/submissions/{submission_id}", get_submission, methods=["GET"]),
            Route("/v1/quota", get_quota, methods=["GET"]),
            Route("/v1/leaderboard", get_leaderboard, methods=["GET"]),
            Route("/v1/public-key", get_public_key, methods=["GET"]),
        ],
    )
    app.state.service = service
    return app
