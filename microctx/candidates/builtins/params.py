"""The built-in candidates' parameters: one declared type per built-in, its defaults written here
once (the registry, the sweep file's checks and the built-ins read them from these types).

A value of the wrong type (`--param k=ten`, a grid value `[1.5]` for an integer, an integer past
64 bits) is refused before anything runs; what a value means (a mode's name, a range) is the
built-in's own check, and a value it refuses fails the run naming the parameter.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated

import msgspec


@dataclass(frozen=True)
class ExactSqlParams:
    threads: int = 1  # DuckDB's threads (exact_sql.answer_corpus keeps its own default: its child imports nothing more)


@dataclass(frozen=True)
class TextOnlyParams:
    alpha: float = 1e-4
    epochs: int = 50
    min_label_examples: int = 5
    min_df: int | float = 2
    max_features: int | None = 50000
    seed: int = 0


@dataclass(frozen=True)
class LlmParams:
    base_url: str = ""
    model: str = ""
    mode: str = "micro"
    task: str = "all"
    context_tokens: int | float = 32768  # integers; llm accepts 4096.0 too
    chunk_records: int | float = 20
    overlap: int | float = 0
    concurrency: int | float = 4
    price_in: float = 0.0
    price_out: float = 0.0
    price_cached: float | None = None
    price_file: str = ""
    api_key_env: str = ""
    call_timeout: float = 120.0
    deadline: float = 0.0
    retries: int | float = 4
    backoff: float = 0.5
    max_backoff: float = 30.0
    max_tokens: int | float = 0
    temperature: float = 0.0
    stream: bool = True
    json_mode: bool = True
    cache: str = ""
    retrieval_k: int | float = 0
    splits: str = "all"


@dataclass(frozen=True)
class RetrievalParams:
    k: int = 10
    rerank: str = "none"
    rerank_depth: int = 50
    min_share: float = 0.5
    task: str = "labels"
    k1: float = 1.5
    b: float = 0.75


_Price = Annotated[float, msgspec.Meta(ge=0)]


class ModelPrice(msgspec.Struct, frozen=True):
    """One model's entry in llm's price file (`price_file`, JSON or TOML: model -> {in, out, cached}):
    dollars per million input, output and cached input tokens (cached: the input price if absent)."""

    input: _Price = msgspec.field(name="in")
    out: _Price
    cached: _Price | None = None


def defaults(kind: type) -> dict:
    """A built-in's parameters and their defaults, in declaration order."""
    return {f.name: f.default for f in dataclasses.fields(kind)}
