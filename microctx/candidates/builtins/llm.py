"""llm: a model-backed candidate over any OpenAI-compatible chat completions endpoint.

`microctx run llm --param base_url=URL --param model=NAME --param mode=MODE ...` asks a model for
the per-record facts (state, labels, references, duplicate targets, cue words) in a strict JSON
shape and computes the aggregates from its per-record answers (the two top-10 id lists from the
public timestamps, which are not facts to extract). Modes:
- `micro`: one call per record, only that record in context;
- `long`: records packed into windows of at most `context_tokens` (estimated as characters / 4)
  with room for the answers, one call per window; a record too long for a window alone is
  truncated (counted as `truncated_records`);
- `chunks`: windows of `chunk_records` records overlapping by `overlap`; a record answered in
  several windows is reduced by vote (state: the most frequent, ties to the earliest window;
  list facts: those given by at least half of its windows);
- `hybrid`: the exact frontier first (exact-sql's DuckDB queries); the model (one call per
  record) only for what that leaves unresolved: the fact kinds the task hides from the prompt
  (a public corpus always carries state and labels, OPEN or CLOSED, so with task=all that is
  nothing: zero calls, on s8f and on any valid corpus).

`task` restricts the model to fact kinds: `all`; `text` (state and labels), `state` or `labels`,
each with state, labels and closed_at hidden from the prompt (the honest counterpart of the
text-only baseline); `references`, `duplicates`, `cues`. Facts outside the task come from the
exact frontier, so a grade's slices isolate the model's kinds. With `retrieval_k` > 0 each
micro prompt also shows the k nearest train/tune records (BM25, microctx.candidates.builtins.retrieval)
with their public labels and state (retrieval-rerank).

`splits` (default `all`; e.g. `tune` for a tuning sweep) restricts the run to the records of those
splits: the others are neither sent nor submitted, so a run meant for tune cannot pass on test.

Robustness: `concurrency` calls at once; retries (`retries`, exponential `backoff` capped by
`max_backoff`) on 429, 5xx, timeouts and broken connections, honouring `Retry-After`; a per-call
deadline (`call_timeout`) and a total one (`deadline`, 0 = none). Output that is not the strict
shape fails the records it should have answered (counted as `failed_answers`), never the run.
With `cache=DIR` (an absolute path; in the sandbox, give the runner `--cache-dir DIR` instead and
the candidate finds it through MICROCTX_CANDIDATE_CACHE) every response is stored under the SHA-256 of its request
(model, messages, sampling settings; not the URL or the stream flag) as soon as it arrives, so
an interrupted or repeated run resumes with no call for what is cached; `DIR/calls.jsonl` logs
every attempt (time, digest, status, latency, time to first token, usage; never the key).

Cost: streaming (`stream`, default true, with `stream_options.include_usage`) measures the time
to first token; usage (prompt, completion and cached tokens) is read per call; dollars from
`price_in`/`price_out`/`price_cached` (per million tokens) or `price_file` (JSON or TOML: model ->
{in, out, cached}); written as integer `cost_microdollars`. All counters go to counters.json (see
`COUNTER_KEYS` in microctx.candidates.registry). `model_calls` counts HTTP requests sent (every
attempt), `retries` the attempts after a prompt's first, `cache_hits` the prompts answered from
the cache; tokens count only responses received in this run, so they equal what the server saw.

Secrets: `api_key_env` names the environment variable holding the key (the runner must pass it,
`microctx run --pass-env NAME`); the key is sent as a bearer token and never printed or stored.
"""

from __future__ import annotations

import os
import statistics
from collections import Counter

from microctx.candidates.builtins.llm_config import (
    CHARS_PER_TOKEN,
    DEFAULTS,
    FACT_FIELDS,
    HIDING_TASKS,
    MAX_RESPONSE_BYTES,
    MODES,
    OUTPUT_TOKENS_PER_RECORD,
    PROMPTS,
    RETRYABLE_STATUS,
    TASKS,
    Config,
    ConfigError,
    load_price_file,
    make_config,
)
from microctx.candidates.builtins.llm_endpoint import (
    CallFailed,
    CallResult,
    Endpoint,
    Stats,
    retry_after_seconds,
    run_prompts,
)
from microctx.candidates.builtins.llm_prompts import (
    Prompt,
    check_answer,
    chunk_prompts,
    estimate_tokens,
    long_prompts,
    micro_prompts,
    parse_answers,
    parse_content,
    prompt_text,
    prompt_version,
    reduce_answers,
    system_prompt,
    user_message,
    visible_record,
)
from microctx.contract.schemas import SUBMISSION_SCHEMA

# re-exported: the names other modules and tests import from here
__all__ = [
    "CHARS_PER_TOKEN",
    "CallFailed",
    "CallResult",
    "Config",
    "ConfigError",
    "DEFAULTS",
    "Endpoint",
    "FACT_FIELDS",
    "HIDING_TASKS",
    "MAX_RESPONSE_BYTES",
    "MODES",
    "OUTPUT_TOKENS_PER_RECORD",
    "PROMPTS",
    "Prompt",
    "RETRYABLE_STATUS",
    "Stats",
    "TASKS",
    "answer_corpus",
    "check_answer",
    "chunk_prompts",
    "cost_microdollars",
    "estimate_tokens",
    "load_price_file",
    "long_prompts",
    "make_config",
    "micro_prompts",
    "parse_answers",
    "parse_content",
    "prompt_text",
    "prompt_version",
    "reduce_answers",
    "retry_after_seconds",
    "run",
    "run_prompts",
    "system_prompt",
    "unresolved_records",
    "user_message",
    "visible_record",
]


# ---------------------------------------------------------------- the candidate


def unresolved_records(records: list[dict], config: Config) -> list[dict]:
    """Hybrid: the records the exact frontier cannot answer for the task: all of them when the
    task hides metadata from the prompt, else none (the public record states them)."""
    return list(records) if config.hides_metadata else []


def cost_microdollars(stats: Stats, config: Config) -> int:
    """Millionths of a dollar: tokens times dollars per million tokens (cached input at its own price)."""
    uncached = stats.input_tokens - stats.cached_tokens
    return round(uncached * config.price_in + stats.cached_tokens * config.price_cached + stats.output_tokens * config.price_out)


def _retrieval_examples(records: list[dict], corpus_records: list[dict], k: int) -> dict[str, list[dict]]:
    from microctx.candidates.builtins.retrieval import BM25Index

    pool = [r for r in corpus_records if r["split"] in ("train", "tune")]
    index = BM25Index().fit([r["title"] + "\n" + r["body"] for r in pool])
    found = index.nearest([r["title"] + "\n" + r["body"] for r in records], k + 1)
    examples = {}
    for record, hits in zip(records, found):
        shown = [pool[i] for i, _ in hits if pool[i]["id"] != record["id"]][:k]
        examples[record["id"]] = [{"title": r["title"], "state": r["state"], "labels": list(r["labels"] or [])} for r in shown]
    return examples


def _build_prompts(to_model: list[dict], corpus_records: list[dict], config: Config) -> tuple[list[Prompt], int]:
    """The mode's prompts for the records sent to the model, and how many records were truncated."""
    if config.mode in ("micro", "hybrid"):
        examples = _retrieval_examples(to_model, corpus_records, config.retrieval_k) if config.retrieval_k and to_model else None
        return micro_prompts(to_model, config, examples), 0
    if config.mode == "long":
        return long_prompts(to_model, config)
    return chunk_prompts(to_model, config), 0


def _call_endpoint(
    prompts: list[Prompt], config: Config, api_key: str | None, stats: Stats, endpoint_factory
) -> list[CallResult]:
    """Every prompt's result (none when there is no prompt: no endpoint is opened)."""
    if not prompts:
        return []
    endpoint = endpoint_factory(config, api_key, stats)
    try:
        return run_prompts(prompts, endpoint, config.concurrency)
    finally:
        endpoint.close()


def _collect_answers(prompts: list[Prompt], results: list[CallResult], config: Config) -> tuple[dict[str, dict], dict[str, str]]:
    """(the model's answer per record id, reduced over its windows; the first problem per record id)."""
    collected: dict[str, list[dict]] = {}
    problems: dict[str, str] = {}
    for prompt, result in zip(prompts, results):
        if result.content is None:
            for rid in prompt.ids:
                problems.setdefault(rid, f"call failed: {result.error}")
            continue
        parsed, bad = parse_answers(prompt, result.content, config.fields)
        for rid, answer in parsed.items():
            collected.setdefault(rid, []).append(answer)
        for rid, why in bad.items():
            problems.setdefault(rid, why)
    return {rid: reduce_answers(found, config.fields) for rid, found in collected.items()}, problems


def _merge_answers(
    records: list[dict], exact_by_id: dict, asked: set, model_answers: dict[str, dict], config: Config
) -> list[dict]:
    """Each record's exact answer with the task's kinds taken from the model for the records it was asked."""
    answers = []
    for record in records:
        answer = dict(exact_by_id[record["id"]])
        if record["id"] in asked:
            if record["id"] in model_answers:
                answer.update({k: model_answers[record["id"]][k] for k in config.fields})
            elif config.fields == FACT_FIELDS:
                continue  # no answer at all: the record is left out (its gold facts count as missed)
            else:  # the task's kinds are left out (missed), the rest stays exact
                for key in config.fields:
                    answer.pop(key)
        answers.append(answer)
    return answers


def _aggregates(answers: list[dict], records: list[dict]) -> dict:
    from microctx.candidates.devkit import top_ids

    return {
        "state_counts": dict(sorted(Counter(a["state"] for a in answers if "state" in a).items())),
        "label_counts": dict(sorted(Counter(label for a in answers for label in a.get("labels", [])).items())),
        "newest_issue_ids": top_ids(records, "created_at"),
        "most_recently_updated_issue_ids": top_ids(records, "updated_at"),
    }


def _counters(stats: Stats, config: Config, *, statements, failed: int, model_records: int, prompts: int, truncated: int) -> dict:
    """The run's counters (those without a value left out)."""
    counters = {
        "model_calls": stats.requests,
        "tool_calls": statements,
        "input_tokens": stats.input_tokens,
        "output_tokens": stats.output_tokens,
        "cached_tokens": stats.cached_tokens,
        "cache_hits": stats.cache_hits,
        "retries": stats.retries,
        "failed_calls": stats.failed_calls,
        "failed_answers": failed,
        "calls_without_usage": stats.calls_without_usage,
        "cost_microdollars": cost_microdollars(stats, config),
        "ttft_ms_median": round(statistics.median(stats.ttft_ms)) if stats.ttft_ms else None,
        "ttft_ms_max": max(stats.ttft_ms) if stats.ttft_ms else None,
        "latency_ms_median": round(statistics.median(stats.latency_ms)) if stats.latency_ms else None,
        "retry_wait_ms": stats.retry_wait_ms,
        "model_records": model_records,
        "prompts": prompts,
        "truncated_records": truncated,
        "prompt_version": int(prompt_version(config).rsplit(".v", 1)[1]),
    }
    return {k: v for k, v in counters.items() if v is not None}


def answer_corpus(public_path: str, config: Config, api_key: str | None, *, endpoint_factory=Endpoint):
    """(submission, counters, notes) for a public corpus."""
    from microctx.candidates.builtins.exact_sql import answer_corpus as exact_answers
    from microctx.corpus.public import load_corpus

    corpus = load_corpus(public_path)
    exact, statements = exact_answers(public_path)
    exact_by_id = {a["id"]: a for a in exact["answers"]}
    records = [r for r in corpus.records if r["split"] in config.splits]  # others are left out entirely
    to_model = unresolved_records(records, config) if config.mode == "hybrid" else list(records)
    prompts, truncated = _build_prompts(to_model, corpus.records, config)

    stats = Stats()
    results = _call_endpoint(prompts, config, api_key, stats, endpoint_factory)
    model_answers, problems = _collect_answers(prompts, results, config)
    failed = sorted({r["id"] for r in to_model} - set(model_answers))

    answers = _merge_answers(records, exact_by_id, {r["id"] for r in to_model}, model_answers, config)
    aggregates = _aggregates(answers, records)
    submission = {"schema": SUBMISSION_SCHEMA, "corpus_sha256": corpus.sha256, "answers": answers, "aggregates": aggregates}
    counters = _counters(
        stats,
        config,
        statements=statements,
        failed=len(failed),
        model_records=len(to_model),
        prompts=len(prompts),
        truncated=truncated,
    )
    notes = [f"{rid}: {problems.get(rid, 'no answer')}" for rid in failed]
    return submission, counters, notes


def run(public_path: str, output_path: str, *, devkit_path: str | None = None, params: dict | None = None) -> dict:
    """Candidate entry point (see microctx.candidates.registry): write the submission, return the counters."""
    from microctx._io.atomic import atomic_write
    from microctx._version import __version__
    from microctx.contract.canonical import dumps

    config = make_config(params)
    api_key = None
    if config.api_key_env:
        api_key = os.environ.get(config.api_key_env)
        if not api_key:
            raise ConfigError(
                f"environment variable {config.api_key_env} (api_key_env) is not set in the candidate's "
                f"environment; pass it with `microctx run --pass-env {config.api_key_env}`"
            )
    submission, counters, notes = answer_corpus(public_path, config, api_key)
    atomic_write(output_path, dumps(submission))
    for note in notes[:20]:
        print(f"llm: failed answer {note}")
    if len(notes) > 20:
        print(f"llm: ... {len(notes) - 20} more failed answers")
    print(
        f"llm: mode {config.mode}, task {config.task}, prompt {prompt_version(config)}: "
        + ", ".join(f"{k} {v}" for k, v in counters.items())
    )
    counters["version"] = f"{__version__}+prompt.{prompt_version(config)}"
    return counters
