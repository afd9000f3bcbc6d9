"""The grading service under attack: slow clients, a scorer that fails, a readable answer file,
a second answer bundle, and the state's schema (Alembic) and append-only ledger, on SQLite and
PostgreSQL."""

from __future__ import annotations

import socket
import time

import pytest
from service_support import InProcessService, add_team, body, cli, get, post, private_answers, submission


@pytest.fixture(params=["sqlite", "postgresql"])
def state_url(request, tmp_path):
    return f"sqlite:///{tmp_path / 'state.db'}" if request.param == "sqlite" else request.getfixturevalue("pg").new_database()


@pytest.fixture
def built(tmp_path, s8f):
    from microctx.service.server import build_service

    answers = private_answers(s8f.answers, tmp_path / "private")
    service = build_service(str(answers), str(s8f.public), f"sqlite:///{tmp_path / 'state.db'}", daily_quota=3)
    yield service
    service.engine.dispose()


def test_a_failure_of_the_service_is_refunded(built, s8f_answers, monkeypatch):
    from microctx.service import intake

    token = add_team(str(built.engine.url), "unlucky")

    def broken_scorer(comp, document):
        raise RuntimeError("planted: the scorer fell over")

    with InProcessService(built) as running:
        monkeypatch.setattr(intake, "score", broken_scorer)
        for _ in range(4):  # more than the quota of 3: none of them counts
            refused = post(running.url, token, body(submission(s8f_answers)))
            assert refused.status_code == 503 and refused.json()["counted"] is False
            assert get(running.url, f"/v1/submissions/{refused.json()['submission_id']}", token).json()["state"] == "refunded"
        assert get(running.url, "/v1/quota", token).json()["used_today"] == 0
        monkeypatch.undo()
        assert post(running.url, token, body(submission(s8f_answers))).status_code == 201
        assert get(running.url, "/v1/quota", token).json() | {"resets_at": ""} == {
            "team": "unlucky",
            "daily_quota": 3,
            "total_quota": None,
            "used_today": 1,
            "used_total": 1,
            "remaining_today": 2,
            "remaining_total": None,
            "resets_at": "",
        }


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def test_a_client_slow_with_its_headers_is_cut_off(built, monkeypatch):
    from microctx.service import server

    monkeypatch.setattr(server, "HEADER_TIMEOUT", 1.0)
    with InProcessService(built) as running:
        sock = _connect(running.url)
        sock.sendall(b"GET /v1/leaderboard HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        started = time.monotonic()
        assert sock.recv(100) == b""  # closed by the service
        assert time.monotonic() - started < 10
        sock.close()
        assert get(running.url, "/v1/leaderboard").status_code == 200  # and others are served


def test_a_request_framed_two_ways_is_refused_and_its_connection_closed(built):
    """Transfer-Encoding and Content-Length together (a CL.TE smuggling attempt through a proxy
    that frames by length): 400, and the request pipelined after it on the same connection is
    never served (h11 read the body as chunked, scored it as 422 and served the next request)."""
    token = add_team(str(built.engine.url), "smuggler")
    document = b'{"corpus_sha256": "x", "answers": []}'  # small: read whole, so the close is clean
    chunked = f"{len(document):x}".encode() + b"\r\n" + document + b"\r\n0\r\n\r\n"
    auth = f"Authorization: Bearer {token}\r\n".encode()
    with InProcessService(built) as running:
        sock = _connect(running.url)
        sock.sendall(
            b"POST /v1/submissions HTTP/1.1\r\nHost: x\r\n"
            + auth
            + b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
            + chunked
            + b"GET /v1/quota HTTP/1.1\r\nHost: x\r\n"
            + auth
            + b"\r\n"
        )
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        sock.close()
        assert received.startswith(b"HTTP/1.1 400 ") and received.count(b"HTTP/1.1 ") == 1
        assert b"ambiguous framing" in received
        assert get(running.url, "/v1/quota", token).json()["used_today"] == 0  # nothing scored, nothing counted


def test_a_client_slow_with_its_body_gets_408(built, s8f_answers):
    token = add_team(str(built.engine.url), "slow")
    built.body_timeout = 1.0
    with InProcessService(built) as running:
        sock = _connect(running.url)
        sock.sendall(
            b"POST /v1/submissions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\nContent-Length: 1000\r\n\r\n{"
        )
        started = time.monotonic()
        reply = sock.recv(4096)
        assert reply.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 10
        sock.close()
        assert get(running.url, "/v1/quota", token).json()["used_today"] == 0


def test_serve_refuses_an_answer_file_others_can_read(tmp_path, s8f):
    answers = private_answers(s8f.answers, tmp_path)
    answers.chmod(0o640)
    done = cli(
        "serve",
        "--answers",
        str(answers),
        "--public",
        str(s8f.public),
        "--state",
        str(tmp_path / "s.db"),
        "--port",
        "1",
        check=False,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert str(answers) in done.stderr and "readable by others" in done.stderr and "-rw-r-----" in done.stderr


def test_a_state_is_bound_to_one_answer_bundle(tmp_path, s8f, synthetic):
    from microctx.service.server import build_service

    state = f"sqlite:///{tmp_path / 's.db'}"
    build_service(str(private_answers(s8f.answers, tmp_path / "a")), str(s8f.public), state).engine.dispose()
    other = private_answers(synthetic.answers, tmp_path / "b")
    done = cli("serve", "--answers", str(other), "--public", str(synthetic.public), "--state", state, "--port", "1", check=False)
    assert done.returncode == 2 and "this state's competition grades answers" in done.stderr


def test_unusable_state_urls_are_one_line(tmp_path):
    for url in ("mysql://x@y/z", "postgresql://nobody:s3cretpw@127.0.0.1:1/none", "postgresql://a:s3cretpw@[::1"):
        done = cli("serve", "admin", "public-key", "--state", url, check=False)
        assert done.returncode == 2 and done.stderr.startswith("microctx serve: --state:"), done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and "s3cretpw" not in done.stderr


def test_the_migrated_schema_is_the_tables_and_the_ledger_is_append_only(state_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from sqlalchemy import insert, text

    from microctx.service.db import METADATA, ledger, open_state

    engine = open_state(state_url)
    open_state(state_url).dispose()  # a second open is a no-op
    with engine.connect() as connection:
        assert compare_metadata(MigrationContext.configure(connection), METADATA) == []
        assert connection.execute(text("SELECT version_num FROM alembic_version")).scalar() == "0001"
    with engine.begin() as connection:
        connection.execute(
            insert(ledger).values(
                at="t",
                answers_sha256="a",
                via="service",
                summary="{}",
                team="t",
                submission_id="s",
                part="public",
                raw_score=0.5,
                decision="d",
            )
        )
    for statement in ("UPDATE ledger SET raw_score = 1", "DELETE FROM ledger"):
        with pytest.raises(Exception, match="append-only"):
            with engine.begin() as connection:
                connection.execute(text(statement))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT raw_score FROM ledger")).scalar() == 0.5
    engine.dispose()


def test_the_total_quota_and_the_run_manifest(tmp_path, s8f, s8f_answers):
    import base64

    import orjson
    from sqlalchemy import text

    from microctx.grading.ledger import config_digest
    from microctx.service.server import build_service

    answers = private_answers(s8f.answers, tmp_path / "private")
    service = build_service(str(answers), str(s8f.public), f"sqlite:///{tmp_path / 'state.db'}", total_quota=2)
    token = add_team(str(service.engine.url), "thrifty")
    manifest = {"candidate": "exact-sql", "version": "1", "parameters": {"k": 3}}
    header = base64.b64encode(orjson.dumps(manifest)).decode()
    with InProcessService(service) as running:
        assert post(running.url, token, body(submission(s8f_answers)), **{"X-Microctx-Manifest": "%%%"}).status_code == 422
        assert post(running.url, token, body(submission(s8f_answers)), **{"X-Microctx-Manifest": header}).status_code == 201
        assert post(running.url, token, body(submission(s8f_answers))).status_code == 201
        over = post(running.url, token, body(submission(s8f_answers)))
        assert over.status_code == 429 and (over.json()["remaining_total"], over.json()["remaining_today"]) == (0, None)
    with service.engine.connect() as connection:
        rows = connection.execute(text("SELECT candidate, config_digest, via FROM ledger ORDER BY id")).all()
    assert [tuple(r) for r in rows] == [("exact-sql", config_digest(manifest), "service"), ("thrifty", None, "service")]
    service.engine.dispose()


def test_submit_sends_the_run_manifest_read_by_the_one_typed_reader(tmp_path, s8f, s8f_answers):
    """`microctx submit` reads the manifest beside the submission with `contract.records.read_manifest`
    (a RunManifest): one that belongs to the file is sent, one cut off from it (another digest) is not."""
    import json

    from sqlalchemy import text

    from microctx.contract.digests import file_sha256
    from microctx.contract.records import config_digest, manifest_path
    from microctx.service.server import build_service

    answers = private_answers(s8f.answers, tmp_path / "private")
    service = build_service(str(answers), str(s8f.public), f"sqlite:///{tmp_path / 'state.db'}")
    token = add_team(str(service.engine.url), "runner")
    sub = tmp_path / "s.json"
    sub.write_bytes(body(submission(s8f_answers)))
    manifest = {"schema": "microctx-run/2", "candidate": "exact-sql", "version": "7", "parameters": {"threads": 1}}
    manifest_path(sub).write_text(json.dumps({**manifest, "submission_sha256": file_sha256(sub)}))
    with InProcessService(service) as running:
        cli("submit", str(sub), "--server", running.url, env={"MICROCTX_TOKEN": token})
        manifest_path(sub).write_text(json.dumps({**manifest, "submission_sha256": "0" * 64}))
        cli("submit", str(sub), "--server", running.url, env={"MICROCTX_TOKEN": token})
    with service.engine.connect() as connection:
        rows = connection.execute(text("SELECT candidate, config_digest FROM ledger ORDER BY id")).all()
    expected = config_digest({**manifest, "submission_sha256": file_sha256(sub)})
    assert [tuple(r) for r in rows] == [("exact-sql", expected), ("runner", None)]
    service.engine.dispose()


def _held(state: str, statements: list[str]):
    """A connection of the test's own holding a lock the scoring transaction will need: SQLite's
    write lock (BEGIN IMMEDIATE), or PostgreSQL `statements` in an open transaction."""
    if state.startswith("sqlite"):
        import sqlite3

        connection = sqlite3.connect(state.removeprefix("sqlite:///"), isolation_level=None, timeout=30)
        connection.execute("BEGIN IMMEDIATE")
    else:
        import psycopg

        connection = psycopg.connect(state)
        for statement in statements:
            connection.execute(statement)
    return connection


def _waiting(state: str, pattern: str, timeout: float = 30) -> None:
    """Until a query matching `pattern` waits on a lock (PostgreSQL); SQLite: a pause (the
    transaction waits on BEGIN IMMEDIATE, busy_timeout 30 s)."""
    if state.startswith("sqlite"):
        time.sleep(2)
        return
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(state, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            query = "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE %s"
            if watcher.execute(query, (pattern,)).fetchone()[0]:
                return
            time.sleep(0.05)
    raise AssertionError(f"no query like {pattern} waited on a lock")


def _new_team(service, name: str):
    from microctx.service.db import reading
    from microctx.service.tokens import add_team as add
    from microctx.service.tokens import team_of_token

    token = add(service.engine, name)
    with reading(service.engine) as connection:
        return team_of_token(connection, token)


def _scoring(service, team, document: dict):
    """`intake.accept` of one submission by `team`, in a thread: (thread, outcome list)."""
    import threading

    from microctx.service import intake

    outcome: list = []

    def run() -> None:
        try:
            outcome.append(intake.accept(service.engine, service.comp, service.settings, team, body(document)))
        except Exception as exc:  # noqa: BLE001  (the outcome the test reads)
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def _counted(service, name: str) -> int:
    from sqlalchemy import func, select

    from microctx.service.db import ledger, reading

    with reading(service.engine) as connection:
        return connection.execute(select(func.count()).where(ledger.c.team == name)).scalar_one()


def test_a_token_revoked_while_its_submission_is_scored_is_not_counted(state_url, tmp_path, s8f, s8f_answers):
    """The token is checked when the request arrives; a revocation that commits while the
    submission is scored (a leaked token, revoked) is seen inside the transaction: 401, nothing counted."""
    from microctx.service import intake
    from microctx.service.server import build_service

    service = build_service(str(private_answers(s8f.answers, tmp_path / "private")), str(s8f.public), state_url)
    try:
        team = _new_team(service, "leaked")
        holder = _held(state_url, ["LOCK TABLE teams IN EXCLUSIVE MODE"])  # plain reads pass, row locks wait
        thread, outcome = _scoring(service, team, submission(s8f_answers))
        _waiting(state_url, "%FOR UPDATE%")
        holder.execute("UPDATE teams SET revoked_at = '2026-01-01T00:00:00.000Z' WHERE name = 'leaked'")
        holder.execute("COMMIT") if state_url.startswith("sqlite") else holder.commit()
        holder.close()
        thread.join(60)
        assert isinstance(outcome[0], intake.Revoked), outcome
        assert _counted(service, "leaked") == 0
    finally:
        service.engine.dispose()


def test_close_waits_for_a_submission_that_read_the_competition_as_running(state_url, tmp_path, s8f, s8f_answers):
    """A submission reads the competition as running, then waits on a lock; `admin close` does not
    commit under it (PostgreSQL: the row is held FOR SHARE), so no submission is counted after the
    close: it is scored before the close, or refused (409) after it."""
    import threading

    from microctx.service import intake
    from microctx.service.server import build_service
    from microctx.service.state import close

    service = build_service(str(private_answers(s8f.answers, tmp_path / "private")), str(s8f.public), state_url)
    try:
        team = _new_team(service, "late")
        holder = _held(state_url, ["LOCK TABLE ledger IN ACCESS EXCLUSIVE MODE"])
        thread, outcome = _scoring(service, team, submission(s8f_answers))
        _waiting(state_url, "%submissions%")
        closing = threading.Thread(target=close, args=(service.engine,))
        closing.start()
        closing.join(3)
        assert closing.is_alive(), "the competition closed under a submission that read it as running"
        holder.rollback() if not state_url.startswith("sqlite") else holder.execute("ROLLBACK")
        holder.close()
        thread.join(60)
        closing.join(60)
        assert isinstance(outcome[0], (dict, intake.Closed)), outcome
        assert _counted(service, "late") == (1 if isinstance(outcome[0], dict) else 0)
    finally:
        service.engine.dispose()
