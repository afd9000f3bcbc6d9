"""Slice analysis: per-slice grading of one submission's fact table, so weak classes stay visible.

A grade is one average; this module takes it apart: one row per slice in the shape of
fairlearn's MetricFrame, the overall row beside the by-group rows. Every row answers two
questions, kept apart (docs/statistics.md):
- **on these records**: `support`, `tp`, `fp`, `fn`, `precision`, `recall`, `f1`, `records`,
  `exact_records`, `exact_rate` are the exact figures of the frozen test set (a deterministic
  candidate has no uncertainty about them, and no interval is given for them);
- **beyond these records**: every `*_ci_low/_ci_high`, `p_value`, `weak` and
  `min_detectable_gap` is about a new test set drawn the same way (Korn-Graubard intervals from
  a cluster bootstrap over split components), given only when the slice is `estimable`; otherwise
  `no_interval_reason` says why and which component it rests on.

The pieces: `records` (the record table, the component index), `counts` (slice definitions and
the per-component counts), `estimate` (estimability, bounds, sensitivity, tests), `stats` (the
bootstrap), `replicates` (the bootstrap columns a table reads), `intervals` and `judge` (a table's
intervals and weak test), `frame` (`SliceFrame`), `paired` (two candidates); `table` composes them
into sorted columns without pandas (what `microctx slices` writes). This module is the DataFrame API.

Public API: `load_facts`, `facts_frame`, `record_table` (from `records`); `slice_table(facts,
corpus, *, records=None, **options)` (the options and their defaults: `table.slice_columns`);
`slice_frame`, `SliceFrame`;
`compare_table`; `paired_comparison`; `overall_metrics` (the overall row's metrics and
intervals from per-component counts: the tune metrics of sweeps); `write_slices_csv`;
`method_text`; `settings`; `wilson_interval`, `mcnemar_exact` (independence-assuming references).

Slices (`slice_kind`, `slice`): `overall/all`; `fact_kind/<kind>` (tp/fp/fn sum to the grade's
totals); `label/<L>`; `state/<S>` (every fact of records in that state); `cue_word/<W>` (all five
listed); `body_length/<bucket>`; `has_references/with|without references`; `split/train|tune|test`
(train and tune listed with zero support: not scored); any extra `group_by` column of
`record_table` (list columns give one slice per element).

Sort order: the overall row, then kinds in `SLICE_KINDS` order (extra kinds last), within a kind
the slices with enough support before the too-small ones (estimable first), each worst first
(F1 ascending, NaN last, then larger support, then name).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from microctx._io.atomic import atomic_write
from microctx.grading import counts as counting
from microctx.grading.counts import component_counts_of_rows
from microctx.grading.frame import SliceFrame
from microctx.grading.intervals import overall_metrics
from microctx.grading.judge import SAME_KINDS, STANDARDISED  # noqa: F401  (re-exported)
from microctx.grading.paired import PAIRED_COLUMNS, paired_comparison
from microctx.grading.records import BODY_LENGTH_BUCKETS, OUTCOMES, facts_frame, load_facts, record_table
from microctx.grading.stats import Z95, mcnemar_exact, wilson_interval
from microctx.grading.table import (
    QUANTITIES,  # noqa: F401  (re-exported)
    SLICE_COLUMNS,
    SLICE_KINDS,
    method_text,
    settings,
    slice_columns,
)

if TYPE_CHECKING:
    from microctx.corpus.public import Corpus

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
    "overall_metrics",
    "component_counts_of_rows",
    "write_slices_csv",
    "method_text",
    "settings",
    "SLICE_COLUMNS",
    "PAIRED_COLUMNS",
    "SLICE_KINDS",
    "BODY_LENGTH_BUCKETS",
    "OUTCOMES",
]


def slice_table(facts: pd.DataFrame, corpus: Corpus, *, records: pd.DataFrame | None = None, **options: Any) -> pd.DataFrame:
    """Per-slice metrics of one fact table (see the module docstring for slices and columns).

    `facts`: a frame from `load_facts`/`facts_frame` (rows that are not scored facts are
    ignored); `corpus`: the public Corpus the grade was made on; `records`: a precomputed
    `record_table(corpus)`; `options`: the keyword options of `table.slice_columns` (min_support,
    min_components, min_n_eff, n_boot, seed, min_gap, alpha, adjustment, group_by; their one
    home, with the defaults). Deterministic given `seed`: same inputs and options, same bytes.
    """
    records = record_table(corpus) if records is None else records
    columns = slice_columns(counting.prepare(facts, records, "facts"), records, **options)
    return pd.DataFrame(columns)[list(SLICE_COLUMNS)]


def slice_frame(facts: pd.DataFrame, corpus: Corpus, **kw: Any) -> SliceFrame:
    """`slice_table` wrapped in a SliceFrame."""
    return SliceFrame(slice_table(facts, corpus, **kw))


def compare_table(facts_by_candidate: Mapping[str, pd.DataFrame], corpus: Corpus, **kw: Any) -> pd.DataFrame:
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


def write_slices_csv(table: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a slice (or compare/paired) table as CSV, atomically; floats with full precision."""
    from microctx._io.csvout import frame_csv_bytes

    atomic_write(path, frame_csv_bytes(table))
