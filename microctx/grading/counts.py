"""Counting for slices: slice definitions, and the one per-component count of grading.

- `Spec`: a slice (facts of some records, of a fact kind, of a value); `slice_specs` lists every
  slice a table reports (shared by paired tables); `kind_specs` the hidden per-fact-kind parts of
  record-level slices (for comparing a record-level slice with its rest at the same kind mix).
- `FactTable`: one fact table prepared for slicing (scored facts joined to the record table):
  `prepare` from a fact DataFrame, `prepare_rows` from a grade's `FactRow`s (no pandas).
- `component_counts(component, outcome, record, n_components)`: the one per-component count:
  (n_components, 5) tp, fp, fn, records and exact records (no fp, no fn). Slices, tune metrics
  (sweeps) and the frontier's net-true all count through it.
- `count(facts, specs, component, n)`: those counts for every slice at once (`Counts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from microctx.contract.facts import FACT_KINDS, FactRow
from microctx.contract.patterns import CUE_WORDS
from microctx.contract.split import SPLITS
from microctx.errors import InputError
from microctx.grading import stats
from microctx.grading.records import (
    BODY_LENGTH_BUCKETS,
    OUTCOMES,
    WITH_REFERENCES,
    WITHOUT_REFERENCES,
    RecordColumns,
    component_index,
)

if TYPE_CHECKING:
    import pandas as pd


QUANTITIES = ("tp", "fp", "fn", "records", "exact")
# the family a slice is compared with: its complement within this slice (by (kind, name))
FAMILY_OF_KIND = {"label": ("fact_kind", "label"), "cue_word": ("fact_kind", "contradiction")}
# slices that select facts by their records (not by kind): compared with their rest kind by kind
RECORD_LEVEL_KINDS = ("state", "body_length", "has_references", "split")


def check_options(
    n_boot: int, min_support: int, min_components: int, alpha: float, adjustment: str, min_n_eff: float = 1.0
) -> None:
    if int(n_boot) < 1:
        raise InputError("--n-boot", f"expected a positive number of resamples, got {n_boot}")
    if int(min_support) < 0:
        raise InputError("--min-support", f"expected 0 or more, got {min_support}")
    if int(min_components) < 1:
        raise InputError("--min-components", f"expected 1 or more, got {min_components}")
    if not min_n_eff >= 1:
        raise InputError("min_n_eff", f"expected 1 or more, got {min_n_eff}")
    if not 0 < alpha < 1:
        raise InputError("alpha", f"expected a level between 0 and 1, got {alpha}")
    if adjustment not in stats.ADJUSTMENTS:
        raise InputError("adjustment", f"expected one of {', '.join(stats.ADJUSTMENTS)}, got {adjustment!r}")


@dataclass(frozen=True)
class Spec:
    """A slice: facts of records selected by `record_mask` (None: all), of `fact_kind` (None:
    any kind) and, when `fact_value` is set, of that value."""

    kind: str
    name: str
    record_mask: np.ndarray | None = None
    fact_kind: str | None = None
    fact_value: str | None = None


@dataclass
class FactTable:
    """One fact table prepared for slicing: scored facts only, joined to the record table."""

    kind: np.ndarray
    value: np.ndarray
    outcome: np.ndarray  # 0 tp, 1 fp, 2 fn
    record: np.ndarray  # row index into the record table

    def __post_init__(self) -> None:
        # integer codes: comparing ints is far faster than comparing object arrays per slice
        self._kind_codes, self._kind_index = _factorize(self.kind)

    def of_kind(self, kind: str) -> np.ndarray:
        """Which facts are of `kind` (compared as integer codes)."""
        returned: np.ndarray = self._kind_codes == self._kind_index.get(kind, -2)
        return returned

    def mask(self, spec: Spec) -> np.ndarray:
        """The facts `spec` selects, fact by fact: the plain reference the per-kind counting
        (`count`) is tested against."""
        keep = np.ones(len(self.kind), dtype=bool) if spec.record_mask is None else spec.record_mask[self.record]
        if spec.fact_kind is not None:
            keep &= self.of_kind(spec.fact_kind)
        if spec.fact_value is not None:
            keep &= np.array([v == spec.fact_value for v in self.value], dtype=bool)
        return keep


def _factorize(values: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, dict[Any, int]]:
    """(code per value, value -> code), codes in order of first appearance."""
    index: dict[Any, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in values), dtype=np.int64, count=len(values))
    return codes, index


def prepare(facts: pd.DataFrame, records: pd.DataFrame | RecordColumns, name: str) -> FactTable:
    missing = [c for c in ("record_id", "kind", "value", "outcome") if c not in facts.columns]
    if missing:
        raise InputError(facts.attrs.get("path", name), f"missing column {missing[0]!r}", record="header")
    import pandas as pd

    scored = facts[facts["kind"].isin(FACT_KINDS)]
    where = pd.Index(np.asarray(records["id"], dtype=object)).get_indexer(scored["record_id"])
    if (where < 0).any():
        rid = scored["record_id"].iat[int(np.flatnonzero(where < 0)[0])]
        raise InputError(
            facts.attrs.get("path", name),
            "record id is not in the public corpus (facts of another corpus?)",
            record=rid,
            field="record_id",
        )
    outcome = scored["outcome"].map({o: i for i, o in enumerate(OUTCOMES)})
    if outcome.isna().any():
        bad = scored["outcome"][outcome.isna()].iat[0]
        raise InputError(facts.attrs.get("path", name), f"expected outcome tp, fp or fn, got {bad!r}", field="outcome")
    return FactTable(
        scored["kind"].to_numpy(dtype=object),
        scored["value"].to_numpy(dtype=object),
        outcome.to_numpy(dtype=np.int64),
        where.astype(np.int64),
    )


def prepare_rows(rows: Iterable[FactRow], records: pd.DataFrame | RecordColumns, name: str) -> FactTable:
    """`prepare` for a grade's fact rows (`GradeResult.facts`), without pandas: the same FactTable."""
    return prepare_cells(((r.record_id, r.split, r.kind, r.value, r.outcome, r.detail) for r in rows), records, name)


class FactCells:
    """Where a grade's fact rows go for slicing (`score.grade(..., rows_to=FactCells())`): each
    record's facts as plain cells (record_id, split, kind, value, outcome, detail), not a FactRow
    each (about 0.2 s at 100,000 records); `prepare_cells` reads them. The other rows (aggregate,
    citation, corpus) are kept in `rows`."""

    def __init__(self) -> None:
        self.cells: list[tuple[str, str, str, str, str, str]] = []
        self.append_cells = self.cells.append
        self.rows: list[FactRow] = []

    def append(self, row: FactRow, /) -> None:
        self.rows.append(row)


_SCORED = frozenset(FACT_KINDS)


def prepare_cells(
    cells: Iterable[tuple[str, str, str, str, str, str]], records: pd.DataFrame | RecordColumns, name: str
) -> FactTable:
    """`prepare_rows` of fact rows given as cells (`FactCells`): the same FactTable."""
    position = {rid: i for i, rid in enumerate(np.asarray(records["id"], dtype=object))}
    scored = [c for c in cells if c[2] in _SCORED]
    codes = {o: i for i, o in enumerate(OUTCOMES)}
    where = np.fromiter((position.get(c[0], -1) for c in scored), dtype=np.int64, count=len(scored))
    outcome = np.fromiter((codes.get(c[4], -1) for c in scored), dtype=np.int64, count=len(scored))
    bad = np.flatnonzero((where < 0) | (outcome < 0))
    if len(bad):  # the first bad cell, its record id checked before its outcome
        rid, _, _, _, got, _ = scored[int(bad[0])]
        if rid not in position:
            raise InputError(
                name, "record id is not in the public corpus (facts of another corpus?)", record=rid, field="record_id"
            )
        raise InputError(name, f"expected outcome tp, fp or fn, got {got!r}", field="outcome")
    objects = np.empty((2, len(scored)), dtype=object)
    objects[0] = [c[2] for c in scored]
    objects[1] = [c[3] for c in scored]
    return FactTable(objects[0], objects[1], outcome, where)


def slice_specs(prepared: Sequence[FactTable], records: pd.DataFrame | RecordColumns, group_by: Sequence[str]) -> list[Spec]:
    """Every slice to report, from the records and the facts of all tables given (so paired
    tables share one list)."""
    specs = [Spec("overall", "all")]
    specs += [Spec("fact_kind", k, fact_kind=k) for k in FACT_KINDS]
    labels = sorted({v for f in prepared for v in f.value[f.of_kind("label")]})
    specs += [Spec("label", v, fact_kind="label", fact_value=v) for v in labels]
    scored_records = stats.distinct(np.concatenate([f.record for f in prepared])) if prepared else np.array([], int)
    states = np.asarray(records["state"], dtype=object)
    for state in sorted(set(states[scored_records])):
        specs.append(Spec("state", state, record_mask=states == state))
    specs += [Spec("cue_word", w, fact_kind="contradiction", fact_value=w) for w in CUE_WORDS]
    buckets = np.asarray(records["body_length_bucket"], dtype=object)
    specs += [Spec("body_length", name, record_mask=buckets == name) for _, name in BODY_LENGTH_BUCKETS]
    has_refs = np.asarray(records["has_references"], dtype=bool)
    specs += [
        Spec("has_references", WITH_REFERENCES, record_mask=has_refs),
        Spec("has_references", WITHOUT_REFERENCES, record_mask=~has_refs),
    ]
    splits = np.asarray(records["split"], dtype=object)
    specs += [Spec("split", s, record_mask=splits == s) for s in SPLITS]
    for column in group_by:
        specs += group_by_specs(records, column)
    return specs


def group_by_specs(records: pd.DataFrame | RecordColumns, column: str) -> list[Spec]:
    if column not in records.columns:
        raise ValueError(f"group_by column {column!r} is not a record_table column ({', '.join(records.columns)})")
    values = list(records[column])
    is_list = any(isinstance(v, (list, tuple)) for v in values)
    members = [set(v) if is_list else {v} for v in values]
    names = sorted({x for m in members for x in m}, key=lambda x: (str(type(x)), x))
    return [Spec(column, str(name), record_mask=np.array([name in m for m in members], dtype=bool)) for name in names]


@dataclass
class Counts:
    """Per component, slice and quantity (tp, fp, fn, records, exact records): `layout`
    (n_components, n_slices, 5) int32, so the bootstrap reads rows without copying; and per
    slice the record indices with a fact in it and those with an fp or fn in it."""

    layout: np.ndarray
    records: list[np.ndarray]
    bad: list[np.ndarray]

    @property
    def by_component(self) -> np.ndarray:
        """(n_slices, 5, n_components) view of the same counts."""
        return self.layout.transpose(1, 2, 0)

    @cached_property
    def totals(self) -> np.ndarray:
        """(n_slices, 5) totals (computed once: every step of a table reads them)."""
        returned: np.ndarray = self.layout.sum(axis=0, dtype=np.int64)
        return returned

    @cached_property
    def facts_per_component(self) -> np.ndarray:
        """(n_slices, n_components): scored facts (tp + fp + fn) of each slice in each component."""
        returned: np.ndarray = self.layout[:, :, :3].sum(axis=2, dtype=np.int64).T
        return returned

    def per_component(self, quantities: Sequence[int] = (0, 1, 2, 3, 4)) -> np.ndarray:
        """(n_components, n_slices * len(quantities)) rows for the cluster bootstrap."""
        chosen = self.layout if tuple(quantities) == tuple(range(len(QUANTITIES))) else self.layout[:, :, list(quantities)]
        return np.ascontiguousarray(chosen.reshape(chosen.shape[0], chosen.shape[1] * chosen.shape[2]))


def component_counts(component: np.ndarray, outcome: np.ndarray, record: np.ndarray, n_components: int) -> np.ndarray:
    """The one per-component count of grading: (n_components, 5) int64 tp, fp, fn, records, exact records.

    `component`, `outcome` (0 tp, 1 fp, 2 fn) and `record` are per scored fact; a record counts
    in its component once, and is exact when none of its facts is an fp or fn.
    """
    out = np.zeros((n_components, len(QUANTITIES)), dtype=np.int64)
    out[:, :3] = np.bincount(outcome * n_components + component, minlength=3 * n_components).reshape(3, n_components).T
    if len(record):
        first = _first_of_each(record)
        wrong = np.zeros(int(record.max()) + 1, dtype=bool)
        wrong[record[outcome != 0]] = True
        out[:, 3] = np.bincount(component[first], minlength=n_components)
        out[:, 4] = out[:, 3] - np.bincount(component[first], weights=wrong[record[first]], minlength=n_components).astype(
            np.int64
        )
    return out


def _first_of_each(values: np.ndarray) -> np.ndarray:
    """The position of each distinct value's first occurrence, in the values' sorted order (as
    `np.unique(values, return_index=True)[1]`); without sorting when `values` are sorted."""
    if len(values) and (values[1:] >= values[:-1]).all():
        return np.flatnonzero(np.concatenate([[True], values[1:] != values[:-1]]))
    returned: np.ndarray = np.unique(values, return_index=True)[1]
    return returned


def component_counts_of_rows(rows: Iterable[FactRow], component_of: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    """(component keys, (n_components, 5) counts) from a grade's fact rows (`GradeResult.facts`)
    and a record id -> component map (a record missing from the map is its own component).

    Only scored facts count; components are in the order of their keys (`np.unique`).
    """
    scored = [(r.record_id, OUTCOMES.index(r.outcome)) for r in rows if r.outcome in OUTCOMES]
    ids = np.array([rid for rid, _ in scored], dtype=object)
    outcome = np.array([o for _, o in scored], dtype=np.int64)
    keys = np.array([component_of.get(rid, rid) for rid in ids], dtype=object)
    if not len(scored):
        return np.array([], dtype=object), np.zeros((0, len(QUANTITIES)), dtype=np.int64)
    roots, component = np.unique(keys.astype(str) if _mixed(keys) else keys, return_inverse=True)
    _, record = np.unique(ids, return_inverse=True)
    return roots, component_counts(component.astype(np.int64), outcome, record.astype(np.int64), len(roots))


def _mixed(keys: np.ndarray) -> bool:
    return len({type(k) for k in keys}) > 1


def count(f: FactTable, specs: Sequence[Spec], component_of_record: np.ndarray, n_components: int) -> Counts:
    """The per-component counts of every slice (`Counts`), each slice's records sorted (`_Counter`)."""
    counter = _Counter(f, component_of_record, n_components)
    layout = np.zeros((n_components, len(specs), len(QUANTITIES)), dtype=np.int32)
    records, bad = [], []
    for i, spec in enumerate(specs):
        layout[:, i], kept, wrong = counter.by_record(spec) if spec.fact_value is None else counter.by_fact(spec)
        records.append(kept)
        bad.append(wrong)
    return Counts(layout, records, bad)


class _Counter:
    """Counts slices two ways, each made once for all slices. A slice without a value (a fact
    kind or none, records by a mask or all) from each record's tp, fp and fn of that kind: its
    records are those its mask holds that have a fact of the kind. A slice with a value from its
    facts, among the facts of its kind alone, taken in record order once (a grade's facts come in
    record order), so each slice's records come out sorted without a sort per slice."""

    def __init__(self, f: FactTable, component_of_record: np.ndarray, n_components: int) -> None:
        self._f, self._component, self._n = f, component_of_record, n_components
        ordered = len(f.record) < 2 or bool((f.record[1:] >= f.record[:-1]).all())
        self._order = np.arange(len(f.record)) if ordered else np.argsort(f.record, kind="stable")
        self._per_record: dict[str | None, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._of_kind: dict[str | None, tuple[np.ndarray, dict[Any, int], np.ndarray, np.ndarray]] = {}

    def by_record(self, spec: Spec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the slice's (n_components, 5) counts as `component_counts` gives them, its records,
        those with an fp or fn)."""
        if spec.fact_kind not in self._per_record:
            f, n = self._f, len(self._component)
            keep = slice(None) if spec.fact_kind is None else f.of_kind(spec.fact_kind)
            per = np.bincount(f.record[keep] * 3 + f.outcome[keep], minlength=3 * n).reshape(n, 3)
            has = np.asarray(per.any(axis=1))
            self._per_record[spec.fact_kind] = (per, has, (per[:, 1] + per[:, 2]) > 0)
        per, has, wrong = self._per_record[spec.fact_kind]
        kept = np.flatnonzero(has if spec.record_mask is None else has & spec.record_mask)
        comp = self._component[kept]
        out = np.zeros((self._n, len(QUANTITIES)), dtype=np.int64)
        for j in range(3):
            out[:, j] = np.bincount(comp, weights=per[kept, j], minlength=self._n)
        bad = kept[wrong[kept]]
        out[:, 3] = np.bincount(comp, minlength=self._n)
        out[:, 4] = out[:, 3] - np.bincount(self._component[bad], minlength=self._n)
        return out, kept, bad

    def by_fact(self, spec: Spec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The same three for a slice that selects facts by value (`FactTable.mask`)."""
        f = self._f
        if spec.fact_kind not in self._of_kind:  # the kind's facts in record order: value code, record, outcome
            where = self._order
            if spec.fact_kind is not None:
                where = where[f.of_kind(spec.fact_kind)[where]]
            codes, index = _factorize(f.value[where])
            self._of_kind[spec.fact_kind] = (codes, index, f.record[where], f.outcome[where])
        codes, index, record, outcome = self._of_kind[spec.fact_kind]
        keep = codes == index.get(spec.fact_value, -2)
        if spec.record_mask is not None:
            keep &= spec.record_mask[record]
        o, r = outcome[keep], record[keep]
        counts = component_counts(self._component[r], o, r, self._n)
        return counts, stats.distinct_sorted(r), stats.distinct_sorted(r[o != 0])


def kind_specs(specs: Sequence[Spec]) -> tuple[list[Spec], np.ndarray]:
    """The per-fact-kind parts of every slice: (specs, (n_slices, n_kinds) index into them, -1 none).

    A record-level slice (state, body length, references, split, extra groupings) mixes fact
    kinds; its part of kind k is the slice's facts of kind k, and the family's part of kind k
    is the family's (overall) facts of kind k. Only record-level slices and the overall row get
    parts; the rest compare within one kind already.
    """
    parts: list[Spec] = []
    index = np.full((len(specs), len(FACT_KINDS)), -1, dtype=np.int64)
    for i, spec in enumerate(specs):
        if spec.kind == "overall" or spec.fact_kind is None:
            for j, kind in enumerate(FACT_KINDS):
                index[i, j] = len(parts)
                parts.append(Spec(spec.kind, f"{spec.name} ({kind})", spec.record_mask, kind))
    return parts, index


def scored_components(prepared: Sequence[FactTable], records: pd.DataFrame | RecordColumns) -> tuple[np.ndarray, int]:
    """The record -> component index over the components that hold scored facts (`records.component_index`).

    Only those components are resampled; records without facts get index -1 (never used).
    """
    used = stats.distinct(np.concatenate([f.record for f in prepared])) if prepared else np.array([], int)
    return component_index(records, used)


def split_support(records: pd.DataFrame | RecordColumns, specs: Sequence[Spec]) -> dict[str, np.ndarray]:
    """Per split (train, tune): each slice's gold facts among that split's records, from the
    public-derived facts (`public_facts`: the state, labels, references, duplicate targets and
    cue words columns), counted as the same slice masks would count them on a fact table of those
    facts: a slice without a value counts each record's facts of its kind (from the lists'
    lengths), one with a value the facts equal to it (`_PublicFacts`)."""
    if "public_facts" not in records.columns:
        raise ValueError("records: a record_table() frame is needed (no public_facts column)")
    splits = np.asarray(records["split"], dtype=object)
    held = np.flatnonzero((splits == "train") | (splits == "tune"))  # the test records' facts are not counted
    public = _PublicFacts(records, held)
    in_train = splits[held] == "train"  # else tune
    train, tune = np.zeros(len(specs), dtype=np.int64), np.zeros(len(specs), dtype=np.int64)
    for i, spec in enumerate(specs):
        per_record, record = public.count(spec.fact_kind, spec.fact_value)  # facts per held record (or per fact)
        if spec.record_mask is not None:
            per_record = per_record * spec.record_mask[held[record] if record is not None else held]
        first = in_train if record is None else in_train[record]
        train[i], tune[i] = int(per_record[first].sum()), int(per_record[~first].sum())
    return {"train": train, "tune": tune}


# the record table's columns that make `public_facts`, after the state: (fact kind, column)
_PUBLIC_LISTS = (("label", "labels"), ("ref", "references"), ("dup", "duplicate_targets"), ("contradiction", "cue_words"))


class _PublicFacts:
    """The `public_facts` of the `held` records without a fact table: per fact kind the number of
    facts of each record (the lists' lengths; the state is one fact when present), and, made only
    for a kind a slice selects a value of, its facts' values (str, as `public_facts` has them)
    with their record (a position in `held`)."""

    def __init__(self, records: pd.DataFrame | RecordColumns, held: np.ndarray) -> None:
        state = np.asarray(records["state"], dtype=object)[held]
        self._lists: dict[str, np.ndarray] = {"state": state}
        self._per_record = {"state": np.fromiter((x is not None for x in state), dtype=np.int64, count=len(held))}
        for kind, column in _PUBLIC_LISTS:
            lists = np.asarray(records[column], dtype=object)[held]
            self._lists[kind] = lists
            self._per_record[kind] = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
        self._all = sum(self._per_record.values(), np.zeros(len(held), dtype=np.int64))
        self._values: dict[str, tuple[np.ndarray, np.ndarray, dict[str, int]]] = {}

    def count(self, kind: str | None, value: str | None) -> tuple[np.ndarray, np.ndarray | None]:
        """(counts, None): facts of `kind` (any kind: None) per held record, when `value` is None;
        else (1 per matching fact, its record): the facts of that kind equal to `value`."""
        if value is None:
            return (self._all if kind is None else self._per_record.get(kind, np.zeros_like(self._all))), None
        kinds = FACT_KINDS if kind is None else (kind,) if kind in self._per_record else ()
        matched = [self._matching(k, value) for k in kinds]
        if not matched:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        record = np.concatenate(matched)
        return np.ones(len(record), dtype=np.int64), record

    def _matching(self, kind: str, value: str) -> np.ndarray:
        """The record (position in `held`) of each fact of `kind` whose value is `value`."""
        if kind not in self._values:
            lists = self._lists[kind]
            if kind == "state":
                present = np.flatnonzero(self._per_record["state"])
                values, where = [str(x) for x in lists[present]], present
            else:
                values = [str(x) for v in lists for x in v]
                where = np.repeat(np.arange(len(lists), dtype=np.int64), self._per_record[kind])
            codes, index = _factorize(values)
            self._values[kind] = (codes, where, index)
        codes, where, index = self._values[kind]
        matching: np.ndarray = where[codes == index.get(value, -2)]
        return matching


def family_of(specs: Sequence[Spec]) -> np.ndarray:
    """Index of the slice each slice is compared within (its complement is family - slice);
    -1 for the overall row (nothing to compare with)."""
    where = {(s.kind, s.name): i for i, s in enumerate(specs)}
    family = np.zeros(len(specs), dtype=np.int64)
    for i, spec in enumerate(specs):
        family[i] = -1 if spec.kind == "overall" else where.get(FAMILY_OF_KIND.get(spec.kind, ("overall", "all")), 0)
    return family
