"""The HTTP layer (microctx/_io/http.py) on its own, through httpx.MockTransport: the one
`Retry-After` rule, retries that count every attempt, the decompressed size cap, deadlines
checked between chunks in the caller's thread, the one SSE reader. The servers that really
misbehave over a socket are in test_hostile_network.py and test_fetch_secrets.py."""

from __future__ import annotations

import gzip
import threading
import time
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest

from microctx._io.http import (
    SSE_DONE,
    Attempts,
    Bounds,
    Budget,
    HttpFailure,
    backoff,
    make_client,
    open_stream,
    request,
    retry_after,
    retrying,
    sse_data,
)

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    "value, seconds",
    [
        ("3", 3.0),
        (" 2.5 ", 2.5),
        ("-4", 0.0),
        ("nan", None),
        ("inf", None),
        ("-inf", None),
        ("soon", None),
        ("", None),
        (None, None),
        (format_datetime(datetime.fromtimestamp(NOW + 90, UTC), usegmt=True), 90.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0),  # in the past
    ],
)
def test_one_retry_after_rule(value, seconds):
    assert retry_after(value, NOW) == seconds


def test_retry_after_is_capped():
    assert retry_after("7200", NOW, cap=60.0) == 60.0


def test_backoff_doubles_up_to_its_cap():
    assert [backoff(n, 1.0, 10.0) for n in range(6)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert backoff(10_000, 1.0, 10.0) == 10.0  # no overflow


def test_retrying_counts_every_attempt_and_wait():
    slept: list[float] = []
    outcomes = iter([ValueError("first"), ValueError("second"), "answer"])

    def attempt() -> str:
        outcome = next(outcomes)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def decide(result, error, number):
        return 0.5 * number if error is not None else None

    counts = Attempts()
    assert retrying(attempt, decide, budget=Budget(sleep=slept.append), counts=counts) == "answer"
    assert (counts.attempts, counts.retries, counts.waits, slept) == (3, 2, [0.5, 1.0], [0.5, 1.0])


def test_retrying_gives_up_with_the_deciders_error_and_still_counts():
    counts = Attempts()

    def decide(result, error, number):
        if number >= 2:
            raise RuntimeError(f"gave up after {number}")
        return 0.0

    with pytest.raises(RuntimeError, match="gave up after 2"):
        retrying(lambda: 1 / 0, decide, budget=Budget(sleep=lambda s: None), counts=counts)
    assert (counts.attempts, counts.retries) == (2, 1)


def test_the_budget_counts_waits_slept_even_when_sleep_returns_at_once():
    budget = Budget(10.0, sleep=lambda s: None)
    budget.sleep(9.5)
    assert budget.remaining() <= 0.5


def client_for(handler) -> httpx.Client:
    return make_client(transport=httpx.MockTransport(handler))


def test_the_cap_counts_inflated_bytes():
    bomb = gzip.compress(b" " * (4 << 20))
    with client_for(lambda r: httpx.Response(200, stream=httpx.ByteStream(bomb), headers={"Content-Encoding": "gzip"})) as client:
        with pytest.raises(HttpFailure, match="larger than 1048576 bytes") as caught:
            request(client, "GET", "http://h/x", bounds=Bounds(max_bytes=1 << 20), budget=Budget())
        assert caught.value.kind == "too_large" and len(bomb) < 1 << 20
        small = request(client, "GET", "http://h/x", bounds=Bounds(max_bytes=8 << 20), budget=Budget())
    assert small.content == b" " * (4 << 20) and "content-encoding" not in small.headers


@pytest.mark.parametrize(
    "encoding, body, said",
    [
        ("gzip", b"[] plain, not gzip", "not valid gzip"),
        ("br", b"[]", "unsupported Content-Encoding 'br'"),
        ("gzip, br", b"[]", "unsupported Content-Encoding"),
        ("gzip", gzip.compress(b"[1, 2, 3]" * 100)[:-30], "ends early"),
    ],
)
def test_a_lying_or_unknown_encoding_is_a_decoding_failure(encoding, body, said):
    with client_for(
        lambda r: httpx.Response(200, stream=httpx.ByteStream(body), headers={"Content-Encoding": encoding})
    ) as client:
        with pytest.raises(HttpFailure, match=said) as caught:
            request(client, "GET", "http://h/x", bounds=Bounds(), budget=Budget())
    assert caught.value.kind == "decoding" and not caught.value.retryable


def test_a_dripping_body_is_cut_at_the_deadline_in_the_callers_thread():
    def drip():
        for _ in range(50):
            time.sleep(0.05)
            yield b" "

    threads = threading.active_count()
    start = time.monotonic()
    with client_for(lambda r: httpx.Response(200, content=drip())) as client:
        with pytest.raises(HttpFailure, match="response deadline of 0.3 s") as caught:
            request(client, "GET", "http://h/x", bounds=Bounds(request_seconds=0.3), budget=Budget())
    assert caught.value.kind == "deadline" and not caught.value.total
    assert time.monotonic() - start < 1.5  # 50 drips would take 2.5 s
    assert threading.active_count() == threads  # nothing left running


def test_the_operations_budget_bounds_each_request():
    with client_for(lambda r: httpx.Response(200, content=b"[]")) as client:
        with pytest.raises(HttpFailure, match="deadline has passed") as caught:
            request(client, "GET", "http://h/x", bounds=Bounds(), budget=Budget(0.0))
    assert caught.value.total


def test_redirect_loops_and_bad_urls_are_failures_not_crashes():
    loop = lambda r: httpx.Response(302, headers={"Location": str(r.url)})  # noqa: E731
    with client_for(loop) as client:
        with pytest.raises(HttpFailure, match="too many redirects") as caught:
            request(client, "GET", "http://h/x", bounds=Bounds(), budget=Budget())
    assert caught.value.kind == "redirects"
    with make_client() as client, pytest.raises(HttpFailure) as caught:
        request(client, "GET", "ftp://h/x", bounds=Bounds(), budget=Budget())
    assert caught.value.kind == "config"


def test_transport_errors_are_retryable_network_failures():
    def broken(r):
        raise httpx.RemoteProtocolError("peer closed", request=r)

    with client_for(broken) as client, pytest.raises(HttpFailure) as caught:
        request(client, "GET", "http://h/x", bounds=Bounds(), budget=Budget())
    assert caught.value.kind == "network" and caught.value.retryable and caught.value.cause == "RemoteProtocolError"


def test_one_sse_reader():
    lines = [": a comment", "event: x", 'data: {"a": 1}', "", "data:{}", f"data: {SSE_DONE}", "data: after"]
    assert list(sse_data(lines)) == ['{"a": 1}', "{}", SSE_DONE]


def test_stream_lines_are_split_across_chunks():
    body = [b'data: {"a"', b": 1}\r\n\r\ndata: [DO", b"NE]\n"]
    with client_for(lambda r: httpx.Response(200, content=iter(body))) as client:
        with open_stream(client, "GET", "http://h/x", bounds=Bounds(), budget=Budget()) as got:
            assert list(sse_data(got.lines())) == ['{"a": 1}', SSE_DONE]
