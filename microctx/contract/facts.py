"""The grader's fact table: one row per scored fact (tp, fp, fn) and per aggregate or citation error.

Written beside a grade as `<grade>.facts.csv`; slice reports read it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from microctx._io.atomic import AtomicOutputs
from microctx._io.csvout import csv_chunks
from microctx.contract.canonical import dumps

FACT_KINDS = ("state", "label", "ref", "dup", "contradiction")


FACT_COLUMNS = ("record_id", "split", "kind", "value", "outcome", "detail")


@dataclass(frozen=True, slots=True)
class FactRow:
    record_id: str
    split: str
    kind: str
    value: str
    outcome: str  # tp, fp, fn for facts; error for aggregate and citation rows
    detail: str = ""


def facts_csv(rows: list[FactRow]) -> bytes:
    """The per-fact outcome table as CSV bytes (header included)."""
    return b"".join(facts_csv_chunks(rows))


def facts_csv_chunks(rows: Iterable[FactRow]) -> Iterator[bytes]:
    """The bytes of `facts_csv(rows)`, in chunks (a million-record grade's table is not held whole)."""
    return csv_chunks(FACT_COLUMNS, ((r.record_id, r.split, r.kind, r.value, r.outcome, r.detail) for r in rows))


def facts_path(grade_path: str | os.PathLike[str]) -> str:
    """Where the fact table goes beside a grade file: `<G without .json>.facts.csv`."""
    text = os.fspath(grade_path)
    return (text[:-5] if text.endswith(".json") else text) + ".facts.csv"


class GradeLike(Protocol):
    """What `write_grade` reads of a `score.GradeResult` (named structurally: score imports this module)."""

    @property
    def grade(self) -> dict[str, Any]: ...

    @property
    def facts(self) -> list[FactRow]: ...


def write_grade(result: GradeLike, grade_path: str | os.PathLike[str]) -> None:
    """Write `grade_path` (the contract's grade JSON of a GradeResult) and its fact table beside
    it (`<grade>.facts.csv`), together: both or neither."""
    Path(grade_path).parent.mkdir(parents=True, exist_ok=True)
    with AtomicOutputs() as out:
        out.write(grade_path, dumps(result.grade))
        out.write(facts_path(grade_path), facts_csv_chunks(result.facts))
