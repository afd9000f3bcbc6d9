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

import contextlib
import hashlib
import math
import os
import statistics
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import orjson

from microctx.candidates.registry import BUILTINS
from microctx.candidates.sandbox import CACHE_ENV
from microctx.candidates.usage import read_usage
from microctx.contract.patterns import CUE_WORDS
from microctx.contract.schemas import SUBMISSION_SCHEMA

MODES = ("micro", "long", "chunks", "hybrid")
FACT_FIELDS = ("state", "labels", "references", "duplicate_targets", "scope_contradictions")
TASKS = {
    "all": FACT_FIELDS,
    "text": ("state", "labels"),
    "state": ("state",),
    "labels": ("labels",),
    "references": ("references",),
    "duplicates": ("duplicate_targets",),
    "cues": ("scope_contradictions",),
}
HIDING_TASKS = ("text", "state", "labels")  # state, labels and closed_at are not shown to the model
_SHAPES = {
    "state": '"OPEN" | "CLOSED"',
    "labels": "[string, ...]",
    "references": "[integer, ...]",
    "duplicate_targets": "[integer, ...]",
    "scope_contradictions": "[string, ...]",
}
PROMPTS = {"micro": "micro.v1", "window": "window.v1"}
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
CHARS_PER_TOKEN = 4  # the packing estimate for long/chunks windows (a real tokenizer is endpoint-specific)
OUTPUT_TOKENS_PER_RECORD = 96
MAX_RESPONSE_BYTES = 16 << 20  # a response larger than this is refused (a runaway or hostile server)

DEFAULTS = BUILTINS["llm"].params  # written once, in the registry


class ConfigError(ValueError):
    """A parameter is unusable; the message names it."""


@dataclass(frozen=True)
class Config:
    base_url: str
    model: str
    mode: str
    task: str
    context_tokens: int
    chunk_records: int
    overlap: int
    concurrency: int
    price_in: float
    price_out: float
    price_cached: float
    api_key_env: str
    call_timeout: float
    deadline: float
    retries: int
    backoff: float
    max_backoff: float
    max_tokens: int
    temperature: float
    stream: bool
    json_mode: bool
    cache: str
    retrieval_k: int
    splits: tuple[str, ...] = ("train", "tune", "test")

    @property
    def fields(self) -> tuple[str, ...]:
        return TASKS[self.task]

    @property
    def hides_metadata(self) -> bool:
        return self.task in HIDING_TASKS


def _number(params: dict, key: str, kind, minimum: float) -> float:
    value = params[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not float(value).is_integer()):
        raise ConfigError(f"parameter {key}: expected {'an integer' if kind is int else 'a number'}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"parameter {key}: expected at least {minimum}, got {value!r}")
    return kind(value)


def _integer(params: dict, key: str, minimum: int) -> int:
    return int(_number(params, key, int, minimum))


def _absolute(params: dict, key: str) -> str:
    value = params[key]
    if not isinstance(value, str):
        raise ConfigError(f"parameter {key}: expected a path, got {value!r}")
    if value and not os.path.isabs(value):
        raise ConfigError(f"parameter {key}: give an absolute path (the candidate runs in its own empty folder), got {value!r}")
    return value


def load_price_file(path: str, model: str) -> dict:
    """{in, out, cached} dollars per million tokens for `model` from a JSON or TOML price table."""
    data = Path(path).read_bytes()
    if path.endswith(".toml"):
        import tomllib

        table = tomllib.loads(data.decode())
    else:
        table = orjson.loads(data)
    if not isinstance(table, dict) or not isinstance(table.get(model), dict):
        raise ConfigError(f"price_file {path}: no entry for model {model!r} (expected {{model: {{in, out, cached}}}})")
    entry = table[model]
    for key in ("in", "out"):
        if not isinstance(entry.get(key), (int, float)) or isinstance(entry.get(key), bool) or entry[key] < 0:
            raise ConfigError(f"price_file {path}: model {model!r}: {key!r} must be a non-negative number")
    return entry


def _with_gateway(p: dict) -> dict:
    """No base_url given: the runner's model gateway, when the run has one (MICROCTX_MODEL_ENDPOINT)."""
    return {**p, "base_url": p["base_url"] or os.environ.get("MICROCTX_MODEL_ENDPOINT", "")}


def make_config(params: dict | None) -> Config:
    """Check the parameters (defaults filled in) and return the run's Config."""
    p = _with_gateway({**DEFAULTS, **(params or {})})
    unknown = sorted(set(p) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown parameter {unknown[0]!r}")
    if not isinstance(p["base_url"], str) or not p["base_url"].startswith(("http://", "https://")):
        raise ConfigError("parameter base_url: expected the endpoint's http(s) URL, e.g. http://127.0.0.1:8000/v1")
    if p["mode"] not in MODES:
        raise ConfigError(f"parameter mode: expected one of {', '.join(MODES)}, got {p['mode']!r}")
    if p["task"] not in TASKS:
        raise ConfigError(f"parameter task: expected one of {', '.join(TASKS)}, got {p['task']!r}")
    if not isinstance(p["model"], str) or not p["model"]:
        raise ConfigError("parameter model: expected the model's name as the endpoint knows it")
    if not isinstance(p["api_key_env"], str) or (p["api_key_env"] and not p["api_key_env"].replace("_", "").isalnum()):
        raise ConfigError("parameter api_key_env: expected the NAME of an environment variable (never the key itself)")
    prices = {"in": _number(p, "price_in", float, 0), "out": _number(p, "price_out", float, 0)}
    prices["cached"] = prices["in"] if p["price_cached"] is None else _number(p, "price_cached", float, 0)
    price_file = _absolute(p, "price_file")
    if price_file:
        entry = load_price_file(price_file, p["model"])
        prices = {"in": float(entry["in"]), "out": float(entry["out"]), "cached": float(entry.get("cached", entry["in"]))}
    for key in ("stream", "json_mode"):
        if not isinstance(p[key], bool):
            raise ConfigError(f"parameter {key}: expected true or false, got {p[key]!r}")
    splits = (
        ("train", "tune", "test") if p["splits"] == "all" else tuple(x.strip() for x in str(p["splits"]).split(",") if x.strip())
    )
    if not splits or not set(splits) <= {"train", "tune", "test"}:
        raise ConfigError(f"parameter splits: expected all or a comma-separated list of train, tune, test, got {p['splits']!r}")
    chunk_records = _integer(p, "chunk_records", 1)
    overlap = _integer(p, "overlap", 0)
    if overlap >= chunk_records:
        raise ConfigError(f"parameter overlap: must be smaller than chunk_records ({chunk_records}), got {overlap}")
    return Config(
        base_url=p["base_url"].rstrip("/"),
        model=p["model"],
        mode=p["mode"],
        task=p["task"],
        context_tokens=_integer(p, "context_tokens", 256),
        chunk_records=chunk_records,
        overlap=overlap,
        concurrency=_integer(p, "concurrency", 1),
        price_in=prices["in"],
        price_out=prices["out"],
        price_cached=prices["cached"],
        api_key_env=p["api_key_env"],
        call_timeout=_number(p, "call_timeout", float, 0.001),
        deadline=_number(p, "deadline", float, 0),
        retries=_integer(p, "retries", 0),
        backoff=_number(p, "backoff", float, 0),
        max_backoff=_number(p, "max_backoff", float, 0),
        max_tokens=_integer(p, "max_tokens", 0),
        temperature=_number(p, "temperature", float, 0),
        stream=p["stream"],
        json_mode=p["json_mode"],
        cache=_absolute(p, "cache") or os.environ.get(CACHE_ENV, ""),
        retrieval_k=_integer(p, "retrieval_k", 0),
        splits=splits,
    )


# ---------------------------------------------------------------- prompts


def prompt_text(name: str) -> str:
    """A versioned prompt file of the package (`prompts/<name>.txt`)."""
    return (resources.files("microctx.candidates.builtins") / "prompts" / f"{name}.txt").read_text(encoding="utf-8")


def prompt_version(config: Config) -> str:
    """The prompt file the run's calls use (mode micro and hybrid: micro.vN; long, chunks: window.vN)."""
    return PROMPTS["micro" if config.mode in ("micro", "hybrid") else "window"]


def system_prompt(name: str, fields: tuple[str, ...]) -> str:
    shape = "{" + ", ".join(['"id": string'] + [f'"{f}": {_SHAPES[f]}' for f in fields]) + "}"
    return prompt_text(name).replace("{FIELDS}", ", ".join(f'"{f}"' for f in fields)).replace("{SHAPE}", shape)


def visible_record(record: dict, hide_metadata: bool, max_chars: int | None = None) -> dict:
    """What the model is shown of a record: id, number, title, body (cut to `max_chars`), and
    state and labels unless the task hides them."""
    body = record["body"] if max_chars is None else record["body"][:max_chars]
    shown = {"id": record["id"], "number": record["number"], "title": record["title"], "body": body}
    if not hide_metadata:
        shown.update(state=record["state"], labels=list(record["labels"] or []))
    return shown


def user_message(records: list[dict], fields: tuple[str, ...], examples: list[dict] | None = None) -> str:
    """The data part of a prompt: the fields asked for, optional similar records, the records (JSON)."""
    lines = [f"FIELDS: {', '.join(fields)}"]
    if examples:
        lines += ["SIMILAR RECORDS (JSON):", orjson.dumps(examples).decode()]
    lines += ["RECORDS (JSON):", orjson.dumps(records).decode()]
    return "\n".join(lines)


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass
class Prompt:
    """One request to make: its messages, the ids of the records it answers, its output budget."""

    messages: list[dict]
    ids: list[str]
    max_tokens: int
    window: bool

    def request(self, config: Config) -> dict:
        body: dict = {
            "model": config.model,
            "messages": self.messages,
            "temperature": config.temperature,
            "max_tokens": self.max_tokens,
        }
        if config.json_mode:
            body["response_format"] = {"type": "json_object"}
        return body

    def digest(self, config: Config) -> str:
        """The cache key: SHA-256 of the request without the endpoint URL or the stream flag."""
        return hashlib.sha256(orjson.dumps(self.request(config), option=orjson.OPT_SORT_KEYS)).hexdigest()


def micro_prompts(records: list[dict], config: Config, examples: dict[str, list[dict]] | None = None) -> list[Prompt]:
    system = system_prompt(PROMPTS["micro"], config.fields)
    budget = config.max_tokens or OUTPUT_TOKENS_PER_RECORD * 2
    return [
        Prompt(
            [
                {"role": "system", "content": system},
                {
                    "role": "user",
                    "content": user_message(
                        [visible_record(r, config.hides_metadata)], config.fields, (examples or {}).get(r["id"])
                    ),
                },
            ],
            [r["id"]],
            budget,
            window=False,
        )
        for r in records
    ]


def _window_prompt(shown: list[dict], config: Config, system: str) -> Prompt:
    budget = config.max_tokens or OUTPUT_TOKENS_PER_RECORD * len(shown)
    return Prompt(
        [{"role": "system", "content": system}, {"role": "user", "content": user_message(shown, config.fields)}],
        [r["id"] for r in shown],
        budget,
        window=True,
    )


def long_prompts(records: list[dict], config: Config) -> tuple[list[Prompt], int]:
    """Records packed greedily, in corpus order, into windows that fit `context_tokens` (estimate);
    returns the prompts and how many records had to be truncated to fit a window alone."""
    system = system_prompt(PROMPTS["window"], config.fields)
    fixed = estimate_tokens(system) + estimate_tokens(user_message([], config.fields)) + 16
    prompts: list[Prompt] = []
    window: list[dict] = []
    used, truncated = fixed, 0
    for record in records:
        shown = visible_record(record, config.hides_metadata)
        cost = estimate_tokens(orjson.dumps(shown).decode()) + OUTPUT_TOKENS_PER_RECORD
        if window and used + cost > config.context_tokens:
            prompts.append(_window_prompt(window, config, system))
            window, used = [], fixed
        if fixed + cost > config.context_tokens:  # too long even alone: cut the body to what fits
            room = max(
                0,
                (config.context_tokens - fixed - OUTPUT_TOKENS_PER_RECORD) * CHARS_PER_TOKEN
                - len(orjson.dumps(visible_record(record, config.hides_metadata, 0))),
            )
            shown = visible_record(record, config.hides_metadata, room)
            cost = config.context_tokens - fixed
            truncated += 1
        window.append(shown)
        used += cost
    if window:
        prompts.append(_window_prompt(window, config, system))
    return prompts, truncated


def chunk_prompts(records: list[dict], config: Config) -> list[Prompt]:
    """Windows of `chunk_records` records, each starting `chunk_records - overlap` after the last."""
    system = system_prompt(PROMPTS["window"], config.fields)
    step = config.chunk_records - config.overlap
    prompts = []
    for start in range(0, len(records), step):
        chunk = records[start : start + config.chunk_records]
        prompts.append(_window_prompt([visible_record(r, config.hides_metadata) for r in chunk], config, system))
        if start + config.chunk_records >= len(records):
            break
    return prompts


# ---------------------------------------------------------------- strict answers


def _int_list(value, key: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**7 for v in value):
        raise ValueError(f"{key}: expected an array of integers 1..9999999")
    return sorted(set(value))


def check_answer(entry: object, fields: tuple[str, ...], expected_id: str | None = None) -> dict:
    """One record's answer in the strict shape, normalised (lists sorted, unique); ValueError says why not."""
    if not isinstance(entry, dict):
        raise ValueError("expected a JSON object")
    keys = {"id", *fields}
    if set(entry) != keys:
        missing, extra = sorted(keys - set(entry)), sorted(set(entry) - keys)
        raise ValueError(f"keys: missing {missing}, unexpected {extra}")
    if not isinstance(entry["id"], str) or (expected_id is not None and entry["id"] != expected_id):
        raise ValueError(f"id: expected {expected_id!r}, got {entry['id']!r}")
    answer: dict = {"id": entry["id"]}
    for key in fields:
        value = entry[key]
        if key == "state":
            if value not in ("OPEN", "CLOSED"):
                raise ValueError(f"state: expected OPEN or CLOSED, got {value!r}")
            answer[key] = value
        elif key == "labels":
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ValueError("labels: expected an array of non-empty strings")
            answer[key] = sorted(set(value))
        elif key == "scope_contradictions":
            if not isinstance(value, list) or not all(v in CUE_WORDS for v in value):
                raise ValueError(f"scope_contradictions: expected an array of {', '.join(CUE_WORDS)}")
            answer[key] = sorted(set(value))
        else:
            answer[key] = _int_list(value, key)
    return answer


def parse_content(content: str) -> object:
    """The model's message as JSON (one surrounding ``` fence is tolerated); ValueError if not JSON."""
    text = content.strip()
    if text.startswith("```") and text.endswith("```"):
        text = text[3:-3]
        text = text[4:] if text.startswith("json") else text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None


def parse_answers(prompt: Prompt, content: str, fields: tuple[str, ...]) -> tuple[dict[str, dict], dict[str, str]]:
    """(answers by id, problems by id) for the records a prompt asked about."""
    problems: dict[str, str] = {}
    answers: dict[str, dict] = {}
    try:
        document = parse_content(content)
        if prompt.window:
            if not isinstance(document, dict) or set(document) != {"answers"} or not isinstance(document["answers"], list):
                raise ValueError('expected {"answers": [...]}')
            entries = document["answers"]
        else:
            entries = [document]
    except ValueError as exc:
        return {}, {rid: str(exc) for rid in prompt.ids}
    wanted = set(prompt.ids)
    for entry in entries:
        rid = entry.get("id") if isinstance(entry, dict) else None
        if rid not in wanted or rid in answers:
            continue  # an answer for a record not asked about (or a repeat) is ignored
        try:
            answers[rid] = check_answer(entry, fields, rid)
        except ValueError as exc:
            problems[rid] = str(exc)
    if not prompt.window and not answers and not problems:
        try:
            check_answer(entries[0], fields, prompt.ids[0])
        except ValueError as exc:
            problems[prompt.ids[0]] = str(exc)
    for rid in prompt.ids:
        if rid not in answers and rid not in problems:
            problems[rid] = "no answer for this record"
    return answers, problems


def reduce_answers(answers: list[dict], fields: tuple[str, ...]) -> dict:
    """Several answers for one record (overlapping chunks) made one: state by majority (ties to
    the first), list facts kept when at least half of the answers give them."""
    if len(answers) == 1:
        return answers[0]
    merged: dict = {"id": answers[0]["id"]}
    for key in fields:
        if key == "state":
            counts = Counter(a["state"] for a in answers)
            best = max(counts.values())
            merged[key] = next(a["state"] for a in answers if counts[a["state"]] == best)
        else:
            counts = Counter(v for a in answers for v in a[key])
            merged[key] = sorted(v for v, n in counts.items() if 2 * n >= len(answers))
    return merged


# ---------------------------------------------------------------- calling the endpoint


@dataclass
class CallResult:
    content: str | None = None
    error: str = ""
    from_cache: bool = False


@dataclass
class Stats:
    """What the calls cost; updated under `lock` by the worker threads."""

    requests: int = 0
    retries: int = 0
    cache_hits: int = 0
    failed_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    calls_without_usage: int = 0
    retry_wait_ms: int = 0
    ttft_ms: list = field(default_factory=list)
    latency_ms: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class CallFailed(Exception):
    def __init__(self, message: str, retryable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header as seconds from now (the HTTP layer's one rule: delta-seconds or an HTTP
    date); None if absent or bad."""
    from microctx._io.http import retry_after

    return retry_after(value)


class Endpoint:
    """Chat completions over httpx: retries, deadlines, streaming, usage, a response cache."""

    def __init__(self, config: Config, api_key: str | None, stats: Stats, clock=time.monotonic, sleep=time.sleep):
        from microctx._io.http import Bounds, make_client

        self.config = config
        self.stats = stats
        self.clock, self.sleep = clock, sleep
        self.started = clock()
        headers = {"Accept": "text/event-stream" if config.stream else "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # trust_env: a recording proxy given through HTTP(S)_PROXY (the sandbox's record mode) is used
        self.client = make_client(
            base_url=config.base_url,
            headers=headers,
            trust_env=True,
            bounds=Bounds(config.call_timeout, config.call_timeout, MAX_RESPONSE_BYTES),
            max_connections=config.concurrency,
            follow_redirects=False,
        )
        self.cache = Path(config.cache) if config.cache else None
        self._log_lock = threading.Lock()
        if self.cache is not None:
            self.cache.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        self.client.close()

    def _remaining(self) -> float | None:
        if not self.config.deadline:
            return None
        return self.config.deadline - (self.clock() - self.started)

    def _log(self, entry: dict) -> None:
        if self.cache is None:
            return
        line = orjson.dumps({"at": time.time(), **entry}) + b"\n"
        with self._log_lock, open(self.cache / "calls.jsonl", "ab") as handle:
            handle.write(line)

    def _cached(self, digest: str) -> str | None:
        if self.cache is None:
            return None
        path = self.cache / f"{digest}.json"
        try:
            stored = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return stored.get("content") if isinstance(stored, dict) and isinstance(stored.get("content"), str) else None

    def _store(self, digest: str, content: str, usage: dict) -> None:
        if self.cache is None:
            return
        from microctx._io.atomic import atomic_write

        atomic_write(
            self.cache / f"{digest}.json",
            orjson.dumps({"digest": digest, "model": self.config.model, "content": content, "usage": usage}),
        )

    def complete(self, prompt: Prompt) -> CallResult:
        """The prompt's answer text: from the cache, or from the endpoint with retries."""
        digest = prompt.digest(self.config)
        content = self._cached(digest)
        if content is not None:
            with self.stats.lock:
                self.stats.cache_hits += 1
            return CallResult(content, from_cache=True)
        body = prompt.request(self.config)
        if self.config.stream:
            body = {**body, "stream": True, "stream_options": {"include_usage": True}}
        try:
            content, usage, ttft, latency, attempt = self._call(body, digest)
        except CallFailed as exc:
            with self.stats.lock:
                self.stats.failed_calls += 1
            return CallResult(None, str(exc) or "no attempt was made")
        with self.stats.lock:
            self.stats.latency_ms.append(latency)
            if ttft is not None:
                self.stats.ttft_ms.append(ttft)
            if usage:
                self.stats.input_tokens += usage["prompt_tokens"]
                self.stats.output_tokens += usage["completion_tokens"]
                self.stats.cached_tokens += usage["cached_tokens"]
            else:
                self.stats.calls_without_usage += 1
        self._log(
            {
                "digest": digest,
                "attempt": attempt,
                "ok": True,
                "ms": latency,
                "ttft_ms": ttft,
                "usage": usage,
                "records": len(prompt.ids),
            }
        )
        self._store(digest, content, usage)
        return CallResult(content)

    def _call(self, body: dict, digest: str) -> tuple[str, dict, int | None, int, int]:
        """(content, usage, ttft ms, latency ms, attempt index) of the first attempt that answers,
        retried through the HTTP layer (`retrying`); CallFailed when none does."""
        from microctx._io.http import Attempts, Budget, backoff, retrying

        counts = Attempts()

        def attempt() -> tuple[str, dict, int | None, int, int]:
            remaining = self._remaining()
            if remaining is not None and remaining <= 0:
                raise CallFailed("the total deadline passed", False)
            timeout = self.config.call_timeout if remaining is None else min(self.config.call_timeout, remaining)
            with self.stats.lock:
                self.stats.requests += 1
                self.stats.retries += counts.attempts > 1
            start = self.clock()
            try:
                content, usage, ttft = self._send(body, timeout)
            except CallFailed as exc:
                ms = round((self.clock() - start) * 1000)
                self._log({"digest": digest, "attempt": counts.attempts - 1, "ok": False, "error": str(exc), "ms": ms})
                raise
            return content, usage, ttft, round((self.clock() - start) * 1000), counts.attempts - 1

        def decide(result: object, error: BaseException | None, number: int) -> float | None:
            if not isinstance(error, CallFailed) or not error.retryable or number > self.config.retries:
                return None
            wait = error.retry_after if error.retry_after is not None else backoff(number - 1, self.config.backoff, math.inf)
            wait = min(wait, self.config.max_backoff)
            remaining = self._remaining()
            if remaining is not None and wait >= remaining:
                raise CallFailed(f"{error}; no time left for a retry before the total deadline", False)
            with self.stats.lock:
                self.stats.retry_wait_ms += round(wait * 1000)
            return wait

        return retrying(attempt, decide, budget=Budget(sleep=self.sleep), counts=counts)

    def _send(self, body: dict, timeout: float) -> tuple[str, dict, int | None]:
        """One HTTP attempt through the HTTP layer: (content, usage, ms to first token or None);
        CallFailed otherwise."""
        from microctx._io.http import Bounds, Budget, HttpFailure, open_stream

        bounds = Bounds(timeout, timeout, MAX_RESPONSE_BYTES)
        start = self.clock()
        try:
            with open_stream(self.client, "POST", "/chat/completions", bounds=bounds, budget=Budget(timeout), json=body) as got:
                if got.status != 200:
                    with contextlib.suppress(HttpFailure):
                        got.read()  # within the cap: the connection can be used again
                    retryable = got.status in RETRYABLE_STATUS or got.status >= 500
                    raise CallFailed(f"HTTP {got.status}", retryable, retry_after_seconds(got.headers.get("retry-after")))
                if self.config.stream:
                    return self._read_stream(got.lines(), start)
                data = got.read()
        except HttpFailure as exc:
            raise _call_failure(exc, timeout) from None
        try:
            envelope = orjson.loads(data)
            content = envelope["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError) as exc:
            raise CallFailed(f"not a chat completion response: {type(exc).__name__}", False) from None
        return content, _usage(envelope.get("usage")), None

    def _read_stream(self, lines, start: float) -> tuple[str, dict, int | None]:
        """The content, usage and ms to first token of a streamed answer (the layer's SSE reader)."""
        from microctx._io.http import SSE_DONE, sse_data

        parts: list[str] = []
        usage: dict = {}
        ttft = None
        done = False
        for payload in sse_data(lines):
            if payload == SSE_DONE:
                done = True
                break
            try:
                chunk = orjson.loads(payload)
            except orjson.JSONDecodeError:
                raise CallFailed("a stream event is not JSON", False) from None
            if not isinstance(chunk, dict):
                raise CallFailed("a stream event is not a JSON object", False)
            if chunk.get("usage"):
                usage = _usage(chunk["usage"])
            for choice in chunk.get("choices") or []:
                delta = (choice.get("delta") or {}).get("content") if isinstance(choice, dict) else None
                if isinstance(delta, str) and delta:
                    if ttft is None:
                        ttft = round((self.clock() - start) * 1000)
                    parts.append(delta)
        if not done:
            raise CallFailed("the stream ended without [DONE]", True)
        return "".join(parts), usage, ttft


def _call_failure(exc, timeout: float) -> CallFailed:
    """The HTTP layer's failure as this client's CallFailed (its message, whether to retry)."""
    if exc.kind == "timeout":
        return CallFailed(f"timed out (call deadline {timeout:g} s)", True)
    if exc.kind == "deadline":
        return CallFailed(f"the call took longer than {timeout:g} s", True)
    if exc.kind == "too_large":
        return CallFailed(f"the response is larger than {MAX_RESPONSE_BYTES} bytes", False)
    if exc.kind in ("connect", "network"):
        return CallFailed(f"connection failed: {exc.cause or exc.kind}", True)
    return CallFailed(str(exc), False)


def _usage(raw: object) -> dict:
    """prompt, completion and cached tokens of a response's `usage` ({} when absent or unusable)."""
    return read_usage(raw) or {}


def run_prompts(prompts: list[Prompt], endpoint: Endpoint, concurrency: int) -> list[CallResult]:
    """Every prompt's result, in order, with at most `concurrency` calls at once."""
    if concurrency <= 1 or len(prompts) <= 1:
        return [endpoint.complete(p) for p in prompts]
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(endpoint.complete, prompts))


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


def answer_corpus(public_path: str, config: Config, api_key: str | None, *, endpoint_factory=Endpoint):
    """(submission, counters, notes) for a public corpus."""
    from microctx.candidates.builtins.exact_sql import answer_corpus as exact_answers
    from microctx.candidates.devkit import top_ids
    from microctx.corpus.public import load_corpus

    corpus = load_corpus(public_path)
    exact, statements = exact_answers(public_path)
    exact_by_id = {a["id"]: a for a in exact["answers"]}
    records = [r for r in corpus.records if r["split"] in config.splits]  # others are left out entirely
    to_model = unresolved_records(records, config) if config.mode == "hybrid" else list(records)
    truncated = 0
    if config.mode in ("micro", "hybrid"):
        examples = _retrieval_examples(to_model, corpus.records, config.retrieval_k) if config.retrieval_k and to_model else None
        prompts = micro_prompts(to_model, config, examples)
    elif config.mode == "long":
        prompts, truncated = long_prompts(to_model, config)
    else:
        prompts = chunk_prompts(to_model, config)

    stats = Stats()
    results: list[CallResult] = []
    if prompts:
        endpoint = endpoint_factory(config, api_key, stats)
        try:
            results = run_prompts(prompts, endpoint, config.concurrency)
        finally:
            endpoint.close()
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
    model_answers = {rid: reduce_answers(found, config.fields) for rid, found in collected.items()}
    failed = sorted({r["id"] for r in to_model} - set(model_answers))

    asked = {r["id"] for r in to_model}
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
    aggregates = {
        "state_counts": dict(sorted(Counter(a["state"] for a in answers if "state" in a).items())),
        "label_counts": dict(sorted(Counter(label for a in answers for label in a.get("labels", [])).items())),
        "newest_issue_ids": top_ids(records, "created_at"),
        "most_recently_updated_issue_ids": top_ids(records, "updated_at"),
    }
    submission = {"schema": SUBMISSION_SCHEMA, "corpus_sha256": corpus.sha256, "answers": answers, "aggregates": aggregates}
    counters = {
        "model_calls": stats.requests,
        "tool_calls": statements,
        "input_tokens": stats.input_tokens,
        "output_tokens": stats.output_tokens,
        "cached_tokens": stats.cached_tokens,
        "cache_hits": stats.cache_hits,
        "retries": stats.retries,
        "failed_calls": stats.failed_calls,
        "failed_answers": len(failed),
        "calls_without_usage": stats.calls_without_usage,
        "cost_microdollars": cost_microdollars(stats, config),
        "ttft_ms_median": round(statistics.median(stats.ttft_ms)) if stats.ttft_ms else None,
        "ttft_ms_max": max(stats.ttft_ms) if stats.ttft_ms else None,
        "latency_ms_median": round(statistics.median(stats.latency_ms)) if stats.latency_ms else None,
        "retry_wait_ms": stats.retry_wait_ms,
        "model_records": len(to_model),
        "prompts": len(prompts),
        "truncated_records": truncated,
        "prompt_version": int(prompt_version(config).rsplit(".v", 1)[1]),
    }
    notes = [f"{rid}: {problems.get(rid, 'no answer')}" for rid in failed]
    return submission, {k: v for k, v in counters.items() if v is not None}, notes


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
