"""`microctx fetch` against a local server playing the GitHub REST API (tests/fake_github.py).

The pages are built from the real s8f records turned back into REST issue objects, so the
end-to-end test can demand exact results: the fetched export equals the public records as gh
export rows, and fetch -> freeze reproduces the published corpus and answers digests.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from fake_github import (
    FakeGitHub,
    Reply,
    bad_gateway,
    rate_limited,
    rest_issue,
    rest_pull_request,
)

from microctx.cli import main
from microctx.corpus import snapshot as data
from microctx.corpus.fetch import (
    RetryPolicy,
    Token,
    export_row,
    fetch_issues,
    rate_limit_wait,
    source_string,
    token_from_env,
)
from microctx.corpus.public import corpus_to_export
from microctx.errors import InputError

REPO = "anthony-chaudhary/fak"
TOKEN = "ghp_FAKEtokenValue0123456789abcdefXYZ"


@pytest.fixture(autouse=True)
def no_ambient_token(monkeypatch):
    """A token in the test's environment (CI often has one) is never sent anywhere, not even here."""
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def rest_items(s8f_corpus):
    """All 1,000 records as REST objects, newest first (as the API lists them), the one record
    with an empty body served as `"body": null`, and two pull requests among them."""
    records = sorted(s8f_corpus.records, key=lambda r: r["number"], reverse=True)
    items = [rest_issue(r, REPO, null_body=(r["body"] == "")) for r in records]
    items.insert(150, rest_pull_request(99_001, REPO))
    items.insert(3, rest_pull_request(99_002, REPO))
    return items


@pytest.fixture(scope="module")
def expected_rows(s8f_corpus):
    """What fetch must write: the public records as gh export rows, newest first."""
    by_number = {row["number"]: row for row in corpus_to_export(s8f_corpus)}
    return [by_number[n] for n in sorted(by_number, reverse=True)]


class Recorder:
    """Injected `sleep`/`say`: records what would have been waited and said, waits for nothing."""

    def __init__(self):
        self.slept: list[float] = []
        self.said: list[str] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)

    def say(self, message: str) -> None:
        self.said.append(message)


def _files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


# --- end to end through the CLI ---------------------------------------------------------------


def test_fetch_freeze_verify_end_to_end(tmp_path, monkeypatch, capsys, rest_items, expected_rows):
    """10 pages (100 per page, as asked), a 403 rate limit on page 2 (reset 1 s ahead, really
    waited), a 502 on page 3 retried, two pull requests skipped, a null body; the token is
    required by the server and appears in no output and no file."""
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    raw, public, answers, report = (tmp_path / n for n in ("raw.json", "public.json", "answers.json", "report.json"))
    faults = {2: [rate_limited(seconds_ahead=1)], 3: [bad_gateway()]}
    with FakeGitHub(REPO, rest_items, faults=faults, token=TOKEN) as server:
        code = main(["fetch", REPO, "--output", str(raw), "--api-url", server.url])
    fetch_out = capsys.readouterr()
    assert code == 0, fetch_out.err
    rows = orjson.loads(raw.read_bytes())
    assert len(rows) == 1000
    assert rows == expected_rows  # every field, every record, in API order
    assert [r for r in rows if r["body"] == ""] == [r for r in expected_rows if r["body"] == ""]  # the null body
    assert all(
        set(r) == {"number", "title", "body", "state", "labels", "createdAt", "updatedAt", "closedAt", "url"} for r in rows
    )
    assert "fetched 1000 issues from 11 pages (2 pull requests skipped)" in fetch_out.out  # 1002 items / 100
    assert "rate limited (403); waiting" in fetch_out.err
    assert "server error 502 Bad Gateway; retrying in 1 s (retry 1 of 5)" in fetch_out.err
    # every request (13: 11 pages, the 403, the 502) carried the token as a Bearer header
    assert len(server.requests) == 13
    assert all(h.get("Authorization") == f"Bearer {TOKEN}" for _, h in server.requests)
    assert server.requests[1][0].startswith("/repositories/")  # followed the Link header, not a guessed URL

    code = main(
        [
            "freeze",
            str(raw),
            "--public",
            str(public),
            "--answers",
            str(answers),
            "--report",
            str(report),
            "--source",
            data.S8F_SOURCE,
        ]
    )
    freeze_out = capsys.readouterr()
    assert code == 0, freeze_out.err
    # fetched through the API, frozen again: byte for byte the published corpus and answers
    assert data.file_sha256(public) == data.S8F["public"].sha256
    assert data.file_sha256(answers) == data.S8F["answers"].sha256

    code = main(["verify", "--public", str(public), "--answers", str(answers), "--report", str(report)])
    verify_out = capsys.readouterr()
    assert code == 0, verify_out.out + verify_out.err
    assert verify_out.out.startswith("ok")

    for captured in (fetch_out, freeze_out, verify_out):
        assert TOKEN not in captured.out and TOKEN not in captured.err
    written = _files_under(tmp_path)
    assert {p.name for p in written} == {"raw.json", "public.json", "answers.json", "report.json"}
    for path in written:
        assert TOKEN.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    "status,body,needle",
    [
        (404, {"message": "Not Found"}, f"404 Not Found: no repository {REPO} visible with the token from GITHUB_TOKEN"),
        (401, {"message": "Bad credentials"}, "401 Unauthorized: the API refused the token from GITHUB_TOKEN"),
        (403, {"message": "Resource not accessible by integration"}, "403 Forbidden: Resource not accessible"),
    ],
)
def test_refusals_are_one_line_exit_2_and_leave_the_output(tmp_path, monkeypatch, capsys, rest_items, status, body, needle):
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    raw = tmp_path / "raw.json"
    raw.write_bytes(b'["an earlier good export"]')
    with FakeGitHub(REPO, rest_items[:60], faults={1: [Reply.json(status, {"message": f"{body['message']} {TOKEN}"})]}) as server:
        code = main(["fetch", REPO, "--output", str(raw), "--api-url", server.url])
    out = capsys.readouterr()
    assert code == 2
    assert out.out == ""
    assert out.err.count("\n") == 1 and needle in out.err, out.err
    assert TOKEN not in out.err
    assert raw.read_bytes() == b'["an earlier good export"]'
    assert [p.name for p in _files_under(tmp_path)] == ["raw.json"]  # no temporary file left


def test_unknown_repo_and_bad_token_against_the_server(tmp_path, monkeypatch, capsys, rest_items):
    """The server's own 404 (another repo) and 401 (a token it does not accept)."""
    monkeypatch.setenv("GITHUB_TOKEN", "wrong-token-123")
    with FakeGitHub(REPO, rest_items[:60], token=TOKEN) as server:
        assert main(["fetch", "nobody/nothing", "--output", str(tmp_path / "a.json"), "--api-url", server.url]) == 2
        assert "404 Not Found: no repository nobody/nothing" in capsys.readouterr().err
        assert main(["fetch", REPO, "--output", str(tmp_path / "b.json"), "--api-url", server.url]) == 2
        err = capsys.readouterr().err
    assert "401 Unauthorized: the API refused the token from GITHUB_TOKEN (bad or expired?) (Bad credentials)" in err
    assert "wrong-token-123" not in err
    assert _files_under(tmp_path) == []


def test_network_failure_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    code = main(["fetch", REPO, "--output", str(tmp_path / "raw.json"), "--api-url", f"http://127.0.0.1:{port}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "cannot connect" in err and f"127.0.0.1:{port}" in err
    assert TOKEN not in err
    assert _files_under(tmp_path) == []


def test_missing_output_folder_is_refused_before_any_request(tmp_path, capsys, rest_items):
    with FakeGitHub(REPO, rest_items[:60]) as server:
        code = main(["fetch", REPO, "--output", str(tmp_path / "no" / "raw.json"), "--api-url", server.url])
    assert code == 2 and "output folder does not exist" in capsys.readouterr().err
    assert server.requests == []


# --- the client's rules, with injected sleep (no real waiting) --------------------------------


def test_limit_counts_issues_not_pull_requests_and_stops_paging(rest_items):
    items = rest_items[:30]  # holds the pull request at index 3
    rec = Recorder()
    with FakeGitHub(REPO, items, page_size=10) as server:
        result = fetch_issues(REPO, limit=12, api_url=server.url, sleep=rec.sleep, say=rec.say, progress=False)
    assert [r["number"] for r in result.rows] == [i["number"] for i in items if "pull_request" not in i][:12]
    assert result.pull_requests_skipped == 1
    assert result.pages == 2 and len(server.requests) == 2  # page 3 never asked for
    assert rec.slept == []


def test_state_filter_is_sent_and_rows_are_gh_shaped(rest_items):
    rec = Recorder()
    with FakeGitHub(REPO, rest_items[:80], page_size=25) as server:
        result = fetch_issues(REPO, state="open", api_url=server.url, sleep=rec.sleep, say=rec.say, progress=False)
    expected = [export_row(i) for i in rest_items[:80] if i["state"] == "open" and "pull_request" not in i]
    assert result.rows == expected and len(expected) > 0
    assert all(r["state"] == "OPEN" for r in result.rows)
    assert all("state=open" in path for path, _ in server.requests)
    assert "Authorization" not in server.requests[0][1]  # no token, no header


def test_rate_limit_waits_until_the_reset_and_says_so():
    clock = 1_800_000_000.0
    rec = Recorder()
    reply = Reply.json(
        403, {"message": "API rate limit exceeded"}, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(clock) + 30)}
    )
    items = [rest_issue(_record(n), REPO) for n in range(1, 6)]
    with FakeGitHub(REPO, items, faults={1: [reply, reply]}) as server:
        result = fetch_issues(REPO, api_url=server.url, sleep=rec.sleep, clock=lambda: clock, say=rec.say, progress=False)
    assert len(result.rows) == 5
    assert rec.slept == [31.0, 31.0]  # until the reset, plus a second for its rounding
    assert rec.said[0] == ("microctx fetch: rate limited (403); waiting 31 s until 2027-01-15T08:00:31Z (wait 1 of 3)")


def test_retry_after_and_429_are_honoured():
    import httpx

    def response(status, headers):
        return httpx.Response(status, headers=headers)

    policy = RetryPolicy()
    assert rate_limit_wait(response(429, {"retry-after": "7"}), 0.0) == 7.0
    assert rate_limit_wait(response(403, {"retry-after": "2"}), 0.0) == 2.0
    assert rate_limit_wait(response(429, {}), 0.0) == policy.secondary_limit_wait_seconds
    assert rate_limit_wait(response(403, {}), 0.0) is None  # a permission refusal, not a limit
    assert rate_limit_wait(response(403, {"x-ratelimit-remaining": "12", "x-ratelimit-reset": "99"}), 0.0) is None
    assert rate_limit_wait(response(502, {"retry-after": "1"}), 0.0) is None


def test_rate_limit_too_far_ahead_gives_up_without_waiting():
    rec = Recorder()
    far = Reply.json(429, {"message": "slow down"}, {"retry-after": "86400"})
    with FakeGitHub(REPO, [rest_issue(_record(1), REPO)], faults={1: [far]}) as server:
        with pytest.raises(InputError, match=r"rate limited for another 86400 s, longer than the 3900 s"):
            fetch_issues(REPO, api_url=server.url, sleep=rec.sleep, say=rec.say, progress=False)
    assert rec.slept == []


def test_5xx_is_retried_with_backoff_then_given_up():
    rec = Recorder()
    with FakeGitHub(REPO, [rest_issue(_record(1), REPO)], faults={1: [bad_gateway()] * 6}) as server:
        with pytest.raises(InputError) as caught:
            fetch_issues(REPO, api_url=server.url, sleep=rec.sleep, say=rec.say, progress=False)
    assert str(caught.value).endswith("server error 502 Bad Gateway after 6 attempts; giving up")
    assert rec.slept == [1, 2, 4, 8, 16]
    assert len(server.requests) == 6
    # one fewer failure and the same request succeeds
    rec = Recorder()
    with FakeGitHub(REPO, [rest_issue(_record(1), REPO)], faults={1: [bad_gateway()] * 5}) as server:
        result = fetch_issues(REPO, api_url=server.url, sleep=rec.sleep, say=rec.say, progress=False)
    assert len(result.rows) == 1 and rec.slept == [1, 2, 4, 8, 16]


def test_next_link_to_another_host_is_refused(monkeypatch):
    """The token would follow the link; a next page on another host is refused."""
    elsewhere = Reply.json(
        200, [rest_issue(_record(1), REPO)], {"Link": '<http://evil.example:9/repos/x/y/issues?page=2>; rel="next"'}
    )
    with FakeGitHub(REPO, [], faults={1: [elsewhere]}) as server:
        with pytest.raises(InputError, match=r"next-page link leaves the API host \(evil.example:9\)"):
            fetch_issues(REPO, api_url=server.url, token=Token(TOKEN, "GITHUB_TOKEN"), progress=False)


def test_token_comes_from_env_and_never_shows_itself():
    assert token_from_env({}) is None
    assert token_from_env({"GITHUB_TOKEN": " ", "GH_TOKEN": ""}) is None
    token = token_from_env({"GH_TOKEN": TOKEN})
    assert token.source == "GH_TOKEN" and token.reveal() == TOKEN
    assert token_from_env({"GITHUB_TOKEN": "a", "GH_TOKEN": "b"}).source == "GITHUB_TOKEN"
    for shown in (repr(token), str(token), f"{token}", repr([token]), repr({"t": token})):
        assert TOKEN not in shown
    assert token.scrub(f"echo {TOKEN}!") == "echo [token hidden]!"
    import pickle

    with pytest.raises(TypeError):
        pickle.dumps(token)


def test_bad_arguments_are_refused():
    with pytest.raises(InputError, match="expected OWNER/REPO"):
        fetch_issues("not-a-repo", progress=False)
    with pytest.raises(InputError, match="limit must be at least 1"):
        fetch_issues(REPO, limit=0, progress=False)


def test_source_string():
    assert source_string(REPO, "all", 1000) == data.S8F_SOURCE
    assert source_string("o/r", "open", None, "https://ghe.example.com/api/v3") == "ghe.example.com/o/r/issues?state=open"


def _record(number: int) -> dict:
    return {
        "number": number,
        "title": f"issue {number}",
        "body": "text",
        "state": "OPEN",
        "labels": None,
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-02T00:00:00Z",
        "closed_at": None,
        "url": f"https://github.com/{REPO}/issues/{number}",
    }
