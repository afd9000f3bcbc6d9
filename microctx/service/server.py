"""Starting the service: check the answer file, open and bind the state, run uvicorn with deadlines.

uvicorn already bounds an idle keep-alive connection (`timeout_keep_alive`) and the header
size (h11's incomplete-event limit). It has no deadline for a client that sends its request
headers a byte at a time, so `DeadlineH11Protocol` closes a connection whose headers are not
complete HEADER_TIMEOUT seconds after it opened (or after its last response); the body has its
own deadline in the app (`app.BODY_TIMEOUT`).

h11 also accepts a bare LF as a line ending in a request head (and a bare CR in a chunk extension,
a bare LF in trailers): a proxy in front that reads such a line differently (the LF as part of a
header value, say) disagrees with the service on the request's headers or where it ends, the
shape of request smuggling. `CRLFOnlyBuffer` makes every line h11 reads as framing (request
line, header lines, the blank line ending the head, chunk-size lines, trailers) end in CRLF with
no CR or LF elsewhere, or h11 raises its protocol error and uvicorn answers 400 and closes the
connection; bodies are read through the same buffer unchecked.
"""

from __future__ import annotations

import asyncio
import os
import sys

import h11
from h11._receivebuffer import ReceiveBuffer
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


class CRLFOnlyBuffer(ReceiveBuffer):
    """h11's receive buffer, refusing a framing line whose line ending is not CRLF.

    h11 reads heads and trailers with `maybe_extract_lines` and chunk-size lines with
    `maybe_extract_next_line`; both take the bytes out with `_extract`, which is where they are
    checked (whatever way they reached the buffer: one segment, pipelined, a byte at a time).
    Bodies go through `maybe_extract_at_most` and are not checked."""

    _framing = False

    def _extract(self, count: int) -> bytearray:
        out = super()._extract(count)
        if self._framing and not out.count(b"\r") == out.count(b"\n") == out.count(b"\r\n"):
            raise h11.RemoteProtocolError("a line ending that is not CRLF in the request's framing")
        return out

    def maybe_extract_next_line(self) -> bytearray | None:
        self._framing = True
        try:
            return super().maybe_extract_next_line()
        finally:
            self._framing = False

    def maybe_extract_lines(self) -> list[bytearray] | None:
        self._framing = True
        try:
            return super().maybe_extract_lines()
        finally:
            self._framing = False


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for the request headers, reading framing lines
    through `CRLFOnlyBuffer`."""

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
        buffer = self.conn._receive_buffer
        if type(buffer) is not ReceiveBuffer or buffer:
            raise RuntimeError("h11's receive buffer is not the one CRLFOnlyBuffer extends")
        self.conn._receive_buffer = CRLFOnlyBuffer()
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        before = self.cycle
        super().data_received(data)
        if self.cycle is not None and self.cycle is not before:
            self._disarm()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's 400, or only the close when a response already went out (the app answered
        before the body ended, say 401, and its chunked framing turned out malformed): uvicorn
        would raise h11's error out of `data_received` and asyncio log it as a fatal error."""
        try:
            super().send_400_response(msg)
        except h11.LocalProtocolError:
            self.transport.close()

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
