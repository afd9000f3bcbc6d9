"""The model gateway against the local OpenAI-compatible server (tests/fake_openai.py): the counts
in the manifest are what the server saw, the key reaches the server and never the candidate, a
budget stops a run, and a direct connection to the model host is refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from microctx.candidates.run_record import model_counts
from microctx.candidates.runner import manifest_path
from microctx.cli import main
from tests.test_llm import small  # noqa: F401  (the fixture: 80 s8f records as a corpus)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI  # noqa: E402

KEY = "sk-gateway-test-9f8e7d6c5b4a3210"
PRICES = (2.5, 10.0, 1.25)


def _run(public, out: Path, fake: FakeOpenAI, *extra: str) -> tuple[int, dict]:
    argv = ["run", "llm", "--public", str(public), "--submission", str(out), "--param", "model=fake-model"]
    argv += ["--model-endpoint", fake.base_url, "--model-key-env", "GATEWAY_KEY", "--model-price", ":".join(map(str, PRICES))]
    code = main([*argv, *extra])
    return code, json.loads(manifest_path(out).read_text())


def test_the_gateway_counts_what_the_server_saw_and_holds_the_key(small, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    public, _ = small
    for stream in ("false", "true"):
        with FakeOpenAI() as fake:
            out = tmp_path / f"micro-{stream}.json"
            code, manifest = _run(
                public, out, fake, "--param", "mode=micro", "--param", "concurrency=4", "--param", f"stream={stream}"
            )
            seen = fake.totals()
            auth = {r["authorization"] for r in fake.requests}
        assert code == 0, manifest["error"]
        gateway = manifest["gateway"]
        assert seen["requests"] == 80 == gateway["model_calls"] and gateway["errors"] == 0
        assert {k: gateway[k] for k in ("input_tokens", "output_tokens", "cached_tokens")} == {
            k: seen[k] for k in ("input_tokens", "output_tokens", "cached_tokens")
        }
        fresh = seen["input_tokens"] - seen["cached_tokens"]
        dollars = (fresh * PRICES[0] + seen["output_tokens"] * PRICES[1] + seen["cached_tokens"] * PRICES[2]) / 1e6
        assert gateway["dollars"] == round(dollars, 6) and gateway["ttft_ms_median"] is not None
        assert auth == {f"Bearer {KEY}"}  # the gateway added the key to every call
        assert KEY not in manifest_path(out).read_text() and manifest["passed_env"] == []
        counts = model_counts(manifest)
        assert counts["counts_source"] == "gateway" and counts["model_calls"] == 80 and counts["dollars"] == gateway["dollars"]


def test_the_candidate_never_holds_the_key_and_cannot_go_around_the_gateway(s8f, tmp_path, monkeypatch):
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    script = tmp_path / "probe.py"
    script.write_text(
        "import hashlib, json, os, sys, urllib.request, urllib.error\n"
        "report = {'key_in_env': any('sk-gateway' in v for v in os.environ.values()), 'base': os.environ['OPENAI_BASE_URL']}\n"
        "def post(url):\n"
        "    record = json.load(open('public.json'))['records'][0]\n"
        "    user = 'FIELDS: state\\nRECORDS (JSON):\\n' + json.dumps([record])\n"
        "    msgs = [{'role': 'system', 'content': 's'}, {'role': 'user', 'content': user}]\n"
        "    body = json.dumps({'model': 'fake-model', 'messages': msgs}).encode()\n"
        "    req = urllib.request.Request(url, body, {'Content-Type': 'application/json'})\n"
        "    try:\n"
        "        with urllib.request.urlopen(req, timeout=10) as r: return r.status\n"
        "    except urllib.error.HTTPError as e: return e.code\n"
        "report['gateway'] = post(os.environ['OPENAI_BASE_URL'] + '/chat/completions')\n"
        "report['direct'] = post(sys.argv[2] + '/chat/completions')\n"
        "digest = hashlib.sha256(open('public.json', 'rb').read()).hexdigest()\n"
        "json.dump({'corpus_sha256': digest, 'answers': [], 'probe': report}, open(sys.argv[1], 'w'))\n"
    )
    with FakeOpenAI() as fake:
        out = tmp_path / "probe.json"
        argv = [
            "run",
            "probe",
            "--public",
            str(s8f.public),
            "--submission",
            str(out),
            "--cmd",
            f"python {script} {{submission}} {fake.base_url}",
        ]
        code = main([*argv, "--model-endpoint", fake.base_url, "--model-key-env", "GATEWAY_KEY"])
        requests = list(fake.requests)
    manifest = json.loads(manifest_path(out).read_text())
    assert code == 0, manifest["error"]
    probe = json.loads(out.read_text())["probe"]
    assert probe == {"key_in_env": False, "base": "http://model.gateway/v1", "gateway": 200, "direct": 403}
    assert len(requests) == 1 == manifest["gateway"]["model_calls"]  # the direct call never reached the server
    assert [d["reason"] for d in manifest["network"]["denied"]] == ["host not allowed (see --allow-host)"]


def test_a_path_that_climbs_out_of_v1_is_refused_before_it_reaches_the_endpoint(s8f, tmp_path, monkeypatch):
    """The gateway forwards the path it is given, with the key: `/v1/../admin` (or its encoded
    forms) would reach another place of the endpoint's host once its server, or a proxy before
    it, normalises the path. Refused (404) at the gateway; the endpoint sees the one call under /v1."""
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    climbs = ["/../../admin/keys", "/%2e%2e/%2e%2e/admin/keys", "/..%2f..%2fadmin", "/%252e%252e/admin", "/a/..;/..;/admin"]
    script = tmp_path / "climb.py"
    script.write_text(
        "import hashlib, json, os, sys, urllib.request, urllib.error\n"
        "def post(path):\n"
        "    req = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + path, b'{}', {'Content-Type': 'application/json'})\n"
        "    try:\n"
        "        with urllib.request.urlopen(req, timeout=10) as r: return r.status\n"
        "    except urllib.error.HTTPError as e: return e.code\n"
        f"report = [post(p) for p in {climbs!r} + ['/models']]\n"
        "digest = hashlib.sha256(open('public.json', 'rb').read()).hexdigest()\n"
        "json.dump({'corpus_sha256': digest, 'answers': [], 'probe': report}, open(sys.argv[1], 'w'))\n"
    )
    out = tmp_path / "climb.json"
    argv = ["run", "climb", "--public", str(s8f.public), "--submission", str(out), "--cmd", f"python {script} {{submission}}"]
    with FakeOpenAI() as fake:
        code = main([*argv, "--model-endpoint", fake.base_url, "--model-key-env", "GATEWAY_KEY"])
        paths = [r["path"] for r in fake.requests]
    manifest = json.loads(manifest_path(out).read_text())
    assert code == 0, manifest["error"]
    assert json.loads(out.read_text())["probe"] == [404] * len(climbs) + [404]  # the last: the fake has no /v1/models
    assert paths == ["/v1/models"]  # only the call under /v1 reached the endpoint
    assert [d["reason"] for d in manifest["network"]["denied"]] == ["the model gateway serves /v1/ only"] * len(climbs)


def test_the_gateways_cache_cannot_be_the_candidates_cache_folder(s8f, tmp_path, capsys):
    """The gateway serves a cached answer without a call; the candidate writes its --cache-dir. Were
    the model cache that folder (or inside it, or above it), a candidate would write the answers it
    (and every later configuration of a sweep) is served as the model's, counted as cache hits."""
    script = tmp_path / "poison.py"
    script.write_text(
        "import hashlib, json, os, sys, urllib.request\n"
        "from pathlib import Path\n"
        "doc = {'model': 'm', 'messages': [{'role': 'user', 'content': 'hi'}]}\n"
        "canonical = json.dumps(doc, sort_keys=True, separators=(',', ':')).encode()\n"
        "digest = hashlib.sha256(b'POST /v1/chat/completions\\n' + canonical).hexdigest()\n"
        "fake = json.dumps({'choices': [{'message': {'content': 'fabricated'}}]})\n"
        "entry = {'digest': digest, 'content_type': 'application/json', 'body': fake}\n"
        "Path(os.environ['MICROCTX_CANDIDATE_CACHE'], 'model', digest + '.json').write_text(json.dumps(entry))\n"
        "req = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + '/chat/completions', json.dumps(doc).encode())\n"
        "got = urllib.request.urlopen(req, timeout=10).read().decode()\n"
        "d = hashlib.sha256(open('public.json', 'rb').read()).hexdigest()\n"
        "json.dump({'corpus_sha256': d, 'answers': [], 'got': got}, open(sys.argv[1], 'w'))\n"
    )
    from microctx.candidates.cachedir import MARKER, MARKER_TEXT

    cache = tmp_path / "cache"
    (cache / "model").mkdir(parents=True)
    (cache / MARKER).write_bytes(MARKER_TEXT)  # a cache folder of an earlier run
    out = tmp_path / "poison.json"
    argv = ["run", "poison", "--public", str(s8f.public), "--submission", str(out), "--cmd", f"python {script} {{submission}}"]
    argv += ["--model-endpoint", "http://127.0.0.1:9/v1", "--cache-dir", str(cache)]
    for model_cache in (cache / "model", cache, tmp_path):
        assert main([*argv, "--model-cache", str(model_cache)]) == 2, model_cache
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "--model-cache" in err and "the runner's alone" in err
        assert not out.exists()


def test_a_budget_stops_the_run(small, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GATEWAY_KEY", KEY)
    public, _ = small
    with FakeOpenAI() as fake:
        code, manifest = _run(public, tmp_path / "b.json", fake, "--param", "mode=micro", "--max-model-calls", "3")
        seen = fake.totals()["requests"]
    assert code == 1 and not (tmp_path / "b.json").exists()
    assert manifest["error"] == "over budget: 3 model calls (--max-model-calls) used up"
    assert seen == 3 == manifest["gateway"]["model_calls"] and manifest["gateway"]["refused_over_budget"] >= 1
    with FakeOpenAI() as fake:
        code, manifest = _run(public, tmp_path / "t.json", fake, "--param", "mode=micro", "--max-tokens", "2000")
    assert code == 1 and manifest["error"].startswith("over budget:") and "(--max-tokens)" in manifest["error"]


def test_a_sweeps_sandbox_table_carries_the_gateway(tmp_path):
    import pytest

    from microctx.candidates.settings import GatewaySettings
    from microctx.errors import InputError
    from microctx.tuning.sweep import load_sweep
    from tests.test_sweep_fixes import sweep_file

    table = 'model_endpoint = "http://127.0.0.1:9/v1"\nmodel_key_env = "GATEWAY_KEY"\nmax_model_calls = 5\nmodel_price = "1:2"'
    spec = load_sweep(sweep_file(tmp_path, "miss = [0]", sandbox=table))
    assert spec.sandbox.gateway == GatewaySettings(
        "http://127.0.0.1:9/v1", "GATEWAY_KEY", max_calls=5, price_in=1.0, price_out=2.0
    )
    assert spec.sandbox_identity["gateway"]["max_calls"] == 5
    with pytest.raises(InputError) as info:
        load_sweep(
            sweep_file(tmp_path, "miss = [0]", sandbox='model_endpoint = "http://h/v1"\nmax_model_calls = 0', name="bad.toml")
        )
    assert info.value.field == "sandbox.max_model_calls"
