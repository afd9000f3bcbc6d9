"""Starting the service: check the answer file, open and bind the state, run uvicorn with deadlines.

uvicorn already bounds an idle keep-alive connection (`timeout_keep_alive`) and the header
size (h11's incomplete-event limit). It has no deadline for a client that sends its request
headers a byte at a time, so `DeadlineH11Protocol` closes a connection whose headers are not
complete HEADER_TIMEOUT seconds after it opened (or after its last response); the body has its
own deadline in the app (`app.BODY_TIMEOUT`).
"""

from __future__ import annotations

import asyncio
import os
import sys

from uvicorn.protocols.http.h11_impl import H11Protocol

from microctx.service import app as service_app
from microctx.service import intake
from microctx.service.competition import load_competition
from microctx.service.db import open_state
from microctx.service.quotas import Quota
from microctx.service.state import bind_answers, ensure_competition

HEADER_TIMEOUT = 10.0
KEEP_ALIVE = 5
MAX_CONNECTIONS = 256  # beyond this uvicorn answers 503 at once (bounds threads and buffered bodies)


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for the request headers."""

    _header_timer: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._header_timer = self.loop.call_later(HEADER_TIMEOUT, self._headers_overdue)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_overdue(self) -> None:
        if (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)
        if self.cycle is not None and self.cycle is not before:
            self._disarm()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)


def build_service(
    answers: str,
    public: str,
    state_url: str,
    *,
    daily_quota: int | None = None,
    total_quota: int | None = None,
    ladder: bool = True,
) -> service_app.Service:
    """Everything `serve` checks before it listens: the answer file's mode, the state, the binding."""
    from microctx.service.competition import check_private_file

    check_private_file(answers)
    engine = open_state(state_url)
    row = ensure_competition(engine)
    comp = load_competition(answers, public, row.split_seed)
    bind_answers(engine, comp.answers_sha256, comp.corpus_sha256)
    return service_app.Service(engine, comp, intake.Settings(Quota(daily_quota, total_quota), ladder))


def run(service: service_app.Service, host: str, port: int) -> None:
    import uvicorn

    config = uvicorn.Config(
        service_app.create_app(service),
        host=host,
        port=port,
        http=DeadlineH11Protocol,
        timeout_keep_alive=KEEP_ALIVE,
        limit_concurrency=MAX_CONNECTIONS,
        log_level=os.environ.get("MICROCTX_SERVICE_LOG", "warning"),
        access_log=False,
        lifespan="off",
    )
    public = int(service.comp.public.sum())
    print(
        f"microctx serve: grading answers {service.comp.answers_sha256[:12]}… ({public} public, "
        f"{len(service.comp.test_ids) - public} private test records) on http://{host}:{port}",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.Server(config).run()
