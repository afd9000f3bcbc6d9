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
from microctx._io.csvout import csv_bytes, csv_chunks
from microctx._io.paths import write_failure
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


def write_grade(result: GradeLike, grade_path: str | os.PathLike[str], into: AtomicOutputs | None = None) -> None:
    """Write `grade_path` (the contract's grade JSON of a GradeResult) and its fact table beside
    it (`<grade>.facts.csv`), together: both or neither; `into`: staged in a larger set of the
    caller's (published with it)."""
    Path(grade_path).parent.mkdir(parents=True, exist_ok=True)
    if into is None:
        with AtomicOutputs() as out:
            write_grade(result, grade_path, out)
        return
    into.write(grade_path, dumps(result.grade))
    into.write(facts_path(grade_path), facts_csv_chunks(result.facts))


class StreamedFacts:
    """A grade's fact table written as its rows come (`append`, the `rows_to` of `score.grade`),
    and the grade beside it (set `.grade` before the `with` ends): both published together on a
    clean exit, neither on an exception, as `write_grade` would. A million-record grade never
    holds its fact rows."""

    def __init__(self, grade_path: str | os.PathLike[str], rows_per_write: int = 10_000) -> None:
        self.grade_path, self.rows_per_write = grade_path, rows_per_write
        self.grade: dict[str, Any] | None = None
        self._rows: list[tuple[str, ...]] = []
        self._out = AtomicOutputs()
        self._head = csv_bytes(FACT_COLUMNS, [])

    def __enter__(self) -> StreamedFacts:
        Path(self.grade_path).parent.mkdir(parents=True, exist_ok=True)
        self._out.__enter__()
        self._handle = self._out.stage(facts_path(self.grade_path))
        self._write(self._head)
        return self

    @property
    def outputs(self) -> AtomicOutputs:
        """The set the fact table and the grade are published in: a file staged into it (the
        semantic layer's table) is published with them, all or none."""
        return self._out

    def append(self, row: FactRow) -> None:
        self.append_cells((row.record_id, row.split, row.kind, row.value, row.outcome, row.detail))

    def append_cells(self, cells: tuple[str, str, str, str, str, str]) -> None:
        """A row given as its cells, in FACT_COLUMNS order (the scorer's rows, without a FactRow
        object each: a frozen dataclass costs about 1 µs to make)."""
        self._rows.append(cells)
        if len(self._rows) >= self.rows_per_write:
            self._flush()

    def _flush(self) -> None:
        self._write(b"".join(csv_chunks(FACT_COLUMNS, self._rows))[len(self._head) :])
        self._rows = []

    def _write(self, data: bytes) -> None:
        try:
            self._handle.write(data)
        except OSError as exc:
            raise write_failure(facts_path(self.grade_path), exc) from None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            if exc_type is None:
                if self.grade is None:
                    raise ValueError("StreamedFacts: set .grade before the with block ends")
                self._flush()
                self._out.write(self.grade_path, dumps(self.grade))
        except BaseException as failure:
            self._out.__exit__(type(failure), failure, failure.__traceback__)
            raise
        self._out.__exit__(exc_type, exc, tb)
