"""Slice analysis: per-slice grading of one submission's fact table, so weak classes stay visible.

A grade is one average; this module takes it apart. It reads the per-fact table that `grade`
writes (`<G>.facts.csv`) and the public corpus, and gives one row per slice in the shape of
fairlearn's MetricFrame: the overall row beside the by-group rows, every count and metric with
a 95% interval. pandas and numpy are imported here; the CLI's core commands never import this.

Public API:
- `load_facts(path) -> DataFrame`: read a `<grade>.facts.csv` (strings kept as strings).
- `facts_frame(rows) -> DataFrame`: the same frame from `GradeResult.facts` (no file needed).
- `record_table(corpus, answers=None) -> DataFrame`: one row per public record with the
  grouping columns: id, number, split, state, labels, n_labels, body_length,
  body_length_bucket, has_references, n_references, cue_words, has_cue_word, component,
  component_size (and, given answers, gold_facts).
- `slice_table(facts, corpus, *, min_support=20, n_boot=1000, seed=0, min_gap=0.0, group_by=(),
  records=None) -> DataFrame`:
  the slice table (columns `SLICE_COLUMNS`, sorted overall first, then by kind, worst first).
- `slice_frame(...) -> SliceFrame`: the same table wrapped with `overall`, `by_group`,
  `group_min(metric)`, `group_max(metric)`, `difference(metric)`, `weakest(n)`, `too_small()`.
- `compare_table(facts_by_candidate, corpus, **kw) -> DataFrame`: the slice tables stacked
  with a leading `candidate` column.
- `paired_comparison(facts_a, facts_b, corpus, *, n_boot=1000, seed=0, min_support=20) -> DataFrame`: per
  slice, McNemar on exact records and a paired component bootstrap of the F1 difference a - b.
- `write_slices_csv(table, path)`: atomic CSV write.
- `wilson_interval(k, n)`, `mcnemar_exact(b01, b10)`: the two interval/test helpers.

Slices (`slice_kind`, `slice`):
- `overall` / `all`: every scored fact.
- `fact_kind` / state, label, ref, dup, contradiction: facts of that kind; their tp/fp/fn sum
  exactly to the grade's totals (false positives are assigned to the kind they were submitted as).
- `label` / L: label facts whose value is L (gold, missed or falsely submitted).
- `state` / S: every fact of the records whose public state is S.
- `cue_word` / W: contradiction facts whose word is W (all five cue words are always listed).
- `body_length` / bucket: every fact of the records in that body-length bucket (characters).
- `has_references` / "with references" | "without references": every fact of the records whose
  public title + body has (or has no) `#N` reference.
- `split` / train | tune | test: every fact of that split's records. Only test records are
  graded, so train and tune are listed with zero support: the table says what was not scored.
- any extra `group_by` column of `record_table` (record-level; list columns give one slice per
  element, e.g. `group_by=("labels",)` is "every fact of records carrying label L").

Columns and their intervals (all 95%):
- support = gold facts = tp + fn; precision = tp / (tp + fp); recall = tp / (tp + fn);
  f1 = 2tp / (2tp + fp + fn). A ratio with a zero denominator is NaN (a slice with no gold and
  some false positives has a precision of 0, recall NaN and F1 0).
- records = records with at least one fact in the slice; exact_records = those with no fp and no
  fn among the slice's facts (for `overall` this is the grade's exact_records); exact_rate.
- f1_ci_low/f1_ci_high: percentile bootstrap of F1 that resamples *split components* (records
  joined by identical titles/bodies or references are drawn together, since they are not
  independent), `n_boot` replicates, one draw of components shared by all slices.
  ci_low/ci_high repeat f1_ci_low/f1_ci_high (the interval of the headline `f1` column).
- precision_ci_*, recall_ci_*, exact_ci_*: Wilson score intervals (facts or records treated as
  independent trials; the F1 bootstrap is the one that respects components).
- ci_method: a text naming the above, with n_boot, seed and the number of components.
- too_small: support < min_support (zero support included). Too-small slices stay listed.
- weak: not too small and the F1 interval lies wholly below the overall F1 point estimate
  (f1_ci_high < overall f1 - min_gap; min_gap defaults to 0). A too-small slice is never weak.
  On very large corpora intervals get tight and small real gaps count as weak; raise min_gap
  (e.g. 0.01) to flag only gaps that matter.

Sort order: the overall row, then slice kinds in `SLICE_KINDS` order (extra group_by kinds
last), within a kind the judged slices before the too-small ones, each worst first (F1
ascending, NaN last, then larger support first, then name).
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from microctx.contract.patterns import (
    CUE_WORDS,
    issue_text,
    references,
    scope_contradictions,
)
from microctx.contract.split import SPLITS, components
from microctx.errors import InputError
from microctx.files import atomic_write
from microctx.grading.facts import FACT_COLUMNS, FACT_KINDS
from microctx.grading.score import record_facts

Z95 = 1.959963984540054  # two-sided 95% normal quantile
OUTCOMES = ("tp", "fp", "fn")
SLICE_KINDS = ("overall", "fact_kind", "label", "state", "cue_word", "body_length", "has_references", "split")
SLICE_COLUMNS = (
    "slice_kind", "slice", "support", "tp", "fp", "fn", "precision", "recall", "f1",
    "ci_low", "ci_high", "weak", "too_small",
    "records", "exact_records", "exact_rate", "exact_ci_low", "exact_ci_high",
    "precision_ci_low", "precision_ci_high", "recall_ci_low", "recall_ci_high",
    "f1_ci_low", "f1_ci_high", "ci_method",
)
PAIRED_COLUMNS = (
    "slice_kind", "slice", "support", "too_small", "records",
    "exact_a", "exact_b", "b10", "b01", "mcnemar_p",
    "f1_a", "f1_b", "f1_diff", "f1_diff_ci_low", "f1_diff_ci_high", "f1_diff_excludes_zero",
    "method",
)
# (upper bound in characters, name); bodies longer than the last bound are ">8,000 chars"
BODY_LENGTH_BUCKETS = ((0, "empty"), (500, "1-500 chars"), (2000, "501-2,000 chars"),
                       (8000, "2,001-8,000 chars"), (None, ">8,000 chars"))
WITH_REFERENCES, WITHOUT_REFERENCES = "with references", "without references"


# ---------------------------------------------------------------- statistics helpers

def wilson_interval(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for k successes in n trials; (nan, nan) when n == 0."""
    if n <= 0:
        return (math.nan, math.nan)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(b01: int, b10: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of min(b01, b10) in b01 + b10 at 1/2.

    Exact (not the chi-square approximation), so it is valid for the small discordant counts
    slices have; 1.0 when there is no discordant pair.
    """
    n = b01 + b10
    if n == 0:
        return 1.0
    tail, term = 0, 1  # exact integers: term walks C(n, 0), C(n, 1), ... C(n, min)
    for i in range(min(b01, b10) + 1):
        tail += term
        term = term * (n - i) // (i + 1)
    return min(1.0, 2 * tail / 2 ** n)  # int / int is correctly rounded, even for huge n


def _ratio(num, den):
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _f1(tp, fp, fn):
    tp = np.asarray(tp, dtype=float)
    return _ratio(2 * tp, 2 * tp + np.asarray(fp) + np.asarray(fn))


def _percentiles(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """2.5th and 97.5th percentile per column, ignoring NaN replicates; NaN for all-NaN columns."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanpercentile(values, [2.5, 97.5], axis=0)
    return low, high


def _component_draws(n_components: int, n_boot: int, seed: int, block: int = 200):
    """How often each component is drawn in each replicate, as (replicates, n_components) count
    blocks of at most `block` replicates (so memory stays small on large corpora).

    Each replicate draws n_components component indices uniformly with replacement and counts
    them (a multinomial draw, made by index draws because that is faster); one generator seeded
    with `seed` makes every block, so the draws depend on the seed alone.
    """
    rng = np.random.default_rng(seed)
    for start in range(0, n_boot, block):
        size = min(block, n_boot - start)
        if n_components == 0:
            yield np.zeros((size, 0), dtype=np.int64)
            continue
        picks = rng.integers(0, n_components, size=(size, n_components))
        picks += np.arange(size)[:, None] * n_components  # row r counts into bins r*n .. r*n+n-1
        yield np.bincount(picks.ravel(), minlength=size * n_components).reshape(size, n_components)


# ---------------------------------------------------------------- inputs

def load_facts(path: str | os.PathLike) -> pd.DataFrame:
    """Read a `<grade>.facts.csv`: columns record_id, split, kind, value, outcome, detail.

    Every cell stays a string (a label "None" or an empty detail is not turned into NaN).
    Raises InputError naming the file, row and field when the table is not that shape.
    """
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)
    except FileNotFoundError:
        raise InputError(path, "cannot read file: no such file") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(path, f"not a readable CSV fact table: {exc}") from None
    if tuple(frame.columns) != FACT_COLUMNS:
        raise InputError(path, f"expected columns {', '.join(FACT_COLUMNS)}, got {', '.join(map(str, frame.columns))}",
                         record="header")
    _check_facts(frame, path)
    frame.attrs["path"] = os.fspath(path)
    return frame


def facts_frame(rows: Iterable) -> pd.DataFrame:
    """The fact table as a DataFrame from `GradeResult.facts` (FactRow objects)."""
    data = [(r.record_id, r.split, r.kind, r.value, r.outcome, r.detail) for r in rows]
    return pd.DataFrame(data, columns=list(FACT_COLUMNS), dtype=str)


def _check_facts(frame: pd.DataFrame, path) -> None:
    scored = frame["kind"].isin(FACT_KINDS)
    bad_outcome = scored & ~frame["outcome"].isin(OUTCOMES)
    if bad_outcome.any():
        i = int(np.flatnonzero(bad_outcome.to_numpy())[0])
        raise InputError(path, f"expected one of tp, fp, fn, got {frame['outcome'].iat[i]!r}",
                         record=f"row {i + 2} ({frame['record_id'].iat[i]})", field="outcome")
    known = scored | frame["kind"].isin(("aggregate", "citation", "corpus"))
    if not known.all():
        i = int(np.flatnonzero(~known.to_numpy())[0])
        raise InputError(path, f"unknown fact kind {frame['kind'].iat[i]!r}",
                         record=f"row {i + 2} ({frame['record_id'].iat[i]})", field="kind")


def _body_length_bucket(length: int) -> str:
    for bound, name in BODY_LENGTH_BUCKETS:
        if bound is None or length <= bound:
            return name
    raise AssertionError("unreachable")


def record_table(corpus, answers: dict | None = None) -> pd.DataFrame:
    """One row per public record with the columns slices group by.

    Everything comes from the public text (references via `facts.references`, cue words via
    `facts.scope_contradictions`, split components via `split.components`), so no answers are
    needed. Given the answer bundle, `gold_facts` (the record's number of gold facts) is added.
    """
    records = corpus.records
    refs = [references(issue_text(r["title"], r["body"])) for r in records]
    numbers = [r["number"] for r in records]
    roots = components(numbers, [r["title"] for r in records], [r["body"] for r in records], refs)
    table = pd.DataFrame({
        "id": [r["id"] for r in records],
        "number": numbers,
        "split": [r["split"] for r in records],
        "state": [r["state"] for r in records],
        "labels": [list(r["labels"] or []) for r in records],
        "body_length": [len(r["body"]) for r in records],
        "has_references": [bool(x) for x in refs],
        "n_references": [len(x) for x in refs],
        "cue_words": [scope_contradictions(r["body"]) for r in records],
        "component": [roots[n] for n in numbers],
    })
    table.insert(5, "n_labels", table["labels"].map(len))
    table.insert(7, "body_length_bucket", table["body_length"].map(_body_length_bucket))
    table.insert(11, "has_cue_word", table["cue_words"].map(bool))
    table["component_size"] = table.groupby("component")["id"].transform("size")
    if answers is not None:
        gold = {a["id"]: len(record_facts(a)) for a in answers["answers"]}
        table["gold_facts"] = table["id"].map(gold).fillna(0).astype(int)
    return table


# ---------------------------------------------------------------- slice definitions

@dataclass(frozen=True)
class _Spec:
    """A slice: facts of records selected by `record_mask` (None: all), of `fact_kind` (None:
    any kind) and, when `fact_value` is set, of that value."""

    kind: str
    name: str
    record_mask: np.ndarray | None = None
    fact_kind: str | None = None
    fact_value: str | None = None


@dataclass
class _Facts:
    """One fact table prepared for slicing: scored facts only, joined to the record table."""

    kind: np.ndarray
    value: np.ndarray
    outcome: np.ndarray  # 0 tp, 1 fp, 2 fn
    record: np.ndarray  # row index into the record table

    def __post_init__(self) -> None:
        # integer codes: comparing ints is far faster than comparing object arrays per slice
        self._kind_codes, kinds = pd.factorize(pd.Series(self.kind, dtype=object))
        self._value_codes, values = pd.factorize(pd.Series(self.value, dtype=object))
        self._kind_index = {k: i for i, k in enumerate(kinds)}
        self._value_index = {v: i for i, v in enumerate(values)}

    def mask(self, spec: _Spec) -> np.ndarray:
        keep = np.ones(len(self.kind), dtype=bool) if spec.record_mask is None else spec.record_mask[self.record]
        if spec.fact_kind is not None:
            keep &= self._kind_codes == self._kind_index.get(spec.fact_kind, -2)
        if spec.fact_value is not None:
            keep &= self._value_codes == self._value_index.get(spec.fact_value, -2)
        return keep


def _prepare(facts: pd.DataFrame, records: pd.DataFrame, name: str) -> _Facts:
    missing = [c for c in ("record_id", "kind", "value", "outcome") if c not in facts.columns]
    if missing:
        raise InputError(facts.attrs.get("path", name), f"missing column {missing[0]!r}", record="header")
    scored = facts[facts["kind"].isin(FACT_KINDS)]
    where = pd.Index(records["id"]).get_indexer(scored["record_id"])
    if (where < 0).any():
        rid = scored["record_id"].iat[int(np.flatnonzero(where < 0)[0])]
        raise InputError(facts.attrs.get("path", name), "record id is not in the public corpus (facts of another corpus?)",
                         record=rid, field="record_id")
    outcome = scored["outcome"].map({o: i for i, o in enumerate(OUTCOMES)})
    if outcome.isna().any():
        bad = scored["outcome"][outcome.isna()].iat[0]
        raise InputError(facts.attrs.get("path", name), f"expected outcome tp, fp or fn, got {bad!r}", field="outcome")
    return _Facts(scored["kind"].to_numpy(dtype=object), scored["value"].to_numpy(dtype=object),
                  outcome.to_numpy(dtype=np.int64), where.astype(np.int64))


def _specs(prepared: Sequence[_Facts], records: pd.DataFrame, group_by: Sequence[str]) -> list[_Spec]:
    """Every slice to report, from the records and the facts of all tables given (so paired
    tables share one list)."""
    specs = [_Spec("overall", "all")]
    specs += [_Spec("fact_kind", k, fact_kind=k) for k in FACT_KINDS]
    labels = sorted({v for f in prepared for v in f.value[f.kind == "label"]})
    specs += [_Spec("label", v, fact_kind="label", fact_value=v) for v in labels]
    scored_records = np.unique(np.concatenate([f.record for f in prepared])) if prepared else np.array([], int)
    states = records["state"].to_numpy(dtype=object)
    for state in sorted(set(states[scored_records])):
        specs.append(_Spec("state", state, record_mask=states == state))
    specs += [_Spec("cue_word", w, fact_kind="contradiction", fact_value=w) for w in CUE_WORDS]
    buckets = records["body_length_bucket"].to_numpy(dtype=object)
    specs += [_Spec("body_length", name, record_mask=buckets == name) for _, name in BODY_LENGTH_BUCKETS]
    has_refs = records["has_references"].to_numpy(dtype=bool)
    specs += [_Spec("has_references", WITH_REFERENCES, record_mask=has_refs),
              _Spec("has_references", WITHOUT_REFERENCES, record_mask=~has_refs)]
    splits = records["split"].to_numpy(dtype=object)
    specs += [_Spec("split", s, record_mask=splits == s) for s in SPLITS]
    for column in group_by:
        specs += _group_by_specs(records, column)
    return specs


def _group_by_specs(records: pd.DataFrame, column: str) -> list[_Spec]:
    if column not in records.columns:
        raise ValueError(f"group_by column {column!r} is not a record_table column ({', '.join(records.columns)})")
    values = records[column].tolist()
    is_list = any(isinstance(v, (list, tuple)) for v in values)
    members = [set(v) if is_list else {v} for v in values]
    names = sorted({x for m in members for x in m}, key=lambda x: (str(type(x)), x))
    return [_Spec(column, str(name), record_mask=np.array([name in m for m in members], dtype=bool)) for name in names]


# ---------------------------------------------------------------- counting

@dataclass
class _Counts:
    """Per slice: tp/fp/fn per component (n_slices, 3, n_components) and record sets."""

    by_component: np.ndarray
    records: list[np.ndarray]  # record indices with a fact in the slice
    bad: list[np.ndarray]  # those with an fp or fn in the slice

    @property
    def totals(self) -> np.ndarray:
        return self.by_component.sum(axis=2)

    @functools.cached_property
    def as_float(self) -> np.ndarray:
        """(3, n_components, n_slices) float copy, laid out for the bootstrap's matrix products."""
        return np.ascontiguousarray(self.by_component.transpose(1, 2, 0), dtype=np.float64)


def _count(f: _Facts, specs: Sequence[_Spec], component_of_record: np.ndarray, n_components: int) -> _Counts:
    comp = component_of_record[f.record]
    by_component = np.zeros((len(specs), 3, n_components), dtype=np.int64)
    records, bad = [], []
    for i, spec in enumerate(specs):
        keep = f.mask(spec)
        c, o, r = comp[keep], f.outcome[keep], f.record[keep]
        # one bincount over (outcome, component) pairs fills the slice's 3 x n block
        by_component[i] = np.bincount(o * n_components + c, minlength=3 * n_components).reshape(3, n_components)
        records.append(np.unique(r))
        bad.append(np.unique(r[o != 0]))
    return _Counts(by_component, records, bad)


def _components(prepared: Sequence[_Facts], records: pd.DataFrame) -> tuple[np.ndarray, int]:
    """Index the split components that hold scored facts: (component index per record, count).

    Only those components are resampled; records without facts get index -1 (never used).
    """
    used = np.unique(np.concatenate([f.record for f in prepared])) if prepared else np.array([], int)
    component = records["component"].to_numpy()
    roots = np.unique(component[used])
    index = np.full(len(records), -1, dtype=np.int64)
    if len(roots):
        pos = np.searchsorted(roots, component)
        hit = (pos < len(roots)) & (roots[np.minimum(pos, len(roots) - 1)] == component)
        index[hit] = pos[hit]
    return index, len(roots)


def _bootstrap_f1(counts: _Counts, draws: np.ndarray) -> np.ndarray:
    """F1 per replicate and slice, (replicates, n_slices), from component draw counts."""
    # float matmul goes through BLAS (integer matmul does not); counts stay exact below 2**53
    weights = draws.astype(np.float64)
    tp, fp, fn = (weights @ counts.as_float[j] for j in range(3))
    return _f1(tp, fp, fn)


def _replicates(blocks, statistic, n_slices: int) -> np.ndarray:
    """Stack `statistic(draws)` over the draw blocks: (n_boot, n_slices)."""
    parts = [statistic(draws) for draws in blocks]
    return np.vstack(parts) if parts else np.empty((0, n_slices))


# ---------------------------------------------------------------- the slice table

def _ci_method(n_boot: int, seed: int, n_components: int) -> str:
    return (f"ci_low/ci_high = f1_ci: 95% percentile bootstrap over {n_components} split components "
            f"(n_boot={n_boot}, seed={seed}); precision/recall/exact: 95% Wilson score")


def _table(specs: Sequence[_Spec], counts: _Counts, boot_f1: np.ndarray, *, min_support: int, min_gap: float,
           ci_method: str) -> pd.DataFrame:
    totals = counts.totals
    tp, fp, fn = totals[:, 0], totals[:, 1], totals[:, 2]
    n_records = np.array([len(r) for r in counts.records])
    n_exact = n_records - np.array([len(b) for b in counts.bad])
    f1_low, f1_high = _percentiles(boot_f1) if boot_f1.shape[0] else (np.full(len(specs), np.nan),) * 2
    table = pd.DataFrame({
        "slice_kind": [s.kind for s in specs],
        "slice": [s.name for s in specs],
        "support": tp + fn, "tp": tp, "fp": fp, "fn": fn,
        "precision": _ratio(tp, tp + fp), "recall": _ratio(tp, tp + fn), "f1": _f1(tp, fp, fn),
        "ci_low": f1_low, "ci_high": f1_high,
        "records": n_records, "exact_records": n_exact, "exact_rate": _ratio(n_exact, n_records),
    })
    for name, k, n in (("exact", n_exact, n_records), ("precision", tp, tp + fp), ("recall", tp, tp + fn)):
        bounds = np.array([wilson_interval(int(a), int(b)) for a, b in zip(k, n)]).reshape(-1, 2)
        table[f"{name}_ci_low"], table[f"{name}_ci_high"] = bounds[:, 0], bounds[:, 1]
    table["f1_ci_low"], table["f1_ci_high"] = f1_low, f1_high
    table["ci_method"] = ci_method
    table["too_small"] = table["support"] < min_support
    overall_f1 = table["f1"].iat[0]
    table["weak"] = (~table["too_small"]) & (table["ci_high"] < overall_f1 - min_gap)  # NaN compares False
    table.loc[0, "weak"] = False
    return _sorted(table[list(SLICE_COLUMNS)])


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    kinds = {k: i for i, k in enumerate(SLICE_KINDS)}
    extra = {k: len(kinds) + i for i, k in enumerate(dict.fromkeys(table["slice_kind"])) if k not in kinds}
    order = table.assign(
        _kind=table["slice_kind"].map(lambda k: kinds.get(k, extra.get(k))),
        _f1=table["f1"].fillna(np.inf), _neg_support=-table["support"],
    ).sort_values(["_kind", "too_small", "_f1", "_neg_support", "slice"], kind="mergesort")
    return table.loc[order.index].reset_index(drop=True)


def slice_table(facts: pd.DataFrame, corpus, *, min_support: int = 20, n_boot: int = 1000, seed: int = 0,
                min_gap: float = 0.0, group_by: Sequence[str] = (), records: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per-slice metrics of one fact table (see the module docstring for slices and columns).

    `facts`: a frame from `load_facts`/`facts_frame` (rows that are not scored facts, such as
    aggregate or citation errors, are ignored); `corpus`: the public Corpus the grade was made
    on; `records`: a precomputed `record_table(corpus)` to save recomputing it.
    Deterministic given `seed`.
    """
    records = record_table(corpus) if records is None else records
    prepared = _prepare(facts, records, "facts")
    specs = _specs([prepared], records, group_by)
    component, n_components = _components([prepared], records)
    counts = _count(prepared, specs, component, n_components)
    boot = _replicates(_component_draws(n_components, n_boot, seed), lambda w: _bootstrap_f1(counts, w), len(specs))
    return _table(specs, counts, boot, min_support=min_support, min_gap=min_gap,
                  ci_method=_ci_method(n_boot, seed, n_components))


class SliceFrame:
    """A slice table with MetricFrame-like accessors (fairlearn's shape).

    `overall`: the overall row as a Series; `by_group`: every other row, indexed by
    (slice_kind, slice); `group_min(metric)` / `group_max(metric)`: per slice kind, the
    smallest/largest value among slices large enough to judge; `difference(metric)`: per kind,
    max - min (`method="between_groups"`) or the largest |slice - overall| (`"to_overall"`);
    `weakest(n)`: the n judged slices with the lowest F1; `too_small()`: the slices too small
    to judge; `weak()`: the slices marked weak.
    """

    def __init__(self, table: pd.DataFrame):
        self.table = table

    # display (notebooks): the overall row, the counts, and the weakest judged slices
    def __len__(self) -> int:
        return len(self.table)

    @property
    def summary(self) -> str:
        from microctx.display import Summary

        o = self.overall
        return Summary(f"{len(self.table):,} slices ({int(self.table['weak'].sum()):,} weak, {int(self.table['too_small'].sum()):,} too small); "
                       f"overall F1 {o['f1']:.3f} [{o['ci_low']:.3f}, {o['ci_high']:.3f}] on {int(o['support']):,} facts")

    def __repr__(self) -> str:
        return f"SliceFrame({self.summary})"

    def _repr_html_(self) -> str:
        from microctx.display import card_html, fields_html, table_html

        columns = ["slice_kind", "slice", "support", "tp", "fp", "fn", "f1", "ci_low", "ci_high", "weak", "too_small"]
        rows = [[f"{v:.3f}" if isinstance(v, float) else v for v in row]
                for row in self.weakest(5)[columns[2:]].reset_index()[columns].itertuples(index=False)]
        return card_html("Slices", fields_html([("summary", self.summary)]),
                         "<div style='margin-top:4px'>weakest judged slices (.table has every row)</div>",
                         table_html(columns, rows))

    @property
    def overall(self) -> pd.Series:
        return self.table[self.table["slice_kind"] == "overall"].iloc[0]

    @property
    def by_group(self) -> pd.DataFrame:
        return self.table[self.table["slice_kind"] != "overall"].set_index(["slice_kind", "slice"])

    def _judged(self) -> pd.DataFrame:
        groups = self.by_group
        return groups[~groups["too_small"]]

    def group_min(self, metric: str = "f1") -> pd.Series:
        return self._judged().groupby(level="slice_kind", sort=False)[metric].min()

    def group_max(self, metric: str = "f1") -> pd.Series:
        return self._judged().groupby(level="slice_kind", sort=False)[metric].max()

    def difference(self, metric: str = "f1", method: str = "between_groups") -> pd.Series:
        if method == "between_groups":
            return self.group_max(metric) - self.group_min(metric)
        if method == "to_overall":
            gap = (self._judged()[metric] - self.overall[metric]).abs()
            return gap.groupby(level="slice_kind", sort=False).max()
        raise ValueError(f"method must be 'between_groups' or 'to_overall', got {method!r}")

    def weakest(self, n: int = 5, metric: str = "f1") -> pd.DataFrame:
        return self._judged().sort_values([metric, "support"], ascending=[True, False], kind="mergesort").head(n)

    def weak(self) -> pd.DataFrame:
        return self.table[self.table["weak"]]

    def too_small(self) -> pd.DataFrame:
        return self.table[self.table["too_small"]]


def slice_frame(facts: pd.DataFrame, corpus, **kw) -> SliceFrame:
    """`slice_table` wrapped in a SliceFrame."""
    return SliceFrame(slice_table(facts, corpus, **kw))


def compare_table(facts_by_candidate: Mapping[str, pd.DataFrame], corpus, **kw) -> pd.DataFrame:
    """The slice table of each candidate, stacked, with a leading `candidate` column.

    Each candidate's table is computed on its own (same seed, so the same component draws);
    candidates keep their given order.
    """
    records = kw.pop("records", None)
    records = record_table(corpus) if records is None else records
    tables = []
    for name, facts in facts_by_candidate.items():
        table = slice_table(facts, corpus, records=records, **kw)
        table.insert(0, "candidate", name)
        tables.append(table)
    if not tables:
        return pd.DataFrame(columns=["candidate", *SLICE_COLUMNS])
    return pd.concat(tables, ignore_index=True)


def paired_comparison(facts_a: pd.DataFrame, facts_b: pd.DataFrame, corpus, *, n_boot: int = 1000, seed: int = 0,
                      min_support: int = 20, group_by: Sequence[str] = (), records: pd.DataFrame | None = None) -> pd.DataFrame:
    """Candidate a against candidate b on the same records, per slice (every slice kind).

    - McNemar on exact records: over the records that have a fact of the slice in a or in b,
      b10 = exact under a and not under b, b01 = exact under b and not under a; mcnemar_p is the
      two-sided exact binomial McNemar p-value (`mcnemar_exact`).
    - f1_diff = F1(a) - F1(b), with a 95% percentile interval from a paired bootstrap: each
      replicate draws split components with replacement once and recomputes both F1s on the
      same draw. f1_diff_excludes_zero is True when the interval lies wholly above or below 0.
    Rows follow the slice order overall, fact_kind, label, state, ...; too_small as in
    `slice_table`. Both fact tables must come from the same answers (equal gold support per slice).
    """
    records = record_table(corpus) if records is None else records
    prepared = [_prepare(facts_a, records, "facts a"), _prepare(facts_b, records, "facts b")]
    specs = _specs(prepared, records, group_by)
    component, n_components = _components(prepared, records)
    counts_a, counts_b = (_count(p, specs, component, n_components) for p in prepared)
    support_a = counts_a.totals[:, 0] + counts_a.totals[:, 2]
    support_b = counts_b.totals[:, 0] + counts_b.totals[:, 2]
    if support_a[0] != support_b[0] or (support_a != support_b).any():
        raise InputError(facts_b.attrs.get("path", "facts b"),
                         f"gold facts differ from facts a ({support_b[0]} against {support_a[0]}): "
                         "paired comparison needs grades against the same answers")
    diff = _replicates(_component_draws(n_components, n_boot, seed),
                       lambda w: _bootstrap_f1(counts_a, w) - _bootstrap_f1(counts_b, w), len(specs))
    low, high = _percentiles(diff) if n_boot else (np.full(len(specs), np.nan),) * 2
    f1_a, f1_b = (_f1(*c.totals.T) for c in (counts_a, counts_b))
    rows = []
    for i, spec in enumerate(specs):
        union = np.union1d(counts_a.records[i], counts_b.records[i])
        bad_a, bad_b = counts_a.bad[i], counts_b.bad[i]
        b10 = len(np.setdiff1d(bad_b, bad_a))
        b01 = len(np.setdiff1d(bad_a, bad_b))
        rows.append((spec.kind, spec.name, int(support_a[i]), bool(support_a[i] < min_support), len(union),
                     len(union) - len(bad_a), len(union) - len(bad_b), b10, b01, mcnemar_exact(b01, b10),
                     f1_a[i], f1_b[i], f1_a[i] - f1_b[i], low[i], high[i],
                     bool((low[i] > 0) or (high[i] < 0)),
                     f"McNemar exact binomial on exact records; f1_diff 95% paired percentile bootstrap over "
                     f"{n_components} split components (n_boot={n_boot}, seed={seed})"))
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


def write_slices_csv(table: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a slice (or compare/paired) table as CSV, atomically; floats with full precision."""
    atomic_write(path, table.to_csv(index=False, lineterminator="\n").encode())
