"""The grading service against a real uvicorn server on a loopback port, on SQLite and PostgreSQL.

Tokens, the quota race (20 concurrent submissions against a quota of 5 score exactly 5),
refusals that are not counted, the Ladder's decisions on planted submissions, receipts, a
restart, a kill while scoring, and the private board appearing only after close.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
import pytest
from service_support import ServiceProcess, add_team, body, cli, get, post, private_answers, submission

DAILY = 5


def _state_url(kind: str, folder, pg_factory) -> str:
    return f"sqlite:///{folder / 'state.db'}" if kind == "sqlite" else pg_factory().new_database()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def service(request, tmp_path_factory, s8f, s8f_answers):
    """A running service (daily quota 5) on a fresh state of each kind."""
    folder = tmp_path_factory.mktemp(f"service-{request.param}")
    state = _state_url(request.param, folder, lambda: request.getfixturevalue("pg"))
    answers = private_answers(s8f.answers, folder / "private")
    with ServiceProcess(answers, s8f.public, state, "--daily-quota", str(DAILY), log=folder / "serve.log") as running:
        running.state, running.answers, running.folder, running.kind = state, answers, folder, request.param
        yield running


def _test_ids(answers: dict) -> list[str]:
    return [a["id"] for a in answers["answers"] if a["split"] == "test"]


def _team(service, name: str) -> str:
    return add_team(service.state, name)


def _rows(service, query: str) -> list[tuple]:
    from sqlalchemy import text

    from microctx.service.db import engine_for

    engine = engine_for(service.state)
    try:
        with engine.connect() as connection:
            return [tuple(r) for r in connection.execute(text(query))]
    finally:
        engine.dispose()


def test_tokens(service, s8f_answers):
    token = _team(service, "tokens")
    good = body(submission(s8f_answers))
    assert post(service.url, None, good).status_code == 401
    assert post(service.url, token + "x", good).status_code == 401
    assert post(service.url, token, good, Authorization=f"Basic {token}").status_code == 401
    assert get(service.url, "/v1/quota").status_code == 401
    assert post(service.url, token, good).status_code == 201
    # only the hash is stored
    assert not [r for r in _rows(service, "SELECT name, token_sha256 FROM teams") if token in r[1]]
    cli("serve", "admin", "revoke", "tokens", "--state", service.state)
    refused = post(service.url, token, good)
    assert refused.status_code == 401 and "no valid token" in refused.json()["error"]


def test_twenty_concurrent_submissions_against_a_quota_of_five_score_exactly_five(service, s8f_answers):
    token = _team(service, "racers")
    documents = [body(submission(s8f_answers, set(_test_ids(s8f_answers)[i : i + 1]))) for i in range(20)]
    barrier = threading.Barrier(20)

    def send(document: bytes):
        barrier.wait()
        return post(service.url, token, document)

    with ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(send, documents))
    codes = sorted(r.status_code for r in responses)
    assert codes == [201] * 5 + [429] * 15, _rows(service, "SELECT detail FROM submissions WHERE state = 'refunded'")
    refusal = next(r.json() for r in responses if r.status_code == 429)
    assert refusal["remaining_today"] == 0 and refusal["resets_at"].endswith("T00:00:00.000Z") and refusal["counted"] is False
    team_id = _rows(service, "SELECT id FROM teams WHERE name = 'racers'")[0][0]
    assert _rows(service, f"SELECT COUNT(*) FROM submissions WHERE team_id = {team_id} AND state = 'scored'") == [(5,)]
    assert _rows(service, "SELECT COUNT(*) FROM ledger WHERE team = 'racers'") == [(5,)]
    quota = get(service.url, "/v1/quota", token).json()
    assert (quota["used_today"], quota["remaining_today"]) == (5, 0)


@pytest.mark.slow
def test_two_processes_on_one_state_share_the_quota(service, s8f, s8f_answers):
    """A second `microctx serve` on the same state: 20 submissions split across both processes
    still score exactly the quota of 5 (the lock is in the database, not in a process)."""
    token = _team(service, "two-doors")
    documents = [body(submission(s8f_answers, set(_test_ids(s8f_answers)[i : i + 1]))) for i in range(20)]
    barrier = threading.Barrier(20)
    with ServiceProcess(
        service.answers, s8f.public, service.state, "--daily-quota", str(DAILY), log=service.folder / "serve-second.log"
    ) as second:
        urls = [service.url, second.url]

        def send(index: int):
            barrier.wait()
            return post(urls[index % 2], token, documents[index])

        with ThreadPoolExecutor(20) as pool:
            responses = list(pool.map(send, range(20)))
    assert sorted(r.status_code for r in responses) == [201] * 5 + [429] * 15
    assert _rows(service, "SELECT COUNT(*) FROM ledger WHERE team = 'two-doors'") == [(5,)]


def _hostile_bodies(answers: dict) -> dict[str, bytes]:
    good = submission(answers)
    other = {**good, "corpus_sha256": "0" * 64}
    unknown = {**good, "answers": good["answers"] + [{"id": "issue-999999999"}]}
    repeated = {**good, "answers": good["answers"] + [good["answers"][0]]}
    extra_field = {**good, "sneaky": 1}
    extra_answer_field = {**good, "answers": [{**good["answers"][0], "note": "x"}] + good["answers"][1:]}
    deep = {**good, "aggregates": {"state_counts": json.loads("[" * 50 + "]" * 50)}}
    return {
        "another corpus": body(other),
        "unknown id": body(unknown),
        "repeated id": body(repeated),
        "unknown field": body(extra_field),
        "unknown answer field": body(extra_answer_field),
        "too deep": body(deep),
        "not JSON": b"{not json",
        "bad type": b'{"corpus_sha256": 7}',
        "very deep": b"[" * 100_000 + b"]" * 100_000,
    }


def test_refusals_are_not_counted(service, s8f_answers):
    token = _team(service, "careless")
    for name, document in _hostile_bodies(s8f_answers).items():
        response = post(service.url, token, document)
        assert response.status_code == 422, (name, response.status_code, response.text[:300])
        assert response.json()["counted"] is False
    reason = post(service.url, token, _hostile_bodies(s8f_answers)["another corpus"]).json()["error"]
    assert "corpus_sha256" in reason and "0" * 64 in reason
    huge = b'{"corpus_sha256": "' + b"a" * (9 * 1024 * 1024) + b'"}'
    assert post(service.url, token, huge).status_code == 413
    assert get(service.url, "/v1/quota", token).json()["used_today"] == 0
    assert _rows(service, "SELECT COUNT(*) FROM ledger WHERE team = 'careless'") == [(0,)]


def _split(service, s8f):
    """The service's public/private split, recomputed from its state's secret seed (the test may read it)."""
    from microctx.service.competition import load_competition

    seed = _rows(service, "SELECT split_seed FROM competition")[0][0]
    return load_competition(service.answers, s8f.public, seed)


def _one_per_component(comp, public: bool, count: int, skip: int = 0) -> list[str]:
    """Test record ids of `count` distinct components of one part (after skipping `skip` components)."""
    seen: dict[int, str] = {}
    for rid, component, is_public in zip(comp.test_ids, comp.component, comp.public):
        if bool(is_public) == public and int(component) not in seen:
            seen[int(component)] = rid
    return list(seen.values())[skip : skip + count]


@pytest.mark.slow
def test_ladder_decisions_on_planted_submissions(service, s8f, s8f_answers):
    from microctx.service import ladder

    comp = _split(service, s8f)
    token = _team(service, "climber")
    public_ids = [rid for rid, public in zip(comp.test_ids, comp.public) if public]
    wrong = set(public_ids[::2])
    first = post(service.url, token, body(submission(s8f_answers, wrong))).json()
    # three records fixed and two others broken, in five components: one record better, not significantly
    fixed = [rid for rid in _one_per_component(comp, True, 40) if rid in wrong][:3]
    broken = [rid for rid in _one_per_component(comp, True, 40) if rid not in wrong and rid not in fixed][:2]
    nudge = post(service.url, token, body(submission(s8f_answers, (wrong - set(fixed)) | set(broken)))).json()
    # worse on private records only: the same public score
    private_only = post(service.url, token, body(submission(s8f_answers, wrong | set(_one_per_component(comp, False, 5))))).json()
    leap = post(service.url, token, body(submission(s8f_answers))).json()  # every record right
    worse = post(service.url, token, body(submission(s8f_answers, set(comp.test_ids)))).json()
    assert (len(fixed), len(broken)) == (3, 2)
    assert first["decision"] == ladder.FIRST and first["score"] == round(1 - len(wrong) / comp.public.sum(), 3)
    assert nudge["decision"] == ladder.NOT_SIGNIFICANT and nudge["score"] == first["score"]
    assert private_only["decision"] == ladder.NOT_SIGNIFICANT
    assert leap["decision"] == ladder.IMPROVED and leap["score"] == 1.0
    assert worse["decision"] == ladder.NOT_SIGNIFICANT and worse["score"] == 1.0
    assert get(service.url, f"/v1/submissions/{nudge['id']}", token).json()["score"] == first["score"]
    assert get(service.url, f"/v1/submissions/{nudge['id']}", _team(service, "nosy")).status_code == 404
    decisions = _rows(
        service, "SELECT decision, raw_score, best_before, threshold FROM ledger WHERE team = 'climber' ORDER BY id"
    )
    assert [d[0] for d in decisions] == [
        ladder.FIRST,
        ladder.NOT_SIGNIFICANT,
        ladder.NOT_SIGNIFICANT,
        ladder.IMPROVED,
        ladder.NOT_SIGNIFICANT,
    ]
    assert decisions[1][1] > decisions[1][2]  # the nudge was better, and still not released
    assert 0 < decisions[1][1] - decisions[1][2] <= decisions[1][3]
    board = get(service.url, "/v1/leaderboard").json()
    row = next(t for t in board["teams"] if t["team"] == "climber")
    assert board["part"] == "public" and row["score"] == leap["score"] and row["looks"] == 5
    assert "raw" not in json.dumps(board) and "outcomes" not in json.dumps(board)


@pytest.mark.slow
def test_receipts_verify_and_a_tampered_one_fails(service, s8f_answers, tmp_path):
    token = _team(service, "signer")
    key = tmp_path / "key.txt"
    key.write_text(cli("serve", "admin", "public-key", "--state", service.state).stdout)
    submission_file = tmp_path / "s.json"
    submission_file.write_bytes(body(submission(s8f_answers)))
    receipt = tmp_path / "receipt.json"
    done = cli("submit", str(submission_file), "--server", service.url, "--receipt", str(receipt), env={"MICROCTX_TOKEN": token})
    assert "signer: public exact_record_rate" in done.stdout
    from microctx.contract.digests import file_sha256

    payload = json.loads(receipt.read_text())["payload"]
    assert payload["submission_sha256"] == file_sha256(submission_file) and payload["team"] == "signer"
    assert cli("receipt", "verify", str(receipt), "--key", str(key)).returncode == 0
    original = receipt.read_bytes()
    for old, new in ((b'"signer"', b'"signeR"'), (b'"released": 1', b'"released": 2')):
        assert old in original
        receipt.write_bytes(original.replace(old, new, 1))
        assert cli("receipt", "verify", str(receipt), "--key", str(key), check=False).returncode == 1
    receipt.write_bytes(original)
    other_key = tmp_path / "other.txt"
    other_key.write_text(base64.b64encode(b"\x01" * 32).decode())
    assert cli("receipt", "verify", str(receipt), "--key", str(other_key), check=False).returncode == 1
    other_key.write_text("not a key")
    unusable = cli("receipt", "verify", str(receipt), "--key", str(other_key), check=False)
    assert unusable.returncode == 2 and len(unusable.stderr.strip().splitlines()) == 1
    receipt.write_text("{}")
    assert cli("receipt", "verify", str(receipt), "--key", str(key), check=False).returncode == 2


@pytest.mark.slow
def test_the_client_says_one_line_per_refusal(service, s8f_answers, tmp_path):
    token = _team(service, "client")
    good = tmp_path / "good.json"
    good.write_bytes(body(submission(s8f_answers)))
    bad = tmp_path / "bad.json"
    bad.write_bytes(body({**submission(s8f_answers), "corpus_sha256": "1" * 64}))
    unauthorized = cli("submit", str(good), "--server", service.url, env={"MICROCTX_TOKEN": "mctx_nope"}, check=False)
    assert unauthorized.returncode == 1 and unauthorized.stderr.startswith("microctx submit: HTTP 401")
    invalid = cli("submit", str(bad), "--server", service.url, env={"MICROCTX_TOKEN": token}, check=False)
    assert invalid.returncode == 1 and "HTTP 422" in invalid.stderr and len(invalid.stderr.splitlines()) == 1
    for _ in range(DAILY):
        cli("submit", str(good), "--server", service.url, "--token-env", "MY_TOKEN", env={"MY_TOKEN": token})
    over = cli("submit", str(good), "--server", service.url, env={"MICROCTX_TOKEN": token}, check=False)
    assert over.returncode == 1 and len(over.stderr.splitlines()) == 1
    assert "HTTP 429" in over.stderr and "resets at" in over.stderr and "left today: 0" in over.stderr
    missing = cli("submit", str(good), "--server", service.url, env={"MICROCTX_TOKEN": ""}, check=False)
    assert missing.returncode == 2 and "MICROCTX_TOKEN" in missing.stderr
    board = cli("leaderboard", "--server", service.url)
    assert "rank_group\tteam\tscore" in board.stdout and "\tclient\t1.000\t" in board.stdout


@pytest.mark.slow
def test_a_restart_keeps_everything(service, s8f_answers):
    token = _team(service, "durable")
    first = post(service.url, token, body(submission(s8f_answers))).json()
    before = [
        get(service.url, path, token).json()
        for path in ("/v1/leaderboard", "/v1/public-key", f"/v1/submissions/{first['id']}", "/v1/quota")
    ]
    service.stop()
    service.restart()
    after = [
        get(service.url, path, token).json()
        for path in ("/v1/leaderboard", "/v1/public-key", f"/v1/submissions/{first['id']}", "/v1/quota")
    ]
    assert after == before and after[3]["used_today"] == 1


@pytest.mark.slow
def test_a_kill_while_scoring_leaves_nothing_counted(service, s8f_answers):
    """The service is killed with SIGKILL while its scoring transaction waits for a lock the test
    holds: afterwards the submission is neither recorded nor counted, and a restart serves on."""
    token = _team(service, "crashed")
    holder, release = _hold_write_lock(service)
    try:
        threading.Thread(target=lambda: _quietly(post, service.url, token, body(submission(s8f_answers))), daemon=True).start()
        _wait_until_blocked(service)
        service.kill()
    finally:
        release()
    assert _rows(service, "SELECT COUNT(*) FROM ledger WHERE team = 'crashed'") == [(0,)]
    assert _rows(service, "SELECT COUNT(*) FROM submissions s JOIN teams t ON t.id = s.team_id WHERE t.name = 'crashed'") == [
        (0,)
    ]
    service.restart()
    assert get(service.url, "/v1/quota", token).json()["used_today"] == 0
    assert post(service.url, token, body(submission(s8f_answers))).status_code == 201


def _quietly(fn, *args):
    try:
        fn(*args)
    except Exception:
        pass


def _hold_write_lock(service):
    """A connection holding the lock the scoring transaction needs (the ledger table / the database)."""
    if service.kind == "sqlite":
        connection = sqlite3.connect(service.state.removeprefix("sqlite:///"), isolation_level=None, timeout=30)
        connection.execute("BEGIN IMMEDIATE")
    else:
        import psycopg

        connection = psycopg.connect(service.state)
        connection.execute("LOCK TABLE ledger IN ACCESS EXCLUSIVE MODE")

    def release():
        connection.rollback() if service.kind != "sqlite" else connection.execute("ROLLBACK")
        connection.close()

    return connection, release


def _wait_until_blocked(service, timeout: float = 30) -> None:
    if service.kind == "sqlite":
        time.sleep(3)  # the request waits on the database lock (busy_timeout is 30 s)
        return
    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(service.state, autocommit=True) as watcher:
        while time.monotonic() < deadline:
            waiting = watcher.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%submissions%'"
            ).fetchone()[0]
            if waiting:
                return
            time.sleep(0.05)
    raise AssertionError("the scoring transaction never waited on the lock")


@pytest.mark.slow
def test_the_private_board_appears_only_after_close(service, s8f_answers):
    token = _team(service, "finalist")
    ids = _test_ids(s8f_answers)
    response = post(service.url, token, body(submission(s8f_answers, set(ids[::2])))).json()
    running = get(service.url, "/v1/leaderboard").json()
    assert running["status"] == "running" and running["part"] == "public"
    public_records = running["records"]
    row = next(t for t in running["teams"] if t["team"] == "finalist")
    assert row["score"] == response["score"]
    assert "private" not in get(service.url, "/").text.split("<table>")[1]
    private_raw = _rows(service, f"SELECT private_raw FROM submissions WHERE id = '{response['id']}'")[0][0]
    assert private_raw is not None and f"{private_raw:.3f}" not in json.dumps(running)
    cli("serve", "admin", "close", "--state", service.state)
    closed = get(service.url, "/v1/leaderboard").json()
    assert closed["status"] == "closed" and closed["part"] == "private"
    assert "Leaderboard: private part" in get(service.url, "/").text
    assert closed["records"] == len(ids) - public_records
    final = next(t for t in closed["teams"] if t["team"] == "finalist")
    assert final["score"] == round(private_raw, 3) and final["receipt"]["payload"]["part"] == "private"
    refused = post(service.url, token, body(submission(s8f_answers)))
    assert refused.status_code == 409 and refused.json()["counted"] is False
    assert orjson.loads(get(service.url, "/v1/leaderboard").content) == closed
