"""llm's parameters: the constants, the Config and its parsing from the run's params (see microctx.candidates.builtins.llm)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import orjson

from microctx.candidates.builtins.params import LlmParams, defaults
from microctx.candidates.sandbox import CACHE_ENV

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
PROMPTS = {"micro": "micro.v1", "window": "window.v1"}
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
CHARS_PER_TOKEN = 4  # the packing estimate for long/chunks windows (a real tokenizer is endpoint-specific)
OUTPUT_TOKENS_PER_RECORD = 96
MAX_RESPONSE_BYTES = 16 << 20  # a response larger than this is refused (a runaway or hostile server)

DEFAULTS = defaults(LlmParams)  # written once, in microctx.candidates.builtins.params


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
    """{in, out, cached} dollars per million tokens for `model` from a JSON or TOML price table
    (each entry a `microctx.candidates.builtins.params.ModelPrice`)."""
    import msgspec

    from microctx.candidates.builtins.params import ModelPrice

    data = Path(path).read_bytes()
    try:
        if path.endswith(".toml"):
            import tomllib

            table = tomllib.loads(data.decode())
        else:
            table = orjson.loads(data)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError, JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ConfigError(f"price_file {path}: not valid {'TOML' if path.endswith('.toml') else 'JSON'}: {exc}") from None
    if not isinstance(table, dict) or not isinstance(table.get(model), dict):
        raise ConfigError(f"price_file {path}: no entry for model {model!r} (expected {{model: {{in, out, cached}}}})")
    try:
        price = msgspec.convert(table[model], ModelPrice, strict=True)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"price_file {path}: model {model!r}: {exc} (each price a non-negative number)") from None
    entry = {"in": price.input, "out": price.out}
    return entry if price.cached is None else {**entry, "cached": price.cached}


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
