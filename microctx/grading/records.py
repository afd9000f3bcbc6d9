"""The one record table of grading: facts derived once per record, and the record to component index.

Everything a slice, a tune metric or the frontier groups by comes from the public text, derived
once here with the answers' own functions (`contract.patterns`, `contract.split.components`):
- `record_table(corpus, answers=None) -> DataFrame`: one row per public record: id, number, split,
  state, labels, n_labels, body_length, body_length_bucket, has_references, n_references,
  cue_words, has_cue_word, component, component_size, public_facts (the record's gold facts as
  (kind, value) pairs, derived from the public text as the answers are), references and
  duplicate_targets (the derived numbers) and, given answers, gold_facts (their number, from
  the answers). The lab's explorer reads the same table (`microctx.lab.explorer`).
- `component_index(records, used)`: the one record -> component index (dense indices over the
  components that hold the `used` records; -1 elsewhere) every count of grading uses.
- `component_of(records)`: record id -> component root, for callers that hold ids only (sweeps).
- `load_facts(path)` / `facts_frame(rows)`: a grade's fact table as a DataFrame.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from microctx.contract.facts import FACT_COLUMNS, FACT_KINDS, FactRow
from microctx.contract.patterns import derive
from microctx.contract.score import record_facts
from microctx.contract.split import components
from microctx.errors import InputError

if TYPE_CHECKING:
    from microctx.corpus.public import Corpus

OUTCOMES = ("tp", "fp", "fn")
# (upper bound in characters, name); bodies longer than the last bound are ">8,000 chars"
BODY_LENGTH_BUCKETS = (
    (0, "empty"),
    (500, "1-500 chars"),
    (2000, "501-2,000 chars"),
    (8000, "2,001-8,000 chars"),
    (None, ">8,000 chars"),
)
WITH_REFERENCES, WITHOUT_REFERENCES = "with references", "without references"


def load_facts(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a `<grade>.facts.csv`: columns record_id, split, kind, value, outcome, detail.

    Every cell stays a string (a label "None" or an empty detail is not turned into NaN).
    Raises InputError naming the file, row and field when the table is not that shape.
    """
    from microctx._io.jsonio import open_input

    try:
        with open_input(path) as handle:  # a regular file under the input limit, its set settled
            frame = pd.read_csv(handle, dtype=str, keep_default_na=False, na_filter=False)
        from microctx._io.csvout import unescape_frame

        frame = unescape_frame(frame)
    except FileNotFoundError:
        raise InputError(path, "cannot read file: no such file") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(path, f"not a readable CSV fact table: {exc}") from None
    if tuple(frame.columns) != FACT_COLUMNS:
        raise InputError(
            path, f"expected columns {', '.join(FACT_COLUMNS)}, got {', '.join(map(str, frame.columns))}", record="header"
        )
    _check_facts(frame, path)
    frame.attrs["path"] = os.fspath(path)
    return frame


def facts_frame(rows: Iterable[FactRow]) -> pd.DataFrame:
    """The fact table as a DataFrame from `GradeResult.facts` (FactRow objects)."""
    data = [(r.record_id, r.split, r.kind, r.value, r.outcome, r.detail) for r in rows]
    return pd.DataFrame(data, columns=list(FACT_COLUMNS), dtype=str)


def _check_facts(frame: pd.DataFrame, path: object) -> None:
    scored = frame["kind"].isin(FACT_KINDS)
    bad_outcome = scored & ~frame["outcome"].isin(OUTCOMES)
    if bad_outcome.any():
        i = int(np.flatnonzero(bad_outcome.to_numpy())[0])
        raise InputError(
            path,
            f"expected one of tp, fp, fn, got {frame['outcome'].iat[i]!r}",
            record=f"row {i + 2} ({frame['record_id'].iat[i]})",
            field="outcome",
        )
    known = scored | frame["kind"].isin(("aggregate", "citation", "corpus"))
    if not known.all():
        i = int(np.flatnonzero(~known.to_numpy())[0])
        raise InputError(
            path, f"unknown fact kind {frame['kind'].iat[i]!r}", record=f"row {i + 2} ({frame['record_id'].iat[i]})", field="kind"
        )


def _body_length_bucket(length: int) -> str:
    for bound, name in BODY_LENGTH_BUCKETS:
        if bound is None or length <= bound:
            return name
    raise AssertionError("unreachable")


def _public_facts(record: dict[str, Any], derived: tuple[list[int], list[int], list[str]]) -> list[tuple[str, str]]:
    """A record's gold facts derived from its public text, as the answers derive them: its
    state, labels, references, duplicate targets and cue words, as (kind, value) pairs."""
    refs, dups, cues = derived
    facts = [("state", str(record["state"]))] if record.get("state") is not None else []
    facts += [("label", str(x)) for x in (record["labels"] or [])]
    facts += [("ref", str(x)) for x in refs] + [("dup", str(x)) for x in dups]
    facts += [("contradiction", x) for x in cues]
    return facts


def record_table(corpus: Corpus, answers: dict[str, Any] | None = None) -> pd.DataFrame:
    """One row per public record with the columns slices group by and the explorer shows.

    Everything comes from the public text, derived once per record with the answers' own
    function (`contract.patterns.derive`: references, duplicate targets, cue words) and split
    components (`contract.split.components`), so no answers are needed. Given the answer
    bundle, `gold_facts` (the record's number of gold facts) is added.
    """
    records = corpus.records
    derived = [derive(r["title"], r["body"]) for r in records]
    refs = [d[0] for d in derived]
    numbers = [r["number"] for r in records]
    roots = components(numbers, [r["title"] for r in records], [r["body"] for r in records], refs)
    table = pd.DataFrame(
        {
            "id": [r["id"] for r in records],
            "number": numbers,
            "split": [r["split"] for r in records],
            "state": [r["state"] for r in records],
            "labels": [list(r["labels"] or []) for r in records],
            "body_length": [len(r["body"]) for r in records],
            "has_references": [bool(x) for x in refs],
            "n_references": [len(x) for x in refs],
            "cue_words": [d[2] for d in derived],
            "component": [roots[n] for n in numbers],
        }
    )
    table.insert(5, "n_labels", table["labels"].map(len))
    table.insert(7, "body_length_bucket", table["body_length"].map(_body_length_bucket))
    table.insert(11, "has_cue_word", table["cue_words"].map(bool))
    table["component_size"] = table.groupby("component")["id"].transform("size")
    table["public_facts"] = [_public_facts(r, d) for r, d in zip(records, derived)]
    table["references"] = refs
    table["duplicate_targets"] = [d[1] for d in derived]
    if answers is not None:
        gold = {a["id"]: len(record_facts(a)) for a in answers["answers"]}
        table["gold_facts"] = table["id"].map(gold).fillna(0).astype(int)
    return table


def component_index(records: pd.DataFrame, used: np.ndarray) -> tuple[np.ndarray, int]:
    """The record -> component index: (dense component index per record row, number of components).

    Only the components holding a `used` record (row indices, e.g. records with a scored fact)
    are indexed, in the order of their roots; every other record gets -1 (never counted).
    """
    component = records["component"].to_numpy()
    roots = np.unique(component[np.asarray(used, dtype=np.int64)])
    index = np.full(len(records), -1, dtype=np.int64)
    if len(roots):
        pos = np.searchsorted(roots, component)
        hit = (pos < len(roots)) & (roots[np.minimum(pos, len(roots) - 1)] == component)
        index[hit] = pos[hit]
    return index, len(roots)


def component_of(records: pd.DataFrame) -> dict[str, Any]:
    """Record id -> split component root (the split rule's unit), from the record table."""
    return dict(zip(records["id"], records["component"]))
