"""Network operations against servers that misbehave (tests/fake_github.py `HostileServer`): each
ends by itself with exit 2 and one line, within its deadline; secrets never shown.

No timing is asserted: a test only checks that the command ended, how, and what it said.
"""

from __future__ import annotations

import orjson
import pytest
from fake_github import FakeGitHub, FileServer, HostileServer, Reply, rest_issue

from microctx.cli import main
from microctx.corpus import snapshot as data
from microctx.corpus.fetch import RetryPolicy, fetch_issues
from microctx.errors import InputError, scrub_url, scrub_urls

REPO = "o/r"


@pytest.fixture(autouse=True)
def no_ambient_token(monkeypatch):
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def fetch_cli(server_url: str, tmp_path, capsys, *extra: str):
    out = tmp_path / "raw.json"
    out.write_text("[]")  # an earlier export: it must survive every failure
    code = main(["fetch", REPO, "--output", str(out), "--api-url", server_url, *extra])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if not line.startswith("microctx fetch: no GITHUB_TOKEN")]
    assert out.read_text() == "[]"
    return code, lines


@pytest.mark.parametrize(
    "mode, said",
    [
        ("loop", "a Link loop"),
        ("cycle", "a Link loop"),  # page 2 links back to page 1
        ("empty", "3 pages in a row brought no new issue"),
    ],
)
def test_pages_that_never_end_are_refused(tmp_path, capsys, mode, said):
    with HostileServer(mode) as server:
        code, lines = fetch_cli(server.url, tmp_path, capsys, "--limit", "5")
    assert code == 2 and len(lines) == 1 and said in lines[0], lines
    assert server.requests <= 3


def test_a_server_that_drips_is_abandoned_at_the_deadline(tmp_path, capsys):
    with HostileServer("drip", drip_seconds=1.0, drip_bytes=60) as server:
        code, lines = fetch_cli(server.url, tmp_path, capsys, "--deadline", "2")
    assert code == 2 and len(lines) == 1, lines
    assert "no complete response in time (the fetch's deadline of 2 s" in lines[0], lines


def test_a_gzip_bomb_is_cut_off_at_the_size_cap(tmp_path, capsys):
    with HostileServer("bomb", bomb_bytes=100 << 20) as server:
        code, lines = fetch_cli(server.url, tmp_path, capsys)
    assert code == 2 and len(lines) == 1, lines
    assert f"larger than {RetryPolicy().max_response_bytes} bytes (after decompression)" in lines[0]


def test_the_cap_counts_inflated_bytes_not_wire_bytes():
    """A bomb far below the cap on the wire, far above it inflated: refused with a small cap."""
    policy = RetryPolicy(max_response_bytes=1 << 20)
    with HostileServer("bomb", bomb_bytes=8 << 20) as server, pytest.raises(InputError, match="larger than 1048576"):
        assert len(server.bomb) < 1 << 20
        fetch_issues(REPO, api_url=server.url, policy=policy, progress=False)


@pytest.mark.parametrize(
    "api_url, said",
    [
        ("ftp://example.org", "expected an http:// or https:// URL"),
        ("http://[::1", "not a valid URL"),
        ("https://", "no host in"),
        ("http://127.0.0.1:99999", "not a valid URL"),
        ("https://user:hunter2@example.org", "a user or password in the URL is refused"),
        ("https://example.org/api?x=1", "without a query"),
    ],
)
def test_config_errors_fail_at_once(tmp_path, capsys, api_url, said):
    code, lines = fetch_cli(api_url, tmp_path, capsys)
    assert code == 2 and len(lines) == 1 and said in lines[0], lines
    assert "hunter2" not in lines[0]


def test_a_token_in_a_next_page_url_is_never_shown(tmp_path, capsys):
    with HostileServer("secret_link", secret="SECRETtoken123") as server:
        code, lines = fetch_cli(server.url, tmp_path, capsys)
    assert code == 2 and len(lines) == 1 and "404" in lines[0], lines
    assert "SECRETtoken123" not in lines[0] and "access_token=[hidden]" in lines[0]


def test_scrub_hides_userinfo_and_secret_query_values():
    url = "https://me:pw@h.example/x?page=2&access_token=A1&client_secret=B2&sig=C3&per_page=100#token=D4"
    shown = scrub_url(url)
    assert not any(secret in shown for secret in ("me:pw", "A1", "B2", "C3", "D4"))
    assert "page=2" in shown and "per_page=100" in shown and "h.example" in shown
    assert scrub_urls(f"failed: {url} and more") == f"failed: {shown} and more"


@pytest.fixture(scope="module")
def one_item(s8f_corpus):
    return rest_issue(s8f_corpus.records[0], REPO)


@pytest.mark.parametrize(
    "field, value, said",
    [
        ("number", [1], "field 'number': expected a positive integer, got [1]"),
        ("number", True, "field 'number': expected a positive integer, got true"),
        ("labels", 5, "field 'labels': expected an array of label objects"),
        ("labels", [{"name": 3}], "field 'labels': expected an array of label objects"),
        ("title", None, "field 'title': expected a string, got null"),
        ("body", {"a": 1}, "field 'body': expected a string or null"),
    ],
)
def test_odd_values_in_a_page_are_one_line(tmp_path, capsys, one_item, field, value, said):
    with FakeGitHub(REPO, [{**one_item, field: value}]) as server:
        code, lines = fetch_cli(server.url, tmp_path, capsys)
    assert code == 2 and len(lines) == 1 and said in lines[0], lines


@pytest.mark.parametrize("header", ["nan", "inf", "-inf", "soon"])
def test_odd_retry_after_is_ignored_not_a_crash(one_item, header):
    waits = []
    faults = {1: [Reply.json(429, {"message": "slow down"}, {"retry-after": header})]}
    with FakeGitHub(REPO, [one_item], faults=faults) as server:
        result = fetch_issues(REPO, api_url=server.url, sleep=waits.append, progress=False, say=lambda _: None)
    assert [r["number"] for r in result.rows] == [one_item["number"]]
    assert waits == [RetryPolicy().secondary_limit_wait_seconds]  # as a 429 without a usable header


def test_a_rate_limit_past_the_deadline_gives_up_at_once(one_item):
    waits = []
    faults = {1: [Reply.json(429, {"message": "slow down"}, {"retry-after": "120"})]}
    with FakeGitHub(REPO, [one_item], faults=faults) as server, pytest.raises(InputError, match="past the fetch's deadline"):
        fetch_issues(
            REPO,
            api_url=server.url,
            sleep=waits.append,
            progress=False,
            say=lambda _: None,
            policy=RetryPolicy(deadline_seconds=60),
        )
    assert waits == []


def test_limit_is_respected_on_every_page(one_item, s8f_corpus):
    items = [rest_issue(r, REPO) for r in s8f_corpus.records[:30]]
    with FakeGitHub(REPO, items, page_size=4) as server:
        result = fetch_issues(REPO, api_url=server.url, limit=9, progress=False)
    assert len(result.rows) == 9 and result.pages == 3


# --- the published data -------------------------------------------------------------------------


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh machine: no MICROCTX_DATA_DIR, no microctx.toml in reach (the checkout's points at the data)."""
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(data.CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_data_download_from_a_dripping_mirror_ends_at_its_deadline(cache, monkeypatch, capsys):
    monkeypatch.setenv(data.DEADLINE_ENV, "2")
    with HostileServer("drip", drip_seconds=1.0, drip_bytes=60) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.url + "/files")
        code = main(["data", "s8f"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "not complete within 2 s" in err, err
    assert not any(cache.glob("s8f-*"))


def test_data_download_errors_hide_secrets_in_the_url(cache, monkeypatch, capsys):
    with FileServer({}) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.url.replace("http://", "http://me:pw@") + "/files?sig=SECRET9")
        code = main(["data", "s8f"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "SECRET9" not in err and "me:pw" not in err


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_data_dir_without_the_files_is_an_error_not_a_download(cache, tmp_path, monkeypatch, capsys, make):
    folder = tmp_path / "data"
    if make == "empty":
        folder.mkdir()
    monkeypatch.setenv(data.DATA_DIR_ENV, str(folder))
    with FileServer({}) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.base_url)
        code = main(["data", "s8f"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"MICROCTX_DATA_DIR={folder}" in err, err
    assert server.hits == {}


def test_bad_download_deadline_is_one_line(cache, monkeypatch, capsys):
    monkeypatch.setenv(data.DEADLINE_ENV, "nan")
    with FileServer({}) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.base_url)
        code = main(["data", "s8f"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "MICROCTX_DOWNLOAD_DEADLINE" in err, err


def test_fetched_export_is_still_exact(tmp_path, s8f_corpus):
    """The hardening keeps the happy path: a fetch of all records gives them all, in order."""
    items = [rest_issue(r, REPO) for r in sorted(s8f_corpus.records, key=lambda r: -r["number"])[:250]]
    with FakeGitHub(REPO, items, page_size=100) as server:
        out = tmp_path / "raw.json"
        assert main(["fetch", REPO, "--output", str(out), "--api-url", server.url]) == 0
    assert [r["number"] for r in orjson.loads(out.read_bytes())] == [i["number"] for i in items]
