"""A passed key never shows in what the runner writes or prints, wherever the candidate puts it
(cut by the output tail, in its version, in a logged URL, in an error), and control characters a
candidate prints reach the operator's terminal escaped."""

from __future__ import annotations

import json
from pathlib import Path

from microctx.candidates.run_files import output_tail, redact
from microctx.candidates.runner import manifest_path
from microctx.cli import main

KEY = "sk-live-0123456789abcdefghijklmnopqrstuv"


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "leak.py"
    path.write_text("import json, os, sys\nKEY = os.environ['LEAKY_KEY']\n" + body)
    return path


def test_the_key_cut_by_the_tail_and_in_the_version_is_redacted(s8f, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LEAKY_KEY", KEY)
    body = (
        "from urllib.parse import quote\n"
        "json.dump({'version': KEY + ' build ' + 'v' * 300}, open('counters.json', 'w'))\n"
        "sys.stdout.write(quote(KEY, safe='') + ' ' + json.dumps({'k': KEY}) + '\\n')\n"
        "sys.stdout.write(KEY[:20] + '|' + 'y' * 10 + '\\n')\n"
        "sys.stdout.write(KEY + 'x' * 3980 + '\\n')\n"  # the 4,000-character cut falls inside the key
        "sys.stdout.write('\\x1b[2J\\x1b]0;owned\\x07 failing with ' + KEY + '\\n')\n"
        "sys.exit(3)\n"
    )
    script = _script(tmp_path, body)
    out = tmp_path / "out.json"
    argv = ["run", "leak", "--public", str(s8f.public), "--submission", str(out), "--pass-env", "LEAKY_KEY"]
    assert main([*argv, "--cmd", f"python {script}"]) == 1
    err = capsys.readouterr().err
    text = manifest_path(out).read_text()
    manifest = json.loads(text)
    for half in (KEY, KEY[:20], KEY[-20:], KEY[len(KEY) // 2 :]):
        assert half not in text and half not in err
    assert manifest["output_tail"].endswith("failing with [redacted]\n") and len(manifest["output_tail"]) <= 4000
    assert manifest["version"] is None or manifest["version"].startswith("[redacted] build")
    assert "\x1b" not in err and "\x07" not in err and "\\x1b[2J\\x1b]0;owned\\x07 failing with [redacted]" in err


def test_tail_redaction_drops_a_key_cut_by_the_window(tmp_path):
    output = tmp_path / "output.txt"
    for shift in range(0, len(KEY) + 2):
        output.write_text("a" * 50_000 + KEY + "b" * (16_000 - shift) + "\n")
        tail = output_tail(output, [KEY])
        assert not any(KEY[i:] in tail for i in range(len(KEY) - 4)) and tail.endswith("b\n")
    assert redact(f"https://h/?key={KEY}&x={KEY.upper()}", [KEY]) == f"https://h/?key=[redacted]&x={KEY.upper()}"


def test_the_key_cut_by_the_proxy_log_is_redacted(s8f, tmp_path, monkeypatch, capsys):
    """Requests the proxy refuses are logged with their target and reason cut (200, 300
    characters): the key is removed before the cut, wherever the cut falls in it."""
    monkeypatch.setenv("LEAKY_KEY", KEY)
    body = (
        "import socket\n"
        "def send(head):\n"
        "    s = socket.create_connection(('127.0.0.1', 3128)); s.sendall(head.encode()); s.recv(100); s.close()\n"
        "for pad in range(150, 185, 3):\n"
        "    send(f'GET http://denied.example/{\"a\" * pad}{KEY} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"  # not allowed
        "    send(f'GET http://denied.example/{\"a\" * pad}{KEY}\\nHost: x\\r\\n\\r\\n')\n"  # a bare LF
        "    send(f'CONNECT {\"a\" * (pad - 100)}{KEY}:99999 HTTP/1.1\\r\\n\\r\\n')\n"  # a malformed target, in the reason
    )
    script = _script(tmp_path, body)
    out = tmp_path / "out.json"
    argv = ["run", "leak", "--public", str(s8f.public), "--submission", str(out), "--pass-env", "LEAKY_KEY"]
    assert main([*argv, "--network", "record", "--allow-host", "example.org", "--cmd", f"python {script}"]) == 1
    text = manifest_path(out).read_text()
    denied = json.loads(text)["network"]["denied"]
    assert len(denied) == 36 and all("[redacted]:99999" in d["reason"] for d in denied if d["method"] == "CONNECT")
    assert KEY[:8] not in text and KEY[:8] not in capsys.readouterr().err


def test_every_escaped_form_of_a_key_is_redacted(tmp_path):
    """Percent-encoding in lower case, JSON's `\\/`, HTML's named and numeric references, `\\u`
    escapes (any mix): each is removed, as the fetch token's are; the raw key only in its case."""
    import html
    import re
    from urllib.parse import quote, quote_plus

    key = "Ab+cd/ef=gh&ij<kl 0123456789=="
    pct = quote(key, safe="")
    forms = [
        key,
        pct,
        re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), pct),
        quote_plus(key),
        json.dumps(key)[1:-1],
        json.dumps(key)[1:-1].replace("/", "\\/"),
        html.escape(key),
        "".join(f"&#{ord(c)};" for c in key),
        "".join(f"\\u{ord(c):04x}" for c in key),
        key[:9] + pct[pct.index("%3D") + 3 :].replace("%3D", "%3d"),  # a mix
    ]
    for form in forms:
        assert redact(f"<{form}>", [key]) == "<[redacted]>", form
    assert redact(key.upper(), [key]) == key.upper()
    output = tmp_path / "output.txt"
    for shift in range(0, 200, 7):  # the window's margin covers the longest form
        output.write_text("a" * 50_000 + forms[8] + "b" * (16_000 - shift) + "\n")
        tail = output_tail(output, [key])
        assert "\\u0030\\u0031" not in tail and tail.endswith("b\n")


def test_a_key_given_where_its_variable_s_name_belongs_is_never_echoed_or_recorded(s8f, tmp_path, monkeypatch, capsys):
    """The key itself given for --model-key-env, --pass-env, --token-env, or as a parameter
    (`--param api_key_env=sk-...`): before, the error line showed the key and the run manifest
    recorded it; now the line hides it by value (any secret of the environment) and a parameter
    holding one is refused before anything runs. A URL in a message has its password hidden too."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MICROCTX_TOKEN", KEY[::-1])
    out = tmp_path / "s.json"
    run = ["run", "exact-sql", "--public", str(s8f.public), "--submission", str(out)]
    cases = [
        [*run, "--model-endpoint", "https://api.example/v1", "--model-key-env", KEY],
        [*run, "--pass-env", KEY],
        [*run, "--model-endpoint", f"ftp://user:{KEY[::-1]}@api.example/v1"],
        [*run, "--model-endpoint", "http://[broken"],
        ["submit", "--server", "http://127.0.0.1:9", "--token-env", KEY[::-1], str(s8f.answers)],
        ["run", "llm", "--public", str(s8f.public), "--submission", str(out), "--param", f"api_key_env={KEY}"],
    ]
    for argv in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and KEY not in err and KEY[::-1] not in err and "internal error" not in err, err
    assert "a parameter holds the value of $OPENAI_API_KEY" in err
    assert list(tmp_path.iterdir()) == []
