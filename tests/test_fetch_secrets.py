"""The token is never shown, in any form, wherever it comes back; fetch's edge inputs end in exit 2
and one line. Each case runs `microctx fetch` against a hostile local server (tests/fake_github.py
`HostileServer`) that sends the token back, as a careless or hostile server would.

A leak is checked strictly: no run of 6 or more of the token's characters appears in what fetch
printed (so a token cut mid-message, 39 of its 41 characters, counts as shown).
"""

from __future__ import annotations

import pytest
from fake_github import HostileServer

from microctx.cli import main
from microctx.corpus.fetch import Token
from microctx.errors import InputError, scrub_secret, secret_pattern, shown

REPO = "o/r"
TOKEN = "ghp_Zq7TokenValue41charsLongXy9Wv3Ut5Sr2P"  # 41 characters, like a classic GitHub token


def leaked(text: str, token: str = TOKEN, run: int = 6) -> list[str]:
    """The runs of `run` characters of `token` that appear in `text`."""
    return [token[i : i + run] for i in range(len(token) - run + 1) if token[i : i + run] in text]


def fetch_cli(server_url: str, tmp_path, capsys, monkeypatch, token: str = TOKEN) -> tuple[int, list[str]]:
    monkeypatch.setenv("GITHUB_TOKEN", token)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    out = tmp_path / "raw.json"
    out.write_text("[]")  # an earlier export: it must survive every failure
    code = main(["fetch", REPO, "--output", str(out), "--api-url", server_url, "--deadline", "20"])
    captured = capsys.readouterr()
    assert out.read_text() == "[]"
    assert not captured.out
    return code, captured.err.splitlines()


def test_the_token_is_41_characters():
    assert len(TOKEN) == 41


@pytest.mark.parametrize(
    "mode, said",
    [
        ("echo_path", "404 Not Found"),  # the token in the next page's path
        ("echo_query", "404 Not Found"),  # ... in a query parameter with an ordinary name
        ("echo_encoded", "404 Not Found"),  # ... percent-encoded, in the path and the query
        ("echo_cut", "403 Forbidden"),  # ... across the point where the message is cut
        ("echo_escaped", "403 Forbidden"),  # ... JSON-escaped and as HTML character references
    ],
)
def test_a_token_sent_back_is_never_shown(tmp_path, capsys, monkeypatch, mode, said):
    with HostileServer(mode) as server:
        code, lines = fetch_cli(server.url, tmp_path, capsys, monkeypatch)
    assert code == 2 and len(lines) == 1 and said in lines[0], lines
    assert "[token hidden]" in lines[0], lines
    assert leaked(lines[0]) == [], lines
    assert server.requests == (2 if mode in ("echo_path", "echo_query", "echo_encoded") else 1)


@pytest.mark.parametrize(
    "token, said",
    [
        ("ghp_first\nsecondHALFofthetoken", "a control character at position 10 of 30"),
        ("ghp_tab\tinsideTHEtokenvalue", "a control character at position 8 of 27"),
        ("ghp_bell\x07TOKENvalueHERE", "a control character at position 9 of 23"),
        ("ghp_nonasciiéTOKENvalue", "a non-ASCII character at position 13 of 23"),
        ("ghp_space insideTOKENvalue", "a space at position 10 of 26"),
    ],
)
def test_an_unusable_token_is_refused_up_front(tmp_path, capsys, monkeypatch, token, said):
    with HostileServer("echo_path") as server:
        code, lines = fetch_cli(server.url, tmp_path, capsys, monkeypatch, token=token)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("microctx fetch: GITHUB_TOKEN: ") and said in lines[0], lines
    assert server.requests == 0  # refused before any request
    for part in token.replace("\n", " ").replace("\t", " ").replace("\x07", " ").replace("é", " ").split():
        assert part not in lines[0].removeprefix("microctx fetch: GITHUB_TOKEN: "), lines


@pytest.mark.parametrize(
    "mode, said",
    [
        ("bad_link", "the Link header's next-page link is malformed"),
        ("lying_gzip", "is not valid gzip as its Content-Encoding says"),
        ("unknown_encoding", "unsupported Content-Encoding 'br'"),
        ("redirect_loop", "too many redirects"),
    ],
)
def test_edge_inputs_are_exit_2_and_one_line(tmp_path, capsys, monkeypatch, mode, said):
    with HostileServer(mode) as server:
        code, lines = fetch_cli(server.url, tmp_path, capsys, monkeypatch)
    assert code == 2 and len(lines) == 1 and said in lines[0], lines
    assert leaked(lines[0]) == [], lines
    assert server.requests == (11 if mode == "redirect_loop" else 1)  # the first ask and 10 redirects


def test_scrubbing_comes_before_the_cut():
    """Cut first, then scrubbed, 39 of the 41 characters would stay; scrubbed first, none do."""
    message = "x" * 180 + TOKEN + " was refused"
    assert len(leaked(scrub_secret(message[:200], secret_pattern(TOKEN)), run=20)) == 1  # the old order: 20 shown
    assert leaked(shown(message, 200, secret_pattern(TOKEN))) == []


@pytest.mark.parametrize(
    "form",
    [
        TOKEN,
        "".join(f"%{ord(c):02X}" for c in TOKEN),
        "".join(f"%{ord(c):02x}" for c in TOKEN),
        TOKEN[:10] + "".join(f"%{ord(c):02X}" for c in TOKEN[10:20]) + TOKEN[20:],  # a mix
        "".join(f"\\u{ord(c):04x}" for c in TOKEN),
        "".join(f"&#{ord(c)};" for c in TOKEN),
        "".join(f"&#x{ord(c):x};" for c in TOKEN),
    ],
)
def test_every_escaped_form_is_scrubbed(form):
    text = f"GET https://h.example/repositories/{form}/issues?q={form}&page=2 failed: {form}"
    scrubbed = shown(text, 1000, secret_pattern(TOKEN))
    assert scrubbed.count("[token hidden]") == 3 and "page=2" in scrubbed and leaked(scrubbed) == []


def test_a_doubly_encoded_token_in_a_query_is_scrubbed_after_the_url_is_decoded():
    once = "".join(f"%{ord(c):02X}" for c in TOKEN)
    twice = once.replace("%", "%25")
    assert leaked(shown(f"https://h.example/x?q={twice}", 1000, secret_pattern(TOKEN))) == []


def test_token_errors_never_show_the_value():
    with pytest.raises(InputError) as caught:
        Token("abc\ndefSECRET", "GH_TOKEN")
    assert "SECRET" not in str(caught.value) and "abc" not in str(caught.value)
    token = Token(TOKEN, "GITHUB_TOKEN")
    hidden = token.scrub_error(InputError(f"GET /x/{TOKEN}", f"said {TOKEN}", record=TOKEN))
    assert leaked(str(hidden)) == []
