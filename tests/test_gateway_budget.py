"""Token and dollar budgets kept before a call is forwarded (microctx.candidates.model_budget): with
concurrent calls against the local OpenAI-compatible server, the totals the server saw never pass
the budget and the run fails over budget; a call without an output bound gets the room left; a
call the gateway cannot bound is refused; a call that fits alone waits for the calls in flight."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from microctx.candidates.model_budget import Ask, Budget, dollars_of, read_ask
from microctx.candidates.runner import manifest_path
from microctx.candidates.settings import GatewaySettings
from microctx.cli import main
from tests.test_llm import small  # noqa: F401  (the fixture: 80 s8f records as a corpus)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI  # noqa: E402

KEY = "sk-budget-test-0123456789abcdef"
PRICES = (2.5, 10.0, 1.25)


def _run_llm(public, out: Path, fake: FakeOpenAI, *extra: str) -> tuple[int, dict]:
    argv = ["run", "llm", "--public", str(public), "--submission", str(out), "--param", "model=fake-model"]
    argv += ["--param", "mode=micro", "--param", "concurrency=8"]
    argv += ["--model-endpoint", fake.base_url, "--model-key-env", "BUDGET_KEY", "--model-price", ":".join(map(str, PRICES))]
    code = main([*argv, *extra])
    return code, json.loads(manifest_path(out).read_text())


def _server_dollars(seen: dict) -> float:
    fresh = seen["input_tokens"] - seen["cached_tokens"]
    return (fresh * PRICES[0] + seen["cached_tokens"] * PRICES[2] + seen["output_tokens"] * PRICES[1]) / 1e6


@pytest.mark.parametrize("budget", ["--max-tokens", "--max-dollars"])
def test_concurrent_calls_never_take_the_server_past_the_budget(small, tmp_path, monkeypatch, budget):  # noqa: F811
    monkeypatch.setenv("BUDGET_KEY", KEY)
    public, _ = small
    limit = "30000" if budget == "--max-tokens" else "0.04"
    with FakeOpenAI(delay=0.3, honour_max_tokens=True) as fake:  # calls overlap: 8 in flight at once
        code, manifest = _run_llm(public, tmp_path / "out.json", fake, budget, limit)
        seen = fake.totals()
        most_at_once = fake.max_in_flight
    gateway = manifest["gateway"]
    assert code == 1 and manifest["error"].startswith("over budget:") and f"({budget})" in manifest["error"]
    assert 0 < seen["requests"] < 80 and gateway["model_calls"] == seen["requests"]
    assert (gateway["input_tokens"], gateway["output_tokens"]) == (seen["input_tokens"], seen["output_tokens"])
    if budget == "--max-tokens":
        assert seen["input_tokens"] + seen["output_tokens"] <= 30000
    else:
        assert _server_dollars(seen) <= 0.04 and gateway["dollars"] <= 0.04
    assert most_at_once >= 2  # while there is room, calls still run side by side
    assert gateway["refused_over_budget"] >= 1


def test_a_call_without_a_bound_gets_the_room_left_and_an_unboundable_call_is_refused(s8f, tmp_path, monkeypatch):
    monkeypatch.setenv("BUDGET_KEY", KEY)
    script = tmp_path / "probe.py"
    script.write_text(
        "import hashlib, json, os, sys, urllib.request, urllib.error\n"
        "record = json.load(open('public.json'))['records'][0]\n"
        "user = 'FIELDS: state\\nRECORDS (JSON):\\n' + json.dumps([record])\n"
        "msgs = [{'role': 'system', 'content': 's'}, {'role': 'user', 'content': user}]\n"
        "def post(path, doc):\n"
        "    body = json.dumps(doc).encode()\n"
        "    req = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + path, body, {'Content-Type': 'application/json'})\n"
        "    try:\n"
        "        with urllib.request.urlopen(req, timeout=20) as r: return [r.status, len(body)]\n"
        "    except urllib.error.HTTPError as e: return [e.code, len(body), json.load(e)['error']['code']]\n"
        "report = [post('/chat/completions', {'model': 'fake-model', 'messages': msgs})]\n"
        "report.append(post('/images/generations', {'prompt': 'x'}))\n"
        "report.append(post('/chat/completions', {'model': 'fake-model', 'messages': msgs, 'n': 'many'}))\n"
        "digest = hashlib.sha256(open('public.json', 'rb').read()).hexdigest()\n"
        "json.dump({'corpus_sha256': digest, 'answers': [], 'probe': report}, open(sys.argv[1], 'w'))\n"
    )
    out = tmp_path / "probe.json"
    argv = ["run", "probe", "--public", str(s8f.public), "--submission", str(out), "--cmd", f"python {script} {{submission}}"]
    with FakeOpenAI(honour_max_tokens=True) as fake:
        code = main([*argv, "--model-endpoint", fake.base_url, "--model-key-env", "BUDGET_KEY", "--max-tokens", "50000"])
        bodies = [r["body"] for r in fake.requests]
    manifest = json.loads(manifest_path(out).read_text())
    assert code == 0, manifest["error"]
    first, images, bad_n = json.loads(out.read_text())["probe"]
    assert first[0] == 200 and images[::2] == [400, "unbounded"] and bad_n[::2] == [400, "unbounded"]
    assert len(bodies) == 1 and bodies[0]["max_completion_tokens"] == 50000 - first[1]  # injected: all that was left
    gateway = manifest["gateway"]
    assert gateway["capped_calls"] == 1 and gateway["refused_unbounded"] == 2 and gateway["model_calls"] == 1


def test_a_batch_of_prompts_reserves_its_bound_for_every_prompt(s8f, tmp_path, monkeypatch):
    """`/v1/completions` takes a list of prompts and answers each up to `max_tokens`: one call of 40
    short prompts with max_tokens 100 may make 4,000 tokens. Reserved as one prompt (bytes + 100) it
    would pass a 3,000-token budget uncapped; reserved per prompt, its bound is cut to what is left."""
    monkeypatch.setenv("BUDGET_KEY", KEY)
    script = tmp_path / "batch.py"
    script.write_text(
        "import hashlib, json, os, sys, urllib.request\n"
        "doc = {'model': 'fake-model', 'prompt': ['issue %d' % i for i in range(40)], 'max_tokens': 100}\n"
        "body = json.dumps(doc).encode()\n"
        "req = urllib.request.Request(os.environ['OPENAI_BASE_URL'] + '/completions', body, {'Content-Type': 'application/json'})\n"
        "with urllib.request.urlopen(req, timeout=20) as r: got = [r.status, len(body), len(json.load(r)['choices'])]\n"
        "digest = hashlib.sha256(open('public.json', 'rb').read()).hexdigest()\n"
        "json.dump({'corpus_sha256': digest, 'answers': [], 'batch': got}, open(sys.argv[1], 'w'))\n"
    )
    out = tmp_path / "batch.json"
    argv = ["run", "batch", "--public", str(s8f.public), "--submission", str(out), "--cmd", f"python {script} {{submission}}"]
    with FakeOpenAI() as fake:
        code = main([*argv, "--model-endpoint", fake.base_url, "--model-key-env", "BUDGET_KEY", "--max-tokens", "3000"])
        seen, bodies = fake.totals(), [r["body"] for r in fake.requests]
    manifest = json.loads(manifest_path(out).read_text())
    assert code == 0, manifest["error"]
    status, size, choices = json.loads(out.read_text())["batch"]
    assert status == 200 and choices == 40 and len(bodies) == 1
    assert bodies[0]["max_tokens"] == (3000 - size) // 40  # the room left, shared by the 40 prompts
    assert seen["input_tokens"] + seen["output_tokens"] <= 3000
    assert manifest["gateway"]["capped_calls"] == 1 and manifest["gateway"]["over_budget"] is None


def test_reading_what_a_call_may_spend():
    chat = b'{"model": "m", "messages": [], "max_tokens": 50, "n": 3}'
    assert read_ask("POST", "/chat/completions", chat) == Ask(len(chat), "max_tokens", 50, 3)
    bare = b'{"model": "m", "messages": []}'
    assert read_ask("POST", "/chat/completions", bare) == Ask(len(bare), "max_completion_tokens", None, 1)
    assert read_ask("POST", "/responses", b'{"max_output_tokens": 9}') == Ask(24, "max_output_tokens", 9, 1)
    assert read_ask("POST", "/embeddings?x=1", b'{"input": "abc"}') == Ask(16)
    assert read_ask("GET", "/models", b"") == Ask(0)
    batch = b'{"prompt": ["a", "b", "c"], "max_tokens": 5, "n": 2}'
    assert read_ask("POST", "/completions", batch) == Ask(len(batch), "max_tokens", 5, 6)  # 3 prompts, 2 choices each
    tokens = b'{"prompt": [1, 2, 3], "max_tokens": 5}'
    assert read_ask("POST", "/completions", tokens) == Ask(len(tokens), "max_tokens", 5, 1)  # one prompt of token ids
    for path, body in (
        ("/chat/completions", b"not json"),
        ("/chat/completions", b'{"max_tokens": 0}'),
        ("/chat/completions", b'{"max_tokens": true}'),
        ("/completions", b'{"best_of": 1000}'),
        ("/audio/speech", b"{}"),
    ):
        assert isinstance(read_ask("POST", path, body), str), (path, body)


def test_a_call_that_fits_alone_waits_for_the_calls_in_flight_and_unused_room_is_released():
    budget = Budget(GatewaySettings("http://h/v1", max_tokens=1000))
    with budget.cond:
        why, cap, first = budget.reserve(Ask(300, "max_tokens", 400, 1))
    assert (why, cap, first.tokens) == ("", None, 700)
    got: list = []

    def second() -> None:
        with budget.cond:
            got.append(budget.reserve(Ask(300, "max_tokens", 400, 1)))

    thread = threading.Thread(target=second)
    thread.start()
    time.sleep(0.3)
    assert got == [] and thread.is_alive()  # 700 reserved + 300 input: no room for one output token beside it
    with budget.cond:
        budget.settle(first, 200, {"prompt_tokens": 100, "completion_tokens": 50, "cached_tokens": 0})
    thread.join(5)
    why, cap, reservation = got[0]
    assert (why, cap, reservation.tokens) == ("", None, 700) and budget.waited_calls == 1 and budget.used_tokens == 150
    with budget.cond:  # 150 used + 700 reserved: a third call fits alone (1000 - 150) but is capped once the second ends
        budget.settle(reservation, 200, None)  # answered without usage: charged its whole reservation
        assert budget.used_tokens == 850 and budget.charged_without_usage_tokens == 700
        why, cap, third = budget.reserve(Ask(100, "max_tokens", 400, 1))
        assert (why, cap, third.tokens) == ("", 50, 150) and budget.capped_calls == 1
        budget.settle(third, 200, {"prompt_tokens": 100, "completion_tokens": 50, "cached_tokens": 0})
        why, cap, _ = budget.reserve(Ask(10, "max_tokens", 5, 1))
    assert why.startswith("over budget:") and "(--max-tokens)" in why and cap is None


def test_dollars_of_prices_cached_input_apart():
    settings = GatewaySettings("http://h/v1", price_in=2.0, price_out=8.0, price_cached=0.5)
    assert dollars_of(settings, 1_000_000, 400_000, 100_000) == pytest.approx(1.2 + 0.2 + 0.8)
