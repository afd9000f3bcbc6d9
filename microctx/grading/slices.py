"""Slice analysis: per-slice grading of one submission's fact table, so weak classes stay visible.

A grade is one average; this module takes it apart. It reads the per-fact table that `grade`
writes (`<G>.facts.csv`) and the public corpus, and gives one row per slice in the shape of
fairlearn's MetricFrame: the overall row beside the by-group rows, every count and metric with
a 95% interval that respects the clustering of linked records. The statistics themselves live
in `microctx.grading.stats`; docs/statistics.md explains every column in plain words.
pandas and numpy are imported here; the CLI's core commands never import this.

Public API:
- `load_facts(path) -> DataFrame`: read a `<grade>.facts.csv` (strings kept as strings).
- `facts_frame(rows) -> DataFrame`: the same frame from `GradeResult.facts` (no file needed).
- `record_table(corpus, answers=None) -> DataFrame`: one row per public record with the
  grouping columns: id, number, split, state, labels, n_labels, body_length,
  body_length_bucket, has_references, n_references, cue_words, has_cue_word, component,
  component_size, public_facts (the record's gold facts, derived from the public text as the
  answers are), and, given answers, gold_facts (their number, from the answers).
- `slice_table(facts, corpus, *, min_support=20, min_components=10, n_boot=10000, seed=0,
  min_gap=0.0, alpha=0.05, adjustment="holm", group_by=(), records=None) -> DataFrame`:
  the slice table (columns `SLICE_COLUMNS`, sorted overall first, then by kind, worst first).
- `slice_frame(...) -> SliceFrame`: the same table wrapped with `overall`, `by_group`,
  `group_min(metric)`, `group_max(metric)`, `difference(metric)`, `weakest(n)`, `too_small()`.
- `compare_table(facts_by_candidate, corpus, **kw) -> DataFrame`: the slice tables stacked
  with a leading `candidate` column.
- `paired_comparison(facts_a, facts_b, corpus, **kw) -> DataFrame`: per slice, a paired
  component bootstrap of the F1 difference a - b and component-level sign-flip tests.
- `write_slices_csv(table, path)`: atomic CSV write.
- `wilson_interval(k, n)`, `mcnemar_exact(b01, b10)`: the independence-assuming classics, kept
  as references (from `stats`).
- `method_text(...)`: the paragraph a report prints to say how its intervals were made.

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

Columns (see docs/statistics.md for each in plain words):
- support = gold facts = tp + fn; precision = tp / (tp + fp); recall = tp / (tp + fn);
  f1 = 2tp / (2tp + fp + fn). A ratio with a zero denominator is NaN.
- records, exact_records, exact_rate: records with a fact in the slice, those with no fp/fn in it.
- n_components, n_eff, largest_component_share: how many split components hold the slice's
  facts, Kish's effective number of them, and the share of the largest.
- estimable: n_components >= min_components. A slice that is not estimable gets no interval,
  no p-value and is never weak: its counts are all the table says about it.
- every `*_ci_low/_ci_high`: 95% percentile *cluster* bootstrap (components resampled, n_boot
  replicates, one draw shared by all slices and metrics); a metric at exactly 1 (or 0) gets the
  exact one-sided 95% bound alpha ** (1 / components) instead ("at least ...").
  boot_no_gold / boot_no_submitted: replicates in which the slice drew no gold fact (recall
  undefined) / no submitted fact (precision undefined); intervals use the other replicates.
- rest_f1: F1 of the rest of the slice's family (its complement): the other labels' facts for
  a label, the other cue words' for a cue word, every other fact for any other slice.
- p_value: one-sided bootstrap test that the slice's F1 is below rest_f1 - min_gap;
  p_adjusted: Holm-adjusted (or Benjamini-Hochberg) over all judged slices.
- judged slices: not overall, estimable, not too_small, and a rest that is estimable too.
- weak: judged and p_adjusted < alpha. too_small: support < min_support.
- train_support, tune_support: the slice's gold facts among train / tune records (derived from
  the public text; for a label, its training examples), beside the test `support`.
- ci_method: the method text with n_boot, seed, thresholds and the component count.

Sort order: the overall row, then slice kinds in `SLICE_KINDS` order (extra group_by kinds
last), within a kind the slices with enough support before the too-small ones (estimable
first), each worst first (F1 ascending, NaN last, then larger support first, then name).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from microctx._io.atomic import atomic_write
from microctx.contract.facts import FACT_COLUMNS, FACT_KINDS
from microctx.contract.patterns import (
    CUE_WORDS,
    derive,
    issue_text,
    references,
    scope_contradictions,
)
from microctx.contract.score import record_facts
from microctx.contract.split import SPLITS, components
from microctx.errors import InputError
from microctx.grading import stats
from microctx.grading.stats import Z95, mcnemar_exact, wilson_interval

__all__ = [
    "Z95",
    "mcnemar_exact",
    "wilson_interval",
    "load_facts",
    "facts_frame",
    "record_table",
    "slice_table",
    "slice_frame",
    "SliceFrame",
    "compare_table",
    "paired_comparison",
    "write_slices_csv",
    "method_text",
    "settings",
    "SLICE_COLUMNS",
    "PAIRED_COLUMNS",
    "SLICE_KINDS",
    "BODY_LENGTH_BUCKETS",
    "OUTCOMES",
]

OUTCOMES = ("tp", "fp", "fn")
QUANTITIES = ("tp", "fp", "fn", "records", "exact")
SLICE_KINDS = ("overall", "fact_kind", "label", "state", "cue_word", "body_length", "has_references", "split")
SLICE_COLUMNS = (
    "slice_kind",
    "slice",
    "support",
    "tp",
    "fp",
    "fn",
    "precision",
    "recall",
    "f1",
    "ci_low",
    "ci_high",
    "weak",
    "too_small",
    "estimable",
    "p_value",
    "p_adjusted",
    "rest_f1",
    "n_components",
    "n_eff",
    "largest_component_share",
    "train_support",
    "tune_support",
    "records",
    "exact_records",
    "exact_rate",
    "exact_ci_low",
    "exact_ci_high",
    "precision_ci_low",
    "precision_ci_high",
    "recall_ci_low",
    "recall_ci_high",
    "f1_ci_low",
    "f1_ci_high",
    "boot_no_gold",
    "boot_no_submitted",
    "ci_method",
)
PAIRED_COLUMNS = (
    "slice_kind",
    "slice",
    "support",
    "too_small",
    "estimable",
    "n_components",
    "n_eff",
    "records",
    "exact_a",
    "exact_b",
    "b10",
    "b01",
    "exact_p",
    "exact_p_adjusted",
    "f1_a",
    "f1_b",
    "f1_diff",
    "f1_diff_ci_low",
    "f1_diff_ci_high",
    "f1_diff_excludes_zero",
    "p_value",
    "p_adjusted",
    "significant",
    "method",
)
# (upper bound in characters, name); bodies longer than the last bound are ">8,000 chars"
BODY_LENGTH_BUCKETS = (
    (0, "empty"),
    (500, "1-500 chars"),
    (2000, "501-2,000 chars"),
    (8000, "2,001-8,000 chars"),
    (None, ">8,000 chars"),
)
WITH_REFERENCES, WITHOUT_REFERENCES = "with references", "without references"
# the family a slice is compared with: its complement within this slice (by (kind, name))
FAMILY_OF_KIND = {"label": ("fact_kind", "label"), "cue_word": ("fact_kind", "contradiction")}


def _check_options(n_boot: int, min_support: int, min_components: int, alpha: float, adjustment: str) -> None:
    if int(n_boot) < 1:
        raise InputError("--n-boot", f"expected a positive number of resamples, got {n_boot}")
    if int(min_support) < 0:
        raise InputError("--min-support", f"expected 0 or more, got {min_support}")
    if int(min_components) < 1:
        raise InputError("--min-components", f"expected 1 or more, got {min_components}")
    if not 0 < alpha < 1:
        raise InputError("alpha", f"expected a level between 0 and 1, got {alpha}")
    if adjustment not in stats.ADJUSTMENTS:
        raise InputError("adjustment", f"expected one of {', '.join(stats.ADJUSTMENTS)}, got {adjustment!r}")


# ---------------------------------------------------------------- inputs


def load_facts(path: str | os.PathLike) -> pd.DataFrame:
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


def facts_frame(rows: Iterable) -> pd.DataFrame:
    """The fact table as a DataFrame from `GradeResult.facts` (FactRow objects)."""
    data = [(r.record_id, r.split, r.kind, r.value, r.outcome, r.detail) for r in rows]
    return pd.DataFrame(data, columns=list(FACT_COLUMNS), dtype=str)


def _check_facts(frame: pd.DataFrame, path) -> None:
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


def _public_facts(record: dict) -> list[tuple[str, str]]:
    """A record's gold facts derived from its public text, as the answers derive them: its
    state, labels, references, duplicate targets and cue words, as (kind, value) pairs."""
    refs, dups, cues = derive(record["title"], record["body"])
    facts = [("state", str(record["state"]))] if record.get("state") is not None else []
    facts += [("label", str(x)) for x in (record["labels"] or [])]
    facts += [("ref", str(x)) for x in refs] + [("dup", str(x)) for x in dups]
    facts += [("contradiction", x) for x in cues]
    return facts


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
            "cue_words": [scope_contradictions(r["body"]) for r in records],
            "component": [roots[n] for n in numbers],
        }
    )
    table.insert(5, "n_labels", table["labels"].map(len))
    table.insert(7, "body_length_bucket", table["body_length"].map(_body_length_bucket))
    table.insert(11, "has_cue_word", table["cue_words"].map(bool))
    table["component_size"] = table.groupby("component")["id"].transform("size")
    table["public_facts"] = [_public_facts(r) for r in records]
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
    return _Facts(
        scored["kind"].to_numpy(dtype=object),
        scored["value"].to_numpy(dtype=object),
        outcome.to_numpy(dtype=np.int64),
        where.astype(np.int64),
    )


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
    specs += [
        _Spec("has_references", WITH_REFERENCES, record_mask=has_refs),
        _Spec("has_references", WITHOUT_REFERENCES, record_mask=~has_refs),
    ]
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


def settings(
    *,
    seed: int = stats.DEFAULT_SEED,
    n_boot: int = stats.DEFAULT_N_BOOT,
    min_support: int = stats.DEFAULT_MIN_SUPPORT,
    min_components: int = stats.DEFAULT_MIN_COMPONENTS,
) -> dict:
    """Every statistics setting of a slice table, checked (InputError naming the option): the
    four a user sets, then the fixed ones, as a report records them in report.json."""
    _check_options(n_boot, min_support, min_components, stats.ALPHA, stats.ADJUSTMENT)
    return {
        "seed": int(seed),
        "n_boot": int(n_boot),
        "min_support": int(min_support),
        "min_components": int(min_components),
        "alpha": stats.ALPHA,
        "confidence": stats.CONFIDENCE,
        "adjustment": stats.ADJUSTMENT,
        "min_gap": 0.0,
        "exact_flip_limit": stats.EXACT_FLIP_LIMIT,
        "interval": "percentile cluster bootstrap over split components",
        "weak_test": "one-sided cluster-bootstrap test of slice F1 against the rest of its family",
        "paired_test": "two-sided component sign-flip test",
    }


# ---------------------------------------------------------------- counting


@dataclass
class _Counts:
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

    @property
    def totals(self) -> np.ndarray:
        return self.layout.sum(axis=0, dtype=np.int64)

    @property
    def facts_per_component(self) -> np.ndarray:
        """(n_slices, n_components): scored facts (tp + fp + fn) of each slice in each component."""
        return self.layout[:, :, :3].sum(axis=2, dtype=np.int64).T

    def per_component(self, quantities: Sequence[int] = (0, 1, 2, 3, 4)) -> np.ndarray:
        """(n_components, n_slices * len(quantities)) rows for the cluster bootstrap."""
        chosen = self.layout if tuple(quantities) == tuple(range(len(QUANTITIES))) else self.layout[:, :, list(quantities)]
        return np.ascontiguousarray(chosen.reshape(chosen.shape[0], chosen.shape[1] * chosen.shape[2]))


def _count(f: _Facts, specs: Sequence[_Spec], component_of_record: np.ndarray, n_components: int) -> _Counts:
    comp = component_of_record[f.record]
    layout = np.zeros((n_components, len(specs), len(QUANTITIES)), dtype=np.int32)
    records, bad = [], []
    for i, spec in enumerate(specs):
        keep = f.mask(spec)
        c, o, r = comp[keep], f.outcome[keep], f.record[keep]
        # one bincount over (outcome, component) pairs fills the slice's 3 x n block
        layout[:, i, :3] = np.bincount(o * n_components + c, minlength=3 * n_components).reshape(3, n_components).T
        rec = np.unique(r)
        wrong = np.unique(r[o != 0])
        in_slice = np.bincount(component_of_record[rec], minlength=n_components)
        layout[:, i, 3] = in_slice
        layout[:, i, 4] = in_slice - np.bincount(component_of_record[wrong], minlength=n_components)
        records.append(rec)
        bad.append(wrong)
    return _Counts(layout, records, bad)


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


def _split_support(records: pd.DataFrame, specs: Sequence[_Spec]) -> dict[str, np.ndarray]:
    """Per split (train, tune): each slice's gold facts among that split's records, from the
    public-derived facts (`public_facts`), counted with the same slice masks as the test facts."""
    if "public_facts" not in records.columns:
        raise ValueError("records: a record_table() frame is needed (no public_facts column)")
    rows = [(i, kind, value) for i, facts in enumerate(records["public_facts"]) for kind, value in facts]
    index = np.array([r[0] for r in rows], dtype=np.int64)
    gold = _Facts(
        np.array([r[1] for r in rows], dtype=object),
        np.array([r[2] for r in rows], dtype=object),
        np.zeros(len(rows), dtype=np.int64),
        index,
    )
    split_of_fact = records["split"].to_numpy(dtype=object)[index] if len(index) else np.array([], dtype=object)
    out = {}
    for split in ("train", "tune"):
        in_split = split_of_fact == split
        out[split] = np.array([int((gold.mask(spec) & in_split).sum()) for spec in specs], dtype=np.int64)
    return out


def _family(specs: Sequence[_Spec]) -> np.ndarray:
    """Index of the slice each slice is compared within (its complement is family - slice);
    -1 for the overall row (nothing to compare with)."""
    where = {(s.kind, s.name): i for i, s in enumerate(specs)}
    family = np.zeros(len(specs), dtype=np.int64)
    for i, spec in enumerate(specs):
        family[i] = -1 if spec.kind == "overall" else where.get(FAMILY_OF_KIND.get(spec.kind, ("overall", "all")), 0)
    return family


# ---------------------------------------------------------------- intervals


def _metric_replicates(totals: np.ndarray) -> dict[str, np.ndarray]:
    """precision, recall, f1, exact_rate per replicate and slice from (replicates, slices, 5) totals."""
    tp, fp, fn, rec, exact = (totals[..., j] for j in range(5))
    return {
        "precision": stats.ratio(tp, tp + fp),
        "recall": stats.ratio(tp, tp + fn),
        "f1": stats.f1_score(tp, fp, fn),
        "exact_rate": stats.ratio(exact, rec),
    }


def _boundary(
    point: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    n: np.ndarray,
    alpha: float,
    transform: Callable[[np.ndarray], np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Replace the degenerate bootstrap interval of a metric at exactly 1 (or 0) by the exact
    one-sided bound over its n components (`stats.boundary_bound`), mapped by `transform`
    (F1 is bounded through q = tp / (tp + fp + fn): F1 = 2q / (1 + q))."""
    bound = stats.boundary_bound(n, alpha)
    lower, upper = bound, 1 - bound
    if transform is not None:
        lower, upper = transform(lower), transform(upper)
    low = np.where(point == 1, lower, low)
    high = np.where(point == 0, upper, high)
    return low, high


def _f1_of_q(q: np.ndarray) -> np.ndarray:
    return 2 * q / (1 + q)


def method_text(
    *,
    n_boot: int,
    seed: int,
    n_components: int,
    min_components: int,
    min_support: int,
    alpha: float = stats.ALPHA,
    min_gap: float = 0.0,
    adjustment: str = "holm",
    judged: int | None = None,
) -> str:
    """The paragraph a report prints under its slice table: how intervals and `weak` were made."""
    adjust = {"holm": "Holm", "bh": "Benjamini-Hochberg"}[adjustment]
    gap = f" by more than {min_gap:g}" if min_gap else ""
    judged_text = f" over the {judged} judged slices" if judged is not None else " over all judged slices"
    return (
        f"Intervals: 95% percentile cluster bootstrap over {n_components} split components "
        f"(components resampled, not facts or records; n_boot={n_boot}, seed={seed}); a metric at exactly 1 "
        f"(or 0) gets the exact one-sided 95% bound alpha^(1/components) instead. Slices in fewer than "
        f"{min_components} components are not estimable: counts only, no interval, never weak. "
        f"Weak: support >= {min_support}, estimable, and F1 below the rest of its family{gap} in a one-sided "
        f"component-bootstrap test (smallest possible p = 1/(n_boot+1) = {1 / (n_boot + 1):.2g}), p-values "
        f"{adjust}-adjusted{judged_text}, alpha={alpha:g}."
    )


def _table(
    specs: Sequence[_Spec],
    counts: _Counts,
    replicates: np.ndarray,
    split_support: dict[str, np.ndarray],
    *,
    min_support: int,
    min_components: int,
    min_gap: float,
    alpha: float,
    adjustment: str,
    n_boot: int,
    seed: int,
    n_components: int,
) -> pd.DataFrame:
    totals = counts.totals
    tp, fp, fn, n_records, n_exact = (totals[:, j] for j in range(5))
    weights = counts.facts_per_component
    n_comp = (weights > 0).sum(axis=1)
    facts = weights.sum(axis=1)
    estimable = n_comp >= min_components
    too_small = (tp + fn) < min_support
    points = {
        "precision": stats.ratio(tp, tp + fp),
        "recall": stats.ratio(tp, tp + fn),
        "f1": stats.f1_score(tp, fp, fn),
        "exact_rate": stats.ratio(n_exact, n_records),
    }
    by = counts.by_component
    components_of = {
        "precision": ((by[:, 0] + by[:, 1]) > 0).sum(axis=1),
        "recall": ((by[:, 0] + by[:, 2]) > 0).sum(axis=1),
        "f1": n_comp,
        "exact_rate": (by[:, 3] > 0).sum(axis=1),
    }
    metrics = _metric_replicates(replicates)
    intervals = {}
    for name, values in metrics.items():
        low, high, _ = stats.percentile_interval(values)
        low, high = _boundary(points[name], low, high, components_of[name], stats.ALPHA, _f1_of_q if name == "f1" else None)
        intervals[name] = (np.where(estimable, low, np.nan), np.where(estimable, high, np.nan))

    # slice against the rest of its family
    family = _family(specs)
    has_family = family >= 0
    fam = np.where(has_family, family, 0)
    rest_totals = totals[fam] - totals
    rest_f1 = np.where(has_family, stats.f1_score(rest_totals[:, 0], rest_totals[:, 1], rest_totals[:, 2]), np.nan)
    rest_components = ((weights[fam] - weights) > 0).sum(axis=1)
    judged = has_family & estimable & ~too_small & (rest_components >= min_components)
    p_value = np.full(len(specs), np.nan)
    if judged.any():
        rest_reps = replicates[:, fam[judged]] - replicates[:, judged]
        rest_f1_reps = stats.f1_score(rest_reps[..., 0], rest_reps[..., 1], rest_reps[..., 2])
        p_value[judged] = stats.bootstrap_p_worse(metrics["f1"][:, judged] - rest_f1_reps, min_gap)
    p_adjusted = stats.ADJUSTMENTS[adjustment](p_value)
    weak = judged & (p_adjusted < alpha)

    with np.errstate(invalid="ignore", divide="ignore"):
        largest = np.where(facts > 0, weights.max(axis=1, initial=0) / np.where(facts > 0, facts, 1), np.nan)
    table = pd.DataFrame(
        {
            "slice_kind": [s.kind for s in specs],
            "slice": [s.name for s in specs],
            "support": tp + fn,
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "precision": points["precision"],
            "recall": points["recall"],
            "f1": points["f1"],
            "ci_low": intervals["f1"][0],
            "ci_high": intervals["f1"][1],
            "weak": weak,
            "too_small": too_small,
            "estimable": estimable,
            "p_value": p_value,
            "p_adjusted": p_adjusted,
            "rest_f1": rest_f1,
            "n_components": n_comp,
            "n_eff": stats.kish_n_eff(weights, axis=1),
            "largest_component_share": largest,
            "train_support": split_support["train"],
            "tune_support": split_support["tune"],
            "records": n_records,
            "exact_records": n_exact,
            "exact_rate": points["exact_rate"],
            "exact_ci_low": intervals["exact_rate"][0],
            "exact_ci_high": intervals["exact_rate"][1],
            "precision_ci_low": intervals["precision"][0],
            "precision_ci_high": intervals["precision"][1],
            "recall_ci_low": intervals["recall"][0],
            "recall_ci_high": intervals["recall"][1],
            "f1_ci_low": intervals["f1"][0],
            "f1_ci_high": intervals["f1"][1],
            "boot_no_gold": np.isnan(metrics["recall"]).sum(axis=0),
            "boot_no_submitted": np.isnan(metrics["precision"]).sum(axis=0),
            "ci_method": method_text(
                n_boot=n_boot,
                seed=seed,
                n_components=n_components,
                min_components=min_components,
                min_support=min_support,
                alpha=alpha,
                min_gap=min_gap,
                adjustment=adjustment,
                judged=int(judged.sum()),
            ),
        }
    )
    return _sorted(table[list(SLICE_COLUMNS)])


def _sorted(table: pd.DataFrame) -> pd.DataFrame:
    kinds = {k: i for i, k in enumerate(SLICE_KINDS)}
    extra = {k: len(kinds) + i for i, k in enumerate(dict.fromkeys(table["slice_kind"])) if k not in kinds}
    order = table.assign(
        _kind=table["slice_kind"].map(lambda k: kinds.get(k, extra.get(k))),
        _not_estimable=~table["estimable"].astype(bool),
        _f1=table["f1"].fillna(np.inf),
        _neg_support=-table["support"],
    ).sort_values(["_kind", "too_small", "_not_estimable", "_f1", "_neg_support", "slice"], kind="mergesort")
    return table.loc[order.index].reset_index(drop=True)


def slice_table(
    facts: pd.DataFrame,
    corpus,
    *,
    min_support: int = stats.DEFAULT_MIN_SUPPORT,
    min_components: int = stats.DEFAULT_MIN_COMPONENTS,
    n_boot: int = stats.DEFAULT_N_BOOT,
    seed: int = stats.DEFAULT_SEED,
    min_gap: float = 0.0,
    alpha: float = stats.ALPHA,
    adjustment: str = stats.ADJUSTMENT,
    group_by: Sequence[str] = (),
    records: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Per-slice metrics of one fact table (see the module docstring for slices and columns).

    `facts`: a frame from `load_facts`/`facts_frame` (rows that are not scored facts, such as
    aggregate or citation errors, are ignored); `corpus`: the public Corpus the grade was made
    on; `records`: a precomputed `record_table(corpus)` to save recomputing it.
    Deterministic given `seed`: same inputs and options, same table (and same CSV bytes).
    """
    _check_options(n_boot, min_support, min_components, alpha, adjustment)
    records = record_table(corpus) if records is None else records
    prepared = _prepare(facts, records, "facts")
    specs = _specs([prepared], records, group_by)
    component, n_components = _components([prepared], records)
    counts = _count(prepared, specs, component, n_components)
    replicates = stats.bootstrap_totals(counts.per_component(), n_boot, seed).reshape(n_boot, len(specs), len(QUANTITIES))
    return _table(
        specs,
        counts,
        replicates,
        _split_support(records, specs),
        min_support=min_support,
        min_components=min_components,
        min_gap=min_gap,
        alpha=alpha,
        adjustment=adjustment,
        n_boot=n_boot,
        seed=seed,
        n_components=n_components,
    )


class SliceFrame:
    """A slice table with MetricFrame-like accessors (fairlearn's shape).

    `overall`: the overall row as a Series; `by_group`: every other row, indexed by
    (slice_kind, slice); `group_min(metric)` / `group_max(metric)`: per slice kind, the
    smallest/largest value among slices large enough to judge (enough support, estimable);
    `difference(metric)`: per kind, max - min (`method="between_groups"`) or the largest
    |slice - overall| (`"to_overall"`); `weakest(n)`: the n judged slices with the lowest F1;
    `too_small()`: the slices too small to judge; `weak()`: the slices marked weak;
    `not_estimable()`: the slices in too few components for an interval.
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
        return Summary(
            f"{len(self.table):,} slices ({int(self.table['weak'].sum()):,} weak, {int(self.table['too_small'].sum()):,} too small); "
            f"overall F1 {o['f1']:.3f} [{o['ci_low']:.3f}, {o['ci_high']:.3f}] on {int(o['support']):,} facts"
        )

    def __repr__(self) -> str:
        return f"SliceFrame({self.summary})"

    def _repr_html_(self) -> str:
        from microctx.display import card_html, fields_html, table_html

        columns = ["slice_kind", "slice", "support", "tp", "fp", "fn", "f1", "ci_low", "ci_high", "weak", "too_small"]
        rows = [
            [f"{v:.3f}" if isinstance(v, float) else v for v in row]
            for row in self.weakest(5)[columns[2:]].reset_index()[columns].itertuples(index=False)
        ]
        return card_html(
            "Slices",
            fields_html([("summary", self.summary)]),
            "<div style='margin-top:4px'>weakest judged slices (.table has every row)</div>",
            table_html(columns, rows),
        )

    @property
    def overall(self) -> pd.Series:
        return self.table[self.table["slice_kind"] == "overall"].iloc[0]

    @property
    def by_group(self) -> pd.DataFrame:
        return self.table[self.table["slice_kind"] != "overall"].set_index(["slice_kind", "slice"])

    def _judged(self) -> pd.DataFrame:
        groups = self.by_group
        return groups[~groups["too_small"] & groups["estimable"]]

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

    def not_estimable(self) -> pd.DataFrame:
        return self.table[~self.table["estimable"]]


def slice_frame(facts: pd.DataFrame, corpus, **kw) -> SliceFrame:
    """`slice_table` wrapped in a SliceFrame."""
    return SliceFrame(slice_table(facts, corpus, **kw))


def compare_table(facts_by_candidate: Mapping[str, pd.DataFrame], corpus, **kw) -> pd.DataFrame:
    """The slice table of each candidate, stacked, with a leading `candidate` column.

    Each candidate's table is computed on its own (same seed); candidates keep their given order.
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


# ---------------------------------------------------------------- paired comparison


def _exact_by_component(counts_a: _Counts, counts_b: _Counts, component: np.ndarray, n_components: int):
    """Per slice and component: records with a slice fact under a or b, those exact under a, under b."""
    n = len(counts_a.records)
    union = np.zeros((n, n_components), dtype=np.int64)
    exact_a = np.zeros_like(union)
    exact_b = np.zeros_like(union)
    for i in range(n):
        records = np.union1d(counts_a.records[i], counts_b.records[i])
        union[i] = np.bincount(component[records], minlength=n_components)
        exact_a[i] = union[i] - np.bincount(component[counts_a.bad[i]], minlength=n_components)
        exact_b[i] = union[i] - np.bincount(component[counts_b.bad[i]], minlength=n_components)
    return union, exact_a, exact_b


def _flip_statistics(a_tot: np.ndarray, b_tot: np.ndarray):
    """Statistics of swapped candidates from kept sums K of a - b over components (columns
    tp, fp, fn, exact): a' = b + K and b' = a - K. Returns (F1 difference, exact difference)."""

    def f1_diff(kept: np.ndarray) -> np.ndarray:
        a = b_tot[None, :] + kept
        b = a_tot[None, :] - kept
        return stats.f1_score(a[:, 0], a[:, 1], a[:, 2]) - stats.f1_score(b[:, 0], b[:, 1], b[:, 2])

    def exact_diff(kept: np.ndarray) -> np.ndarray:
        return (b_tot[3] + kept[:, 3]) - (a_tot[3] - kept[:, 3])

    return f1_diff, exact_diff


def paired_comparison(
    facts_a: pd.DataFrame,
    facts_b: pd.DataFrame,
    corpus,
    *,
    n_boot: int = stats.DEFAULT_N_BOOT,
    seed: int = stats.DEFAULT_SEED,
    min_support: int = stats.DEFAULT_MIN_SUPPORT,
    min_components: int = stats.DEFAULT_MIN_COMPONENTS,
    alpha: float = stats.ALPHA,
    adjustment: str = stats.ADJUSTMENT,
    group_by: Sequence[str] = (),
    records: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Candidate a against candidate b on the same records, per slice (every slice kind).

    - f1_diff = F1(a) - F1(b), with a 95% percentile interval from a paired cluster bootstrap:
      each replicate draws split components with replacement once and recomputes both F1s on
      the same draw. f1_diff_excludes_zero: that interval lies wholly above or below 0.
    - p_value: two-sided component sign-flip test of the F1 difference (a's and b's outcomes
      swapped inside random sets of components; exact for up to 12 discordant components);
      exact_p: the same test on the difference of exact records (b10 - b01), which replaces the
      record-level McNemar test (records are not independent). Both are adjusted (Holm by
      default) over the judged slices: enough support and estimable (n_components >=
      min_components). significant: judged and p_adjusted < alpha.
    Rows follow the slice order overall, fact_kind, label, state, ...; too_small as in
    `slice_table`. Both fact tables must come from the same answers (equal gold support per slice).
    """
    _check_options(n_boot, min_support, min_components, alpha, adjustment)
    records = record_table(corpus) if records is None else records
    prepared = [_prepare(facts_a, records, "facts a"), _prepare(facts_b, records, "facts b")]
    specs = _specs(prepared, records, group_by)
    component, n_components = _components(prepared, records)
    counts_a, counts_b = (_count(p, specs, component, n_components) for p in prepared)
    support_a = counts_a.totals[:, 0] + counts_a.totals[:, 2]
    support_b = counts_b.totals[:, 0] + counts_b.totals[:, 2]
    if support_a[0] != support_b[0] or (support_a != support_b).any():
        raise InputError(
            facts_b.attrs.get("path", "facts b"),
            f"gold facts differ from facts a ({support_b[0]} against {support_a[0]}): "
            "paired comparison needs grades against the same answers",
        )
    n_slices = len(specs)
    union, exact_a, exact_b = _exact_by_component(counts_a, counts_b, component, n_components)
    by_a = np.concatenate([counts_a.by_component[:, :3], exact_a[:, None]], axis=1)  # (S, 4, G)
    by_b = np.concatenate([counts_b.by_component[:, :3], exact_b[:, None]], axis=1)
    a_tot, b_tot = by_a.sum(axis=2).astype(np.float64), by_b.sum(axis=2).astype(np.float64)
    weights = by_a[:, :3].sum(axis=1) + by_b[:, :3].sum(axis=1)
    n_comp = (weights > 0).sum(axis=1)
    estimable = n_comp >= min_components
    too_small = support_a < min_support
    judged = estimable & ~too_small

    # paired cluster bootstrap of the F1 difference
    joint = np.ascontiguousarray(np.concatenate([by_a[:, :3], by_b[:, :3]], axis=1).reshape(n_slices * 6, n_components).T)
    reps = stats.bootstrap_totals(joint, n_boot, seed).reshape(n_boot, n_slices, 6)
    diff = stats.f1_score(reps[..., 0], reps[..., 1], reps[..., 2]) - stats.f1_score(reps[..., 3], reps[..., 4], reps[..., 5])
    low, high, _ = stats.percentile_interval(diff)
    low, high = np.where(estimable, low, np.nan), np.where(estimable, high, np.nan)
    f1_a = stats.f1_score(a_tot[:, 0], a_tot[:, 1], a_tot[:, 2])
    f1_b = stats.f1_score(b_tot[:, 0], b_tot[:, 1], b_tot[:, 2])
    exact_diff_observed = a_tot[:, 3] - b_tot[:, 3]

    # component sign-flip tests
    delta = (by_a - by_b).astype(np.float64)  # (S, 4, G)
    discordant = (delta != 0).any(axis=1)  # (S, G)
    f1_p = np.full(n_slices, np.nan)
    exact_p = np.full(n_slices, np.nan)
    monte_carlo = [i for i in range(n_slices) if judged[i] and discordant[i].sum() > stats.EXACT_FLIP_LIMIT]
    kept_mc = np.empty((0, 0, 4))
    position = {i: j for j, i in enumerate(monte_carlo)}
    if monte_carlo:
        rows = delta[monte_carlo].reshape(len(monte_carlo) * 4, n_components).T  # (G, len(mc) * 4)
        rows = rows[(rows != 0).any(axis=1)]
        profiles, multiplicity = stats.compress(rows)
        kept_mc = (stats.binomial_flips(multiplicity, n_boot, seed + 1) @ profiles).reshape(n_boot, len(monte_carlo), 4)
    for i in map(int, np.flatnonzero(judged)):
        f1_stat, exact_stat = _flip_statistics(a_tot[i], b_tot[i])
        observed_f1 = f1_a[i] - f1_b[i]
        if i in position:
            kept = kept_mc[:, position[i]]
            f1_p[i] = stats.sign_flip_p_monte_carlo(f1_stat(kept)[:, None], np.array([observed_f1]))[0]
            exact_p[i] = stats.sign_flip_p_monte_carlo(exact_stat(kept)[:, None], np.array([exact_diff_observed[i]]))[0]
        else:
            d = delta[i][:, discordant[i]].T  # (k, 4)
            f1_p[i] = stats.sign_flip_exact(d, f1_stat, observed_f1)
            exact_p[i] = stats.sign_flip_exact(d, exact_stat, exact_diff_observed[i])
    adjust = stats.ADJUSTMENTS[adjustment]
    f1_p_adjusted, exact_p_adjusted = adjust(f1_p), adjust(exact_p)
    method = (
        f"f1_diff: 95% paired percentile cluster bootstrap over {n_components} split components "
        f"(n_boot={n_boot}, seed={seed}); p_value / exact_p: two-sided component sign-flip tests of the F1 "
        f"difference / of exact records (exact up to {stats.EXACT_FLIP_LIMIT} discordant components, else "
        f"{n_boot} random flips, seed={seed + 1}), {adjustment}-adjusted over {int(judged.sum())} judged slices "
        f"(support >= {min_support}, at least {min_components} components), alpha={alpha:g}"
    )
    rows_out = []
    for i, spec in enumerate(specs):
        n_union = len(np.union1d(counts_a.records[i], counts_b.records[i]))
        b10 = len(np.setdiff1d(counts_b.bad[i], counts_a.bad[i]))
        b01 = len(np.setdiff1d(counts_a.bad[i], counts_b.bad[i]))
        rows_out.append(
            (
                spec.kind,
                spec.name,
                int(support_a[i]),
                bool(too_small[i]),
                bool(estimable[i]),
                int(n_comp[i]),
                float(stats.kish_n_eff(weights[i])),
                n_union,
                int(a_tot[i, 3]),
                int(b_tot[i, 3]),
                b10,
                b01,
                exact_p[i],
                exact_p_adjusted[i],
                f1_a[i],
                f1_b[i],
                f1_a[i] - f1_b[i],
                low[i],
                high[i],
                bool((low[i] > 0) or (high[i] < 0)),
                f1_p[i],
                f1_p_adjusted[i],
                bool(judged[i] and f1_p_adjusted[i] < alpha),
                method,
            )
        )
    return pd.DataFrame(rows_out, columns=list(PAIRED_COLUMNS))


def write_slices_csv(table: pd.DataFrame, path: str | os.PathLike) -> None:
    """Write a slice (or compare/paired) table as CSV, atomically; floats with full precision."""
    from microctx._io.csvout import frame_csv_bytes

    atomic_write(path, frame_csv_bytes(table))
