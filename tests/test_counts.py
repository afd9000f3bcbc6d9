"""The slice counts (`counts.count`) and the split support (`counts.split_support`) against their
definitions, slice by slice: a slice's facts are those `FactTable.mask` keeps, counted with
`component_counts`; its train/tune support is the number of the held records' `public_facts`
it would keep. On s8f with the planted submission, with extra slices the table never makes (a
value of any kind, a kind no fact has, a value with a record mask) and with the facts out of
record order."""

from __future__ import annotations

import numpy as np
import pytest

from microctx.contract.score import grade
from microctx.grading.counts import (
    FactTable,
    Spec,
    component_counts,
    count,
    prepare_rows,
    scored_components,
    slice_specs,
    split_support,
)
from microctx.grading.examples import planted_submission
from microctx.grading.records import record_columns


@pytest.fixture(scope="module")
def records(s8f_corpus):
    return record_columns(s8f_corpus)


@pytest.fixture(scope="module")
def prepared(s8f_answers, records):
    return prepare_rows(grade(s8f_answers, planted_submission(s8f_answers)).facts, records, "facts")


def _specs(prepared, records):
    specs = slice_specs([prepared], records, ["n_labels"])
    closed = np.asarray(records["state"], dtype=object) == "CLOSED"
    label = next(s.fact_value for s in specs if s.kind == "label")
    return specs + [
        Spec("extra", "a value of any kind", fact_value=label),
        Spec("extra", "a kind no fact has", fact_kind="aggregate"),
        Spec("extra", "a value of closed records", record_mask=closed, fact_kind="label", fact_value=label),
        Spec("extra", "a value no fact has", fact_kind="label", fact_value="no such label"),
        Spec("extra", "refs of closed records", record_mask=closed, fact_kind="ref"),
    ]


def _shuffled(f: FactTable, seed: int) -> FactTable:
    order = np.random.default_rng(seed).permutation(len(f.record))
    return FactTable(f.kind[order], f.value[order], f.outcome[order], f.record[order])


@pytest.mark.parametrize("seed", [None, 3])
def test_count_is_each_slices_masked_facts_counted(prepared, records, seed):
    f = prepared if seed is None else _shuffled(prepared, seed)
    specs = _specs(prepared, records)
    component, n = scored_components([f], records)
    got = count(f, specs, component, n)
    assert len(specs) > 100 and got.layout[:, -5:].any() and not got.layout[:, -4].any()
    for i, spec in enumerate(specs):
        keep = f.mask(spec)
        record, outcome = f.record[keep], f.outcome[keep]
        expected = component_counts(component[record], outcome, record, n)
        assert (got.layout[:, i] == expected).all(), spec.name
        assert got.records[i].tolist() == sorted(set(record.tolist())), spec.name
        assert got.bad[i].tolist() == sorted(set(record[outcome != 0].tolist())), spec.name


def test_split_support_counts_the_held_records_public_facts(prepared, records):
    specs = _specs(prepared, records)
    got = split_support(records, specs)
    splits = np.asarray(records["split"], dtype=object)
    kinds, values, where = [], [], []
    for i, facts in enumerate(records["public_facts"]):
        for kind, value in facts:
            kinds.append(kind)
            values.append(value)
            where.append(i)
    table = FactTable(np.array(kinds, dtype=object), np.array(values, dtype=object), np.zeros(len(where), dtype=np.int64),
                      np.array(where, dtype=np.int64))  # fmt: skip
    for name in ("train", "tune"):
        in_split = splits[table.record] == name
        expected = [int((table.mask(spec) & in_split).sum()) for spec in specs]
        assert got[name].tolist() == expected
    assert got["train"].sum() > 0 and got["tune"][-5] > 0


def test_prepare_cells_names_the_first_bad_cell(s8f_answers, records):
    """The first cell with an unknown record or outcome is named, its record checked first."""
    from microctx.errors import InputError
    from microctx.grading.counts import FactCells, prepare_cells

    sink = FactCells()
    grade(s8f_answers, planted_submission(s8f_answers), rows_to=sink)
    good = sink.cells[:50]
    rid, split, kind, value, _, detail = good[10]
    odd_outcome = (rid, split, kind, value, "maybe", detail)
    elsewhere = ("elsewhere/1", split, kind, value, "tp", detail)
    both = ("elsewhere/2", split, kind, value, "maybe", detail)
    assert (
        prepare_cells(good, records, "facts").record.tolist()
        == prepare_rows(
            [r for r in grade(s8f_answers, planted_submission(s8f_answers)).facts if r.kind != "citation"][:50], records, "f"
        ).record.tolist()
    )
    with pytest.raises(InputError, match="got 'maybe'"):
        prepare_cells([*good, odd_outcome, elsewhere], records, "facts")
    with pytest.raises(InputError, match="elsewhere/1"):
        prepare_cells([*good, elsewhere, odd_outcome], records, "facts")
    with pytest.raises(InputError, match="elsewhere/2"):
        prepare_cells([*good, both], records, "facts")
