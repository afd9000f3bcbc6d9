"""The model-backed candidate against a local OpenAI-compatible server (tests/fake_openai.py).

Every run goes through `microctx run llm ...` (the isolated runner, process mode), so the counters
checked are the ones the run manifest holds; they are compared with what the server saw.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from microctx.api import grade
from microctx.candidates.builtins import llm
from microctx.candidates.runner import manifest_path, run_candidate
from microctx.cli import main
from microctx.corpus.freeze import freeze, write_frozen
from microctx.corpus.public import corpus_to_issues, load_corpus
from microctx.errors import InputError
from microctx.grading import slices

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI, prompt_records  # noqa: E402


@pytest.fixture(scope="module")
def small(tmp_path_factory, s8f_corpus):
    """The first 80 s8f records frozen as a corpus of their own (public, answers)."""
    folder = tmp_path_factory.mktemp("small")
    frozen = freeze(corpus_to_issues(s8f_corpus)[:80], "s8f first 80 records")
    paths = folder / "public.json", folder / "answers.json", folder / "report.json"
    write_frozen(frozen, *paths)
    return paths[0], paths[1]


def run_llm(public, out: Path, fake: FakeOpenAI, *params: str, pass_env=(), cache_dir: Path | None = None) -> dict:
    host = fake.base_url.split("//", 1)[1].split("/", 1)[0]  # 127.0.0.1:PORT
    argv = [
        "run",
        "llm",
        "--public",
        str(public),
        "--submission",
        str(out),
        "--network",
        "record",
        "--allow-host",
        host,
        "--param",
        f"base_url={fake.base_url}",
        "--param",
        "model=fake-model",
    ]
    for param in params:
        argv += ["--param", param]
    for name in pass_env:
        argv += ["--pass-env", name]
    if cache_dir is not None:  # the one folder the sandboxed candidate may keep between runs
        cache_dir.mkdir(exist_ok=True)
        argv += ["--cache-dir", str(cache_dir)]
    code = main(argv)
    manifest = json.loads(manifest_path(out).read_text())
    assert code == (0 if manifest["ok"] else 1)
    return manifest


def test_test_records(small):
    answers = json.loads(Path(small[1]).read_text())["answers"]
    assert sum(a["split"] == "test" for a in answers) >= 40


def _test_ids(answers_path, n: int) -> list[str]:
    answers = json.loads(Path(answers_path).read_text())["answers"]
    # test records with a label and a reference-free body are the plainest to reason about
    return [a["id"] for a in answers if a["split"] == "test" and a["labels"]][:n]


def test_micro_counters_equal_what_the_server_saw_and_a_429_is_one_retry(small, tmp_path):
    public, answers = small
    target = _test_ids(answers, 1)[0]
    with FakeOpenAI(faults={target: ["429"]}, retry_after="1") as fake:
        manifest = run_llm(
            public,
            tmp_path / "micro.json",
            fake,
            "mode=micro",
            "concurrency=4",
            "backoff=0.01",
            "price_in=2.5",
            "price_out=10",
            "price_cached=1.25",
        )
        seen = fake.totals()
        statuses = [r["status"] for r in fake.requests if r.get("ids") == [target]]
    assert manifest["ok"], manifest["error"]
    c = manifest["counters"]
    assert seen["requests"] == 81 and c["model_calls"] == 81  # 80 records, one of them twice
    assert statuses == [429, 200]
    assert c["retries"] == 1 and c["retry_wait_ms"] == 1000  # Retry-After: 1 beat the 0.01 s backoff
    assert (c["input_tokens"], c["output_tokens"], c["cached_tokens"]) == (
        seen["input_tokens"],
        seen["output_tokens"],
        seen["cached_tokens"],
    )
    assert c["cached_tokens"] > 0 and c["failed_answers"] == 0 and c["failed_calls"] == 0
    expected = round(
        (seen["input_tokens"] - seen["cached_tokens"]) * 2.5 + seen["cached_tokens"] * 1.25 + seen["output_tokens"] * 10
    )
    assert c["cost_microdollars"] == expected
    assert c["ttft_ms_median"] is not None and c["ttft_ms_max"] >= c["ttft_ms_median"]
    assert c["model_records"] == 80 and c["prompts"] == 80 and c["prompt_version"] == 1
    assert manifest["version"].endswith("+prompt.micro.v1")
    assert grade(answers, tmp_path / "micro.json").passed


def test_the_runner_side_count_agrees_and_a_difference_is_flagged(small, tmp_path):
    """The seam for the sandbox's recording proxy: usage read off the wire, reconciled with the counters."""
    from microctx.candidates.usage import reconcile, usage_from_response

    public, answers = small
    target = _test_ids(answers, 1)[0]
    with FakeOpenAI(faults={target: ["429", "500"]}) as fake:
        manifest = run_llm(public, tmp_path / "r.json", fake, "mode=chunks", "chunk_records=9", "backoff=0")
        host = fake.base_url.split("/")[2]
        wire = [
            {
                "host": host,
                "method": "POST",
                "path": r["path"],
                "status": r["status"],
                "usage": usage_from_response(r["content_type"], r["response"]),
            }
            for r in fake.requests
        ]
    assert manifest["counters"]["model_calls"] == len(wire) == 9 + 2
    # the runner's proxy read the same traffic itself: its count and the candidate's agree
    seen_by_runner = manifest["model_usage_check"]
    assert seen_by_runner["agree"] and seen_by_runner["tokens_seen"] and seen_by_runner["differences"] == []
    assert seen_by_runner["runner"] == {
        key: manifest["counters"][key] for key in ("model_calls", "input_tokens", "output_tokens", "cached_tokens")
    }
    assert len(manifest["network"]["requests"]) == 11 and all(
        "usage" in r for r in manifest["network"]["requests"] if r["status"] == 200
    )
    check = reconcile(wire, manifest["counters"], fake.base_url)
    assert check["agree"] and check["tokens_seen"] and check["runner"]["input_tokens"] == manifest["counters"]["input_tokens"]
    other_host = [*wire, {"host": "example.org:443", "method": "POST", "path": "/v1/chat/completions", "status": 200}]
    assert reconcile(other_host, manifest["counters"], fake.base_url)["agree"]
    planted = reconcile(wire[1:], manifest["counters"], fake.base_url)
    assert not planted["agree"] and planted["differences"][0] == "model_calls: runner 10, candidate 11"
    opaque = reconcile([{**w, "path": None, "usage": None} for w in wire], manifest["counters"], fake.base_url)
    assert opaque["agree"] and not opaque["tokens_seen"] and set(opaque["runner"]) == {"model_calls"}


def test_malformed_answers_fail_those_records_only(small, tmp_path):
    public, answers = small
    bad = _test_ids(answers, 3)
    with FakeOpenAI(faults={bad[0]: ["malformed"], bad[1]: ["badshape"], bad[2]: ["garbage"]}) as fake:
        manifest = run_llm(public, tmp_path / "bad.json", fake, "mode=micro", "stream=false")
        assert manifest["counters"]["model_calls"] == len(fake.requests) == 80  # garbage is not retried
    assert manifest["ok"], manifest["error"]
    c = manifest["counters"]
    assert c["failed_answers"] == 3 and c["failed_calls"] == 1 and c["retries"] == 0
    assert "ttft_ms_median" not in c  # not streamed: no time to first token, so none reported
    submitted = {a["id"] for a in json.loads((tmp_path / "bad.json").read_text())["answers"]}
    assert submitted == {f"issue-{r['number']}" for r in load_corpus(public).records} - set(bad)
    result = grade(answers, tmp_path / "bad.json")
    missed = {(f.record_id, f.outcome) for f in result.facts if f.outcome in ("fn", "fp")}
    assert {rid for rid, _ in missed} == set(bad) and {o for _, o in missed} == {"fn"}
    assert result.grade["false_positive_facts"] == 0 and result.grade["exact_records"] == result.grade["test_records"] - 3
    assert "failed answer" in manifest["output_tail"] and "keys: missing [], unexpected ['confidence']" in manifest["output_tail"]


def test_a_rerun_with_the_cache_makes_zero_calls(small, tmp_path):
    public, _ = small
    cache = tmp_path / "cache"
    with FakeOpenAI() as fake:
        first = run_llm(public, tmp_path / "one.json", fake, "mode=chunks", "chunk_records=12", "overlap=4", cache_dir=cache)
        calls = len(fake.requests)
        second = run_llm(public, tmp_path / "two.json", fake, "mode=chunks", "chunk_records=12", "overlap=4", cache_dir=cache)
        assert len(fake.requests) == calls  # the server saw nothing more
    assert first["counters"]["model_calls"] == calls == first["counters"]["prompts"] == 10
    assert second["counters"]["model_calls"] == 0 and second["counters"]["cache_hits"] == calls
    assert second["counters"]["input_tokens"] == 0
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()
    log = [json.loads(line) for line in (cache / "calls.jsonl").read_text().splitlines()]
    assert len(log) == calls and all(e["ok"] for e in log)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_the_server_never_sees_more_calls_at_once_than_the_concurrency_limit(small, tmp_path, concurrency):
    public, _ = small
    with FakeOpenAI(delay=0.05) as fake:
        manifest = run_llm(public, tmp_path / "c.json", fake, "mode=chunks", "chunk_records=4", f"concurrency={concurrency}")
        assert manifest["ok"] and len(fake.requests) == 20
        assert 1 <= fake.max_in_flight <= concurrency


def test_a_slow_call_passes_its_deadline_and_is_retried(small, tmp_path):
    public, answers = small
    target = _test_ids(answers, 1)[0]
    with FakeOpenAI(faults={target: ["slow"]}, slow_seconds=8) as fake:
        manifest = run_llm(public, tmp_path / "slow.json", fake, "mode=micro", "call_timeout=2", "backoff=0")
        assert len(fake.requests) == manifest["counters"]["model_calls"] == 81
    c = manifest["counters"]
    assert c["retries"] == 1 and c["failed_answers"] == 0
    assert grade(answers, tmp_path / "slow.json").passed


def test_a_stream_cut_before_done_is_retried_and_its_tokens_not_counted(small, tmp_path):
    public, answers = small
    target = _test_ids(answers, 1)[0]
    with FakeOpenAI(faults={target: ["cutstream"]}) as fake:
        manifest = run_llm(public, tmp_path / "cut.json", fake, "mode=micro", "backoff=0")
        cut = [r for r in fake.requests if r.get("behaviour") == "cutstream"]
        delivered = [r["usage"] for r in fake.requests if r.get("behaviour") != "cutstream" and r["usage"]]
    c = manifest["counters"]
    assert len(cut) == 1 and c["model_calls"] == 81 and c["retries"] == 1 and c["failed_answers"] == 0
    # the cut stream never delivered its usage: only the delivered ones are counted
    assert c["input_tokens"] == sum(u["prompt_tokens"] for u in delivered)
    assert grade(answers, tmp_path / "cut.json").passed


def test_the_total_deadline_stops_the_calls(small, tmp_path):
    public, _ = small
    first = load_corpus(public).records[0]["id"]
    with FakeOpenAI(faults={first: ["slow"]}, slow_seconds=8) as fake:
        manifest = run_llm(public, tmp_path / "d.json", fake, "mode=micro", "concurrency=1", "deadline=1.5", "backoff=0")
        assert len(fake.requests) == manifest["counters"]["model_calls"] == 1
    c = manifest["counters"]
    assert manifest["ok"] and c["failed_calls"] == 80 and c["failed_answers"] == 80 and c["retries"] == 0
    assert json.loads((tmp_path / "d.json").read_text())["answers"] == []  # nothing answered, nothing claimed
    assert "the total deadline passed" in manifest["output_tail"]


def test_persistent_server_errors_fail_the_record_after_the_retries(small, tmp_path):
    public, answers = small
    target = _test_ids(answers, 1)[0]
    with FakeOpenAI(faults={target: ["500"] * 5}) as fake:
        manifest = run_llm(public, tmp_path / "e.json", fake, "mode=micro", "retries=2", "backoff=0")
        assert len(fake.requests) == manifest["counters"]["model_calls"] == 82
    c = manifest["counters"]
    assert c["retries"] == 2 and c["failed_calls"] == 1 and c["failed_answers"] == 1
    assert "issue-" in manifest["output_tail"] and "call failed: HTTP 500" in manifest["output_tail"]


def test_hybrid_on_s8f_passes_with_zero_model_calls(s8f, tmp_path):
    with FakeOpenAI() as fake:
        manifest = run_llm(s8f.public, tmp_path / "hybrid.json", fake, "mode=hybrid")
        assert fake.requests == []
    assert manifest["ok"], manifest["error"]
    c = manifest["counters"]
    assert (c["model_calls"], c["model_records"], c["prompts"], c["input_tokens"], c["cost_microdollars"]) == (0, 0, 0, 0, 0)
    assert grade(s8f.answers, tmp_path / "hybrid.json").passed


def test_hybrid_calls_the_model_only_for_what_the_exact_frontier_leaves(small, tmp_path):
    """With task=labels the exact frontier may not read the labels: the model is asked, once per
    record, for labels alone; every other fact comes from the exact queries."""
    public, answers = small
    gold = {a["id"]: a for a in json.loads(Path(answers).read_text())["answers"]}
    wrong = {rid: {**a, "labels": ["planted"], "state": "OPEN", "references": [999999]} for rid, a in gold.items()}
    with FakeOpenAI(oracle=wrong) as fake:
        manifest = run_llm(public, tmp_path / "h.json", fake, "mode=hybrid", "task=labels")
        asked = [r["ids"] for r in fake.requests]
        shown = [prompt_records(r["body"]["messages"][1]["content"])[1][0] for r in fake.requests]
    assert sorted(sum(asked, [])) == sorted(gold) and manifest["counters"]["model_calls"] == len(gold)
    assert all("labels" not in h and "state" not in h for h in shown)  # hidden from the prompt
    submitted = {a["id"]: a for a in json.loads((tmp_path / "h.json").read_text())["answers"]}
    assert all(submitted[rid]["labels"] == ["planted"] for rid in gold)  # the model's labels
    assert all(submitted[rid]["state"] == gold[rid]["state"] for rid in gold)  # the frontier's state,
    assert all(submitted[rid]["references"] == gold[rid]["references"] for rid in gold)  # and references


def test_task_labels_hides_state_and_labels_from_the_prompt(small, tmp_path):
    public, answers = small
    gold = {a["id"]: a for a in json.loads(Path(answers).read_text())["answers"]}
    with FakeOpenAI(oracle=gold) as fake:
        manifest = run_llm(public, tmp_path / "labels.json", fake, "mode=micro", "task=labels", "retrieval_k=3")
        bodies = [r["body"]["messages"][1]["content"] for r in fake.requests]
    assert manifest["ok"] and manifest["counters"]["model_calls"] == 80
    for content in bodies:
        fields, records = prompt_records(content)
        assert fields == ["labels"]
        assert set(records[0]) == {"id", "number", "title", "body"}  # no state, labels or closed_at
        assert "SIMILAR RECORDS (JSON):" in content
    assert grade(answers, tmp_path / "labels.json").passed  # the oracle server knows the labels


def test_the_api_key_is_sent_and_never_written(small, tmp_path, monkeypatch):
    public, _ = small
    secret = "sk-test-planted-0123456789abcdef"
    monkeypatch.setenv("FAKE_OPENAI_KEY", secret)
    with FakeOpenAI() as fake:
        manifest = run_llm(
            public, tmp_path / "k.json", fake, "mode=long", "api_key_env=FAKE_OPENAI_KEY", pass_env=["FAKE_OPENAI_KEY"]
        )
        assert {r["authorization"] for r in fake.requests} == {f"Bearer {secret}"}
    assert manifest["ok"] and manifest["passed_env"] == ["FAKE_OPENAI_KEY"]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace"), path
    # without --pass-env the key never reaches the candidate: a failed run that says how to pass it
    with FakeOpenAI() as fake:
        failed = run_llm(public, tmp_path / "k2.json", fake, "mode=long", "api_key_env=FAKE_OPENAI_KEY")
        assert fake.requests == []
    assert not failed["ok"] and "--pass-env FAKE_OPENAI_KEY" in failed["error"]


def test_a_candidate_printing_a_passed_secret_is_redacted(small, tmp_path, monkeypatch):
    public, _ = small
    secret = "sk-printed-secret-987654321"
    monkeypatch.setenv("PRINTED_KEY", secret)
    script = tmp_path / "leaky.py"
    script.write_text("import os, sys\nprint('my key is', os.environ['PRINTED_KEY'])\nsys.exit(3)\n")
    manifest = run_candidate("leaky", public, tmp_path / "leak.json", cmd=f"{{python}} {script}", pass_env=["PRINTED_KEY"])
    assert not manifest["ok"] and "my key is [redacted]" in manifest["output_tail"]
    assert secret not in manifest_path(tmp_path / "leak.json").read_text()
    with pytest.raises(InputError, match="PATH is set by the runner"):
        run_candidate("leaky", public, tmp_path / "leak.json", cmd=f"{{python}} {script}", pass_env=["PATH"])
    monkeypatch.delenv("PRINTED_KEY")
    assert (
        main(
            [
                "run",
                "leaky",
                "--public",
                str(public),
                "--submission",
                str(tmp_path / "l.json"),
                "--cmd",
                f"{{python}} {script}",
                "--pass-env",
                "PRINTED_KEY",
            ]
        )
        == 2
    )


def test_splits_restrict_what_is_sent_and_submitted(small, tmp_path):
    public, answers = small
    tune = [r["id"] for r in load_corpus(public).records if r["split"] == "tune"]
    with FakeOpenAI() as fake:
        manifest = run_llm(public, tmp_path / "t.json", fake, "mode=micro", "splits=tune")
        assert sorted(sum((r["ids"] for r in fake.requests), [])) == sorted(tune)
    submitted = [a["id"] for a in json.loads((tmp_path / "t.json").read_text())["answers"]]
    assert submitted == tune and manifest["counters"]["model_records"] == len(tune) > 0
    assert not grade(answers, tmp_path / "t.json").passed  # a tune run cannot pass on test


def test_bad_parameters_fail_the_run_naming_the_parameter(small, tmp_path):
    public, _ = small
    with FakeOpenAI() as fake:
        manifest = run_llm(public, tmp_path / "x.json", fake, "mode=sideways")
        assert not manifest["ok"] and "parameter mode: expected one of micro, long, chunks, hybrid" in manifest["error"]
        manifest = run_llm(public, tmp_path / "x.json", fake, "mode=chunks", "chunk_records=5", "overlap=5")
        assert not manifest["ok"] and "parameter overlap" in manifest["error"]
        manifest = run_llm(public, tmp_path / "x.json", fake, "cache=relative/folder")
        assert not manifest["ok"] and "absolute path" in manifest["error"]
        manifest = run_llm(public, tmp_path / "x.json", fake, "splits=test,holdout")
        assert not manifest["ok"] and "parameter splits" in manifest["error"]
        assert fake.requests == []
    assert main(["run", "llm", "--public", str(public), "--submission", str(tmp_path / "y.json"), "--param", "temperatur=0"]) == 2


@pytest.mark.slow
def test_micro_on_s8f_with_a_correct_server_passes(s8f, tmp_path):
    with FakeOpenAI() as fake:
        manifest = run_llm(
            s8f.public,
            tmp_path / "micro.json",
            fake,
            "mode=micro",
            "concurrency=8",
            "price_in=0.15",
            "price_out=0.6",
            "price_cached=0.075",
        )
        seen = fake.totals()
    c = manifest["counters"]
    assert manifest["ok"] and c["model_calls"] == seen["requests"] == 1000
    assert (c["input_tokens"], c["output_tokens"], c["cached_tokens"]) == (
        seen["input_tokens"],
        seen["output_tokens"],
        seen["cached_tokens"],
    )
    assert grade(s8f.answers, tmp_path / "micro.json").passed


def test_a_wrong_server_shows_in_the_slices(s8f, s8f_corpus, tmp_path):
    with FakeOpenAI(wrong={"drop_label": "enhancement"}) as fake:
        manifest = run_llm(s8f.public, tmp_path / "wrong.json", fake, "mode=long", "context_tokens=65536")
        assert manifest["counters"]["model_calls"] == len(fake.requests) == manifest["counters"]["prompts"]
    result = grade(s8f.answers, tmp_path / "wrong.json")
    assert not result.passed and result.grade["false_positive_facts"] == 0
    table = slices.slice_table(
        slices.facts_frame(result.facts), s8f_corpus
    )  # the default resamples: with few, no p-value survives the adjustment
    row = table[(table.slice_kind == "label") & (table.slice == "enhancement")].iloc[0]
    assert row["tp"] == 0 and row["fn"] == row["support"] > 20 and bool(row["weak"])
    others = table[(table.slice_kind == "label") & (table.slice != "enhancement")]
    assert (others["fn"] == 0).all() and (others["fp"] == 0).all()
    kinds = table[table.slice_kind == "fact_kind"].set_index("slice")
    assert kinds.loc[["state", "ref", "dup", "contradiction"], "f1"].eq(1.0).all()


# ---------------------------------------------------------------- unit level: shapes, windows, reduce


def test_strict_answer_shape():
    fields = llm.TASKS["all"]
    good = {
        "id": "issue-1",
        "state": "OPEN",
        "labels": ["b", "a", "a"],
        "references": [3, 1, 3],
        "duplicate_targets": [],
        "scope_contradictions": ["mismatch"],
    }
    assert llm.check_answer(good, fields, "issue-1")["labels"] == ["a", "b"]
    for broken, why in [
        ({**good, "state": "open"}, "state"),
        ({**good, "references": [True]}, "references"),
        ({**good, "references": [0]}, "references"),
        ({**good, "scope_contradictions": ["oops"]}, "scope"),
        ({**good, "extra": 1}, "unexpected"),
        ({**good, "id": "issue-2"}, "id"),
    ]:
        with pytest.raises(ValueError, match=why):
            llm.check_answer(broken, fields, "issue-1")


def test_window_answers_missing_extra_and_fenced():
    prompt = llm.Prompt([], ["issue-1", "issue-2", "issue-3"], 100, window=True)
    entry = {"id": "issue-1", "labels": []}
    content = (
        "```json\n"
        + json.dumps({"answers": [entry, {"id": "issue-9", "labels": []}, {"id": "issue-2", "labels": "x"}]})
        + "\n```"
    )
    answers, problems = llm.parse_answers(prompt, content, ("labels",))
    assert list(answers) == ["issue-1"]
    assert problems == {"issue-2": "labels: expected an array of non-empty strings", "issue-3": "no answer for this record"}
    answers, problems = llm.parse_answers(prompt, "not json", ("labels",))
    assert answers == {} and set(problems) == set(prompt.ids)


def test_chunk_reduce_votes():
    fields = ("state", "labels")
    merged = llm.reduce_answers(
        [
            {"id": "i", "state": "OPEN", "labels": ["a", "b"]},
            {"id": "i", "state": "CLOSED", "labels": ["a"]},
            {"id": "i", "state": "CLOSED", "labels": ["a", "c"]},
        ],
        fields,
    )
    assert merged == {"id": "i", "state": "CLOSED", "labels": ["a"]}
    tie = llm.reduce_answers(
        [{"id": "i", "state": "OPEN", "labels": ["a"]}, {"id": "i", "state": "CLOSED", "labels": ["b"]}], fields
    )
    assert tie == {"id": "i", "state": "OPEN", "labels": ["a", "b"]}


def test_windows_cover_every_record(s8f_corpus):
    records = s8f_corpus.records[:100]
    config = llm.make_config({"base_url": "http://x/v1", "model": "m", "mode": "chunks", "chunk_records": 30, "overlap": 10})
    chunks = llm.chunk_prompts(records, config)
    assert [len(p.ids) for p in chunks] == [30, 30, 30, 30, 20]  # starts 0, 20, 40, 60, 80
    assert chunks[1].ids[:10] == chunks[0].ids[20:]
    config = llm.make_config({"base_url": "http://x/v1", "model": "m", "mode": "long", "context_tokens": 4096})
    windows, truncated = llm.long_prompts(records, config)
    assert [rid for p in windows for rid in p.ids] == [r["id"] for r in records]
    for p in windows:
        assert sum(llm.estimate_tokens(m["content"]) for m in p.messages) + p.max_tokens <= 4096 + 16 * len(p.ids)
    assert truncated == 0
    config = llm.make_config({"base_url": "http://x/v1", "model": "m", "mode": "long", "context_tokens": 1024})
    windows, truncated = llm.long_prompts(records, config)
    shown = {r["id"]: r for p in windows for r in prompt_records(p.messages[1]["content"])[1]}
    cut = [r for r in records if shown[r["id"]]["body"] != r["body"]]
    assert truncated == len(cut) > 0 and all(r["body"].startswith(shown[r["id"]]["body"]) for r in cut)


def test_retry_after_forms():
    assert llm.retry_after_seconds("3") == 3.0
    assert llm.retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert llm.retry_after_seconds("soon") is None and llm.retry_after_seconds(None) is None


def test_price_file(tmp_path):
    table = tmp_path / "prices.toml"
    table.write_text('[fake-model]\n"in" = 1.0\n"out" = 4.0\ncached = 0.5\n')
    config = llm.make_config({"base_url": "http://x/v1", "model": "fake-model", "price_file": str(table)})
    assert (config.price_in, config.price_out, config.price_cached) == (1.0, 4.0, 0.5)
    with pytest.raises(llm.ConfigError, match="no entry for model 'other'"):
        llm.make_config({"base_url": "http://x/v1", "model": "other", "price_file": str(table)})


def test_prompt_files_are_versioned_and_shipped():
    for name in llm.PROMPTS.values():
        assert name.rsplit(".v", 1)[1].isdigit()
        assert "{FIELDS}" in llm.prompt_text(name) and "{SHAPE}" in llm.prompt_text(name)
    assert os.path.basename(llm.__file__) == "llm.py"


UNDER_REPORTING = r"""
import json, sys, urllib.request
public, submission, base = sys.argv[1], sys.argv[2], sys.argv[3]
corpus = json.load(open(public))
first = corpus["records"][0]
record = {"id": first["id"], "title": first["title"], "body": first["body"]}
prompt = "FIELDS: state\nRECORDS (JSON):\n" + json.dumps([record])
body = json.dumps({"model": "fake-model", "messages": [{"role": "system", "content": "x"},
                                                       {"role": "user", "content": prompt}]}).encode()
for _ in range(2):  # two calls through the runner's proxy (urllib honours HTTP_PROXY) ...
    request = urllib.request.Request(base + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=30).read()
import hashlib
digest = hashlib.sha256(open(public, "rb").read()).hexdigest()
json.dump({"schema": "fak-microcontext-submission/1", "corpus_sha256": digest, "answers": []}, open(submission, "w"))
json.dump({"model_calls": 1, "input_tokens": 0, "output_tokens": 0}, open("counters.json", "w"))  # ... one reported
"""


def test_a_candidate_that_under_reports_its_calls_is_flagged(small, tmp_path):
    """The runner counts the calls and tokens on the wire itself; a candidate's own counters that
    say less are flagged in the manifest, not believed."""
    public, _ = small
    script = tmp_path / "liar.py"
    script.write_text(UNDER_REPORTING)
    with FakeOpenAI() as fake:
        host = fake.base_url.split("//", 1)[1].split("/", 1)[0]
        code = main(
            [
                "run",
                "liar",
                "--cmd",
                f"{{python}} {script} {{public}} {{submission}} {fake.base_url}",
                "--public",
                str(public),
                "--submission",
                str(tmp_path / "liar.json"),
                "--network",
                "record",
                "--allow-host",
                host,
                "--param",
                f"base_url={fake.base_url}",
            ]
        )
        served = len(fake.requests)
    manifest = json.loads(manifest_path(tmp_path / "liar.json").read_text())
    assert code == 0 and served == 2 and len(manifest["network"]["requests"]) == 2
    check = manifest["model_usage_check"]
    assert check["agree"] is False and check["runner"]["model_calls"] == 2 and check["candidate"]["model_calls"] == 1
    assert "model_calls: runner 2, candidate 1" in check["differences"]
    assert check["tokens_seen"] and check["runner"]["input_tokens"] > 0
