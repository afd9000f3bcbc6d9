"""Slice analysis on the real s8f data, with submissions planted in-test from the published answers.

The oracle is the answer bundle itself; the imperfect submissions each plant one known fault
(a common label dropped everywhere, references removed, false positives added, a record
dropped), so every check below knows exactly which slice must move and by how much.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest

from microctx.contract.facts import FACT_KINDS, facts_csv
from microctx.contract.score import grade
from microctx.errors import InputError
from microctx.grading import slices

FAKE_LABEL = "NA"  # a label no record has; also checks "NA" stays a string through the CSV


def _test_answers(submission):
    return [a for a in submission["answers"] if a["split"] == "test"]


def _drop_label(answers, label):
    sub = copy.deepcopy(answers)
    for a in sub["answers"]:
        a["labels"] = [x for x in a["labels"] if x != label]
    return sub


def _drop_references(answers):
    """Remove the references of every third test record that has some."""
    sub = copy.deepcopy(answers)
    with_refs = [a for a in _test_answers(sub) if a["references"]]
    for a in with_refs[::3]:
        a["references"] = []
    return sub


def _add_false_positives(answers):
    """A label nobody has on 30 test records, and the cue word 'mismatch' on 10 records without it."""
    sub = copy.deepcopy(answers)
    test = _test_answers(sub)
    for a in test[:30]:
        a["labels"] = sorted(a["labels"] + [FAKE_LABEL])
    without = [a for a in test if "mismatch" not in a["scope_contradictions"]]
    for a in without[:10]:
        a["scope_contradictions"] = sorted(a["scope_contradictions"] + ["mismatch"])
    return sub


def _drop_record(answers):
    sub = copy.deepcopy(answers)
    first_test = next(i for i, a in enumerate(sub["answers"]) if a["split"] == "test")
    del sub["answers"][first_test]
    return sub


PLANTS = {
    "oracle": lambda a: copy.deepcopy(a),
    "no_enhancement": lambda a: _drop_label(a, "enhancement"),
    "no_references": _drop_references,
    "false_positives": _add_false_positives,
    "dropped_record": _drop_record,
    "all_faults": lambda a: _drop_record(_add_false_positives(_drop_references(_drop_label(a, "research")))),
}


@pytest.fixture(scope="module")
def records(s8f_corpus, s8f_answers):
    return slices.record_table(s8f_corpus, s8f_answers)


@pytest.fixture(scope="module")
def graded(s8f_answers):
    """name -> (grade dict, facts frame) for every planted submission."""
    out = {}
    for name, plant in PLANTS.items():
        result = grade(s8f_answers, plant(s8f_answers))
        out[name] = (result.grade, slices.facts_frame(result.facts))
    return out


@pytest.fixture(scope="module")
def tables(graded, s8f_corpus, records):
    return {name: slices.slice_table(facts, s8f_corpus, records=records) for name, (_, facts) in graded.items()}


def _row(table, kind, name):
    rows = table[(table["slice_kind"] == kind) & (table["slice"] == name)]
    assert len(rows) == 1, (kind, name)
    return rows.iloc[0]


def _weak(table):
    return set(map(tuple, table.loc[table["weak"], ["slice_kind", "slice"]].to_numpy()))


# ---------------------------------------------------------------- inputs


def test_record_table_matches_the_answers(records, s8f_corpus, s8f_answers):
    assert len(records) == len(s8f_corpus.records) == 1000
    gold = {a["id"]: a for a in s8f_answers["answers"]}
    assert records["has_references"].tolist() == [bool(gold[i]["references"]) for i in records["id"]]
    assert records["cue_words"].tolist() == [gold[i]["scope_contradictions"] for i in records["id"]]
    assert set(records["body_length_bucket"]) <= {name for _, name in slices.BODY_LENGTH_BUCKETS}
    empty = records["body_length"] == 0
    assert (records.loc[empty, "body_length_bucket"] == "empty").all()
    assert (records.loc[records["body_length"] > 8000, "body_length_bucket"] == ">8,000 chars").all()
    # split components never straddle splits, and the split of a component is its root's
    assert (records.groupby("component")["split"].nunique() == 1).all()
    assert records["component_size"].sum() == (records.groupby("component").size() ** 2).sum()
    assert records["gold_facts"].sum() == sum(
        len(a["labels"]) + len(a["references"]) + len(a["duplicate_targets"]) + len(a["scope_contradictions"]) + 1
        for a in s8f_answers["answers"]
    )


def test_load_facts_round_trips_the_grade_csv(tmp_path, s8f_answers, graded):
    result = grade(s8f_answers, PLANTS["all_faults"](s8f_answers))
    path = tmp_path / "g.facts.csv"
    path.write_bytes(facts_csv(result.facts))
    loaded = slices.load_facts(path)
    pd.testing.assert_frame_equal(loaded, slices.facts_frame(result.facts))
    planted = sum(r.value == FAKE_LABEL for r in result.facts)
    assert (loaded["value"] == FAKE_LABEL).sum() == planted == 29  # "NA" stays a string; 1 of 30 was dropped
    assert set(loaded.loc[loaded["outcome"] == "tp", "detail"]) == {""}
    assert "record not submitted" in set(loaded["detail"])


def test_bad_fact_tables_name_file_row_and_field(tmp_path, s8f_corpus, records, graded):
    header = tmp_path / "header.csv"
    header.write_text("record_id,kind,value,outcome\n")
    with pytest.raises(InputError, match="header.csv: record header: expected columns"):
        slices.load_facts(header)
    outcome = tmp_path / "outcome.csv"
    outcome.write_text("record_id,split,kind,value,outcome,detail\nissue-1,test,label,bug,maybe,\n")
    with pytest.raises(InputError, match=r"outcome.csv: record row 2 \(issue-1\): field 'outcome'"):
        slices.load_facts(outcome)
    with pytest.raises(InputError, match="cannot read file"):
        slices.load_facts(tmp_path / "missing.csv")
    foreign = graded["oracle"][1].copy()
    foreign.loc[0, "record_id"] = "issue-999999"
    with pytest.raises(InputError, match="record issue-999999: field 'record_id'"):
        slices.slice_table(foreign, s8f_corpus, records=records)


# ---------------------------------------------------------------- the slice table


@pytest.mark.parametrize("name", list(PLANTS))
def test_fact_kind_rows_sum_to_the_grade_totals(name, graded, tables):
    grade_doc, facts = graded[name]
    table = tables[name]
    kinds = table[table["slice_kind"] == "fact_kind"]
    assert sorted(kinds["slice"]) == sorted(FACT_KINDS)
    gold = int((facts["outcome"].isin(["tp", "fn"]) & facts["kind"].isin(FACT_KINDS)).sum())
    assert kinds["fp"].sum() == grade_doc["false_positive_facts"]
    assert kinds["fn"].sum() == grade_doc["false_negative_facts"]
    assert kinds["tp"].sum() == gold - grade_doc["false_negative_facts"]
    assert kinds["support"].sum() == gold
    overall = _row(table, "overall", "all")
    assert table.index[table["slice_kind"] == "overall"].tolist() == [0]
    assert (overall["tp"], overall["fp"], overall["fn"]) == tuple(kinds[["tp", "fp", "fn"]].sum())
    assert overall["records"] == grade_doc["test_records"] == 680
    assert overall["exact_records"] == grade_doc["exact_records"]
    assert list(table.columns) == list(slices.SLICE_COLUMNS)


def test_planted_faults_have_the_expected_counts(graded, tables):
    fp = _row(tables["false_positives"], "label", FAKE_LABEL)
    assert (fp["support"], fp["tp"], fp["fp"], fp["fn"]) == (0, 0, 30, 0)
    assert fp["precision"] == 0 and math.isnan(fp["recall"]) and fp["f1"] == 0
    assert fp["too_small"] and not fp["weak"]  # listed, never judged
    mismatch = _row(tables["false_positives"], "cue_word", "mismatch")
    assert (mismatch["tp"], mismatch["fp"], mismatch["fn"]) == (17, 10, 0)
    dropped = graded["dropped_record"][1]
    missing = dropped[dropped["detail"] == "record not submitted"]
    assert _row(tables["dropped_record"], "overall", "all")["fn"] == len(missing) > 0
    assert _row(tables["dropped_record"], "overall", "all")["exact_records"] == 679


def test_oracle_has_no_weak_slice(tables):
    table = tables["oracle"]
    assert not table["weak"].any()
    judged = table[table["support"] > 0]
    assert (judged["f1"] == 1).all() and (judged["exact_rate"] == 1).all()
    # issue 9: n facts all right says "at least ...", not "exactly 1": the exact one-sided 95%
    # bound over the slice's components (q >= 0.05 ** (1 / n), F1 = 2q / (1 + q)), below 1
    estimable = judged[judged["estimable"]]
    q = 0.05 ** (1 / estimable["n_components"])
    assert np.allclose(estimable["ci_low"], 2 * q / (1 + q)) and (estimable["ci_low"] < 1).all()
    assert (estimable["ci_high"] == 1).all()
    assert np.allclose(estimable["recall_ci_low"], q) and np.allclose(estimable["exact_ci_low"], q)
    assert _row(table, "overall", "all")["ci_low"] == pytest.approx(2 * 0.05 ** (1 / 257) / (1 + 0.05 ** (1 / 257)))
    # slices in fewer than 10 components get no interval at all
    assert judged.loc[~judged["estimable"], ["ci_low", "ci_high", "recall_ci_low", "exact_ci_high"]].isna().all().all()


def test_a_dropped_common_label_is_the_weak_slice(tables):
    table = tables["no_enhancement"]
    # issue 9: a slice is judged against the rest of its family, so the two record slices that
    # hold most of the 163 missed facts are (truly) worse than the records outside them too
    assert _weak(table) == {
        ("fact_kind", "label"),
        ("label", "enhancement"),
        ("state", "CLOSED"),
        ("body_length", "2,001-8,000 chars"),
    }
    for kind, name in _weak(table):
        row = _row(table, kind, name)
        assert row["f1"] < row["rest_f1"] and row["p_adjusted"] < 0.05 and row["estimable"]
    row = _row(table, "label", "enhancement")
    assert (row["support"], row["tp"], row["fn"], row["recall"], row["ci_low"]) == (163, 0, 163, 0.0, 0.0)
    # n facts all wrong says "at most ...": the exact one-sided bound over its 41 components
    bound = 1 - 0.05 ** (1 / 41)
    assert row["n_components"] == 41 and row["recall_ci_high"] == pytest.approx(bound)
    assert row["ci_high"] == pytest.approx(2 * bound / (1 + bound))
    assert row["rest_f1"] == 1.0 and row["p_value"] == 1 / 10_001
    # worst first within its kind: the first label row is the planted one
    assert table[table["slice_kind"] == "label"].iloc[0]["slice"] == "enhancement"
    assert table.iloc[1]["slice_kind"] == "fact_kind" and table.iloc[1]["slice"] == "label"


def test_min_gap_keeps_only_gaps_that_matter(graded, s8f_corpus, records):
    # the label kind sits ~0.02 below overall, the enhancement label ~0.98 below it
    table = slices.slice_table(graded["no_enhancement"][1], s8f_corpus, records=records, min_gap=0.1)
    assert _weak(table) == {("label", "enhancement")}


def test_removed_references_make_the_ref_slices_weak(tables):
    weak = _weak(tables["no_references"])
    assert ("fact_kind", "ref") in weak
    assert not any(kind in ("label", "cue_word") for kind, _ in weak)
    assert ("has_references", "without references") not in weak  # those records lost nothing
    combined = _weak(tables["all_faults"])
    # with every fault at once the overall F1 falls to ~0.93: ref and the dropped label sit below it
    assert {("fact_kind", "ref"), ("label", "research")} <= combined


def test_too_small_slices_are_listed_not_dropped(tables, graded):
    table = tables["oracle"]
    facts = graded["oracle"][1]
    label_support = facts[facts["kind"] == "label"].groupby("value").size()
    labels = table[table["slice_kind"] == "label"].set_index("slice")
    assert sorted(labels.index) == sorted(label_support.index)  # every label, even with 1 fact
    assert labels["support"].to_dict() == label_support.to_dict()
    assert set(labels.index[labels["too_small"]]) == set(label_support.index[label_support < 20])
    assert labels.loc["ux", "too_small"] and labels.loc["ux", "support"] == 1
    cues = table[table["slice_kind"] == "cue_word"].set_index("slice")
    assert sorted(cues.index) == sorted(("conflict", "contradict", "disagree", "inconsistent", "mismatch"))
    assert cues.loc["inconsistent", "too_small"] and not cues.loc["disagree", "too_small"]
    splits = table[table["slice_kind"] == "split"].set_index("slice")
    assert splits.loc[["train", "tune"], "support"].tolist() == [0, 0]
    assert splits.loc[["train", "tune"], "too_small"].all() and splits.loc["test", "records"] == 680
    assert set(table.loc[table["too_small"], "slice_kind"]) >= {"label", "cue_word", "split", "fact_kind"}
    # too-small rows come after the judged ones within each kind
    for _, group in table.groupby("slice_kind", sort=False):
        assert group["too_small"].is_monotonic_increasing


def test_intervals_hold_their_point_estimates(tables):
    for table in tables.values():
        # issue 9: slices in too few components get no interval (NaN), never a certain point
        assert (
            table.loc[~table["estimable"], ["ci_low", "ci_high", "precision_ci_low", "recall_ci_high", "exact_ci_low", "p_value"]]
            .isna()
            .all()
            .all()
        )
        assert not table.loc[~table["estimable"], "weak"].any()
        judged = table[(table["support"] > 0) & table["estimable"]]
        for metric, low, high in (
            ("precision", "precision_ci_low", "precision_ci_high"),
            ("recall", "recall_ci_low", "recall_ci_high"),
            ("exact_rate", "exact_ci_low", "exact_ci_high"),
        ):
            ok = judged[metric].isna() | ((judged[low] <= judged[metric] + 1e-12) & (judged[metric] <= judged[high] + 1e-12))
            assert ok.all(), metric
        assert (judged["ci_low"] == judged["f1_ci_low"]).all()
        assert (judged["ci_low"] <= judged["ci_high"]).all()


def test_bootstrap_is_deterministic_given_the_seed(graded, s8f_corpus, records):
    facts = graded["all_faults"][1]
    first = slices.slice_table(facts, s8f_corpus, records=records, seed=7, n_boot=300)
    again = slices.slice_table(facts, s8f_corpus, records=records, seed=7, n_boot=300)
    other = slices.slice_table(facts, s8f_corpus, records=records, seed=8, n_boot=300)
    pd.testing.assert_frame_equal(first, again)
    assert not np.allclose(first["ci_low"].fillna(-1), other["ci_low"].fillna(-1))
    assert "n_boot=300, seed=7" in first["ci_method"].iat[0]


def test_bootstrap_resamples_split_components_not_records(s8f_answers, s8f_corpus, records):
    """11 missed states inside one split component vary together; 11 in singleton components do not.

    Wilson (facts as independent trials) cannot tell the two apart; the component bootstrap
    must give the clustered errors the wider F1 interval (a record bootstrap would not).
    """
    test = records[records["split"] == "test"]
    clustered = set(test.loc[test["component"] == 5299, "id"])
    spread = set(test.loc[test["component_size"] == 1, "id"].iloc[:11])
    assert len(clustered) == len(spread) == 11
    rows = []
    for ids in (clustered, spread):
        sub = copy.deepcopy(s8f_answers)
        for a in sub["answers"]:
            if a["id"] in ids:
                a["state"] = None
        table = slices.slice_table(slices.facts_frame(grade(s8f_answers, sub).facts), s8f_corpus, records=records)
        rows.append(_row(table, "fact_kind", "state"))
    (c, s) = rows
    assert c["fn"] == s["fn"] == 11 and c["f1"] == s["f1"]
    # Wilson would give both the same interval; the component bootstrap widens the clustered one
    assert slices.wilson_interval(669, 680) == slices.wilson_interval(669, 680)
    assert (c["recall_ci_high"] - c["recall_ci_low"]) > 1.3 * (s["recall_ci_high"] - s["recall_ci_low"])
    assert (c["ci_high"] - c["ci_low"]) > 1.3 * (s["ci_high"] - s["ci_low"])


def test_a_grade_of_another_corpus_gives_an_empty_table(s8f_answers, s8f_corpus, records):
    bound_elsewhere = dict(copy.deepcopy(s8f_answers), corpus_sha256="0" * 64)
    facts = slices.facts_frame(grade(s8f_answers, bound_elsewhere).facts)
    table = slices.slice_table(facts, s8f_corpus, records=records)
    assert table["support"].sum() == 0 and table["fp"].sum() == 0
    assert table["too_small"].all() and not table["weak"].any()


def test_slice_frame_answers_which_group_is_worst(graded, s8f_corpus, records):
    frame = slices.slice_frame(graded["no_enhancement"][1], s8f_corpus, records=records)
    assert frame.overall["slice_kind"] == "overall"
    assert frame.overall["f1"] == pytest.approx(2 * 4163 / (2 * 4163 + 163))
    assert frame.group_min("f1")["label"] == 0.0
    assert frame.difference("f1")["label"] == 1.0
    label_f1 = 2 * 1890 / (2 * 1890 + 163)  # the label kind lost its 163 enhancement facts
    assert frame.difference("f1", method="to_overall")["fact_kind"] == pytest.approx(frame.overall["f1"] - label_f1)
    assert frame.weakest(1).index.tolist() == [("label", "enhancement")]
    assert ("label", "ux") not in frame.by_group[~frame.by_group["too_small"]].index
    assert len(frame.too_small()) == int(frame.table["too_small"].sum())


def test_group_by_any_record_column(graded, s8f_corpus, records):
    table = slices.slice_table(graded["no_enhancement"][1], s8f_corpus, records=records, group_by=("labels",))
    by_label = table[table["slice_kind"] == "labels"].set_index("slice")
    # every fact of records carrying 'enhancement': their enhancement facts are all missed
    assert by_label.loc["enhancement", "fn"] == 163
    assert by_label.loc["enhancement", "records"] == 163
    assert by_label.loc["enhancement", "weak"]
    assert table["slice_kind"].iat[-1] == "labels"
    with pytest.raises(ValueError, match="not a record_table column"):
        slices.slice_table(graded["oracle"][1], s8f_corpus, records=records, group_by=("colour",))


# ---------------------------------------------------------------- statistics


def test_wilson_interval_known_values():
    assert slices.wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=5e-5)
    assert slices.wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=5e-5)
    assert slices.wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=5e-5)
    assert slices.wilson_interval(81, 263) == pytest.approx((0.2553, 0.3662), abs=5e-5)
    assert all(math.isnan(x) for x in slices.wilson_interval(0, 0))


def test_mcnemar_exact_known_values():
    assert slices.mcnemar_exact(0, 0) == 1.0
    assert slices.mcnemar_exact(0, 5) == 0.0625  # 2 * (1/2)^5
    assert slices.mcnemar_exact(9, 1) == pytest.approx(2 * 11 / 1024)
    assert slices.mcnemar_exact(3, 3) == 1.0
    assert slices.mcnemar_exact(2, 8) == slices.mcnemar_exact(8, 2) == pytest.approx(2 * 56 / 1024)


# ---------------------------------------------------------------- comparing candidates


def test_compare_table_stacks_candidates(graded, s8f_corpus, records, tables):
    compared = slices.compare_table(
        {"oracle": graded["oracle"][1], "no_enhancement": graded["no_enhancement"][1]}, s8f_corpus, records=records
    )
    assert list(compared.columns) == ["candidate", *slices.SLICE_COLUMNS]
    assert compared["candidate"].unique().tolist() == ["oracle", "no_enhancement"]
    again = compared[compared["candidate"] == "no_enhancement"].drop(columns="candidate").reset_index(drop=True)
    pd.testing.assert_frame_equal(again, tables["no_enhancement"])


def test_paired_comparison_finds_the_planted_difference(graded, s8f_corpus, records):
    paired = slices.paired_comparison(graded["oracle"][1], graded["no_enhancement"][1], s8f_corpus, records=records)
    assert list(paired.columns) == list(slices.PAIRED_COLUMNS)
    enhancement = _row(paired, "label", "enhancement")
    assert enhancement["f1_diff"] == 1.0 and enhancement["f1_diff_ci_low"] == 1.0
    assert (enhancement["b10"], enhancement["b01"]) == (163, 0)
    overall = _row(paired, "overall", "all")
    assert overall["f1_diff"] > 0 and overall["f1_diff_ci_low"] > 0 and overall["f1_diff_excludes_zero"]
    assert (overall["records"], overall["exact_a"], overall["exact_b"], overall["b10"], overall["b01"]) == (680, 680, 517, 163, 0)
    # issue 9: the component sign-flip test replaces McNemar's 2 * 0.5 ** 163 (records as independent
    # trials): the 163 records sit in 41 components, more than 12, so 10,000 random flips, none as extreme
    assert overall["exact_p"] == overall["p_value"] == 1 / 10_001 and overall["significant"]
    untouched = _row(paired, "fact_kind", "ref")
    assert (untouched["f1_diff"], untouched["exact_p"], untouched["p_value"], untouched["f1_diff_excludes_zero"]) == (
        0.0,
        1.0,
        1.0,
        False,
    )
    assert set(paired.loc[paired["f1_diff_excludes_zero"], "slice_kind"]) >= {"overall", "fact_kind", "label"}
    # the reverse comparison mirrors it
    reverse = slices.paired_comparison(graded["no_enhancement"][1], graded["oracle"][1], s8f_corpus, records=records)
    assert _row(reverse, "label", "enhancement")["f1_diff_ci_high"] == -1.0
    assert (_row(reverse, "overall", "all")[["b10", "b01"]] == [0, 163]).all()


def test_paired_comparison_counts_both_sides(graded, s8f_corpus, records):
    """Two different imperfect candidates: each is better somewhere, and the fp-only label is shared."""
    paired = slices.paired_comparison(graded["no_enhancement"][1], graded["false_positives"][1], s8f_corpus, records=records)
    fake = _row(paired, "label", FAKE_LABEL)
    assert (fake["support"], fake["records"], fake["b10"], fake["b01"], fake["too_small"]) == (0, 30, 30, 0, True)
    enhancement = _row(paired, "label", "enhancement")
    assert enhancement["f1_diff"] == -1.0 and enhancement["b01"] == 163


def test_paired_comparison_needs_the_same_gold(graded, s8f_corpus, records):
    other_gold = graded["oracle"][1]
    other_gold = other_gold[other_gold["kind"] != "dup"]
    with pytest.raises(InputError, match="same answers"):
        slices.paired_comparison(graded["oracle"][1], other_gold, s8f_corpus, records=records)


def test_write_slices_csv_is_atomic_and_reads_back(tmp_path, tables):
    path = tmp_path / "slices.csv"
    slices.write_slices_csv(tables["no_enhancement"], path)
    back = pd.read_csv(path, keep_default_na=False, na_values=[""])
    assert back.columns.tolist() == list(slices.SLICE_COLUMNS)
    assert len(back) == len(tables["no_enhancement"])
    assert back["weak"].sum() == tables["no_enhancement"]["weak"].sum() == 4 and back["slice"].iat[0] == "all"
    assert [p.name for p in tmp_path.iterdir()] == ["slices.csv"]
    with pytest.raises(InputError, match="output folder does not exist"):
        slices.write_slices_csv(tables["oracle"], tmp_path / "nowhere" / "slices.csv")
