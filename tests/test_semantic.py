"""The semantic layer on s8f: study file, items, event log, agreement against independent
implementations, recovery of known truth by simulated annotators, Dawid-Skene, freeze and its
digests, the lexical rule against gold."""

from __future__ import annotations

import csv
import hashlib
import shutil
import sqlite3
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from semantic_sim import CARELESS, LABELS, adjudicate, adjudicate_to_truth, expected_kappa, good, simulate, truth_for

from microctx.errors import InputError
from microctx.semantic import events as ev
from microctx.semantic.figures import study_agreement
from microctx.semantic.items import StudyFolder, init_folder
from microctx.semantic.labels import annotator_labels, status
from microctx.semantic.study import parse_study

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "s8f-conflicts.toml"
N_BOOT = 2000


@pytest.fixture(scope="module")
def base_study(s8f, tmp_path_factory):
    out = tmp_path_factory.mktemp("study") / "s8f"
    init_folder(STUDY, s8f.public, s8f.answers, out)
    return out


@pytest.fixture
def study(base_study, tmp_path):
    """A fresh copy of the s8f study folder (its event log empty)."""
    shutil.copytree(base_study, tmp_path / "study")
    return StudyFolder(tmp_path / "study")


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "microctx", *map(str, args)], capture_output=True, text=True)


# ------------------------------------------------------------------ the study file and the items


def test_study_file_errors_name_the_file_the_key_and_what_was_expected(tmp_path):
    text = STUDY.read_text()
    with pytest.raises(InputError) as exc:
        parse_study(text.replace("overlap = 2 ", 'overlap = "two" '), "S.toml")
    assert str(exc.value).startswith("S.toml: field 'overlap': expected `int`, got `str`")
    with pytest.raises(InputError, match=r"S.toml: field 'question\[0\].positive': expected one of the labels"):
        parse_study(text.replace('positive = "yes"', 'positive = "maybe"', 1), "S.toml")
    with pytest.raises(InputError, match="field 'overlap': expected at least 2 and at most the 3 annotators"):
        parse_study(text.replace("overlap = 2 ", "overlap = 4 "), "S.toml")
    with pytest.raises(InputError, match=r"S.toml: field 'colour': expected a key the study file knows"):
        parse_study("colour = 1\n" + text, "S.toml")
    with pytest.raises(InputError, match=r"S.toml: field 'question\[1\].colour': expected a key"):
        parse_study(text + "\ncolour = 1\n", "S.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("overlap = 2 ", "overlap = 1 "))
    shutil.copy(STUDY.with_suffix(".md"), tmp_path / "s8f-conflicts.md")
    run = cli("study", "init", bad, "--public", "x", "--answers", "y", "--out", tmp_path / "o")
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "field 'overlap'" in run.stderr


def test_items_every_cue_record_every_duplicate_edge_and_a_stratified_sample(base_study, s8f):
    import json

    folder = StudyFolder(base_study)
    answers = json.loads(Path(s8f.answers).read_text())["answers"]
    cue = {a["id"] for a in answers if a["scope_contradictions"]}
    conflict = [i for i in folder.items.values() if i["question"] == "conflict"]
    assert {i["record_id"] for i in conflict} >= cue and len(cue) == 90
    sampled = [i for i in conflict if i["record_id"] not in cue]
    assert sorted(i["split"] for i in sampled) == ["test"] * 10 + ["train"] * 10 + ["tune"] * 10
    duplicates = sorted((i["record_id"], i["target"]) for i in folder.items.values() if i["question"] == "duplicate")
    assert duplicates == sorted((a["id"], t) for a in answers for t in a["duplicate_targets"]) and len(duplicates) == 12
    assert all(len(i["annotators"]) == 2 for i in folder.items.values())
    assert {a: len(v) for a, v in folder.document["assignments"].items()} == {"ann": 88, "ben": 88, "cat": 88}
    text = (base_study / "items.json").read_text()
    assert "scope_contradictions" not in text and "cue_words" not in text and "duplicate_targets" not in text


def test_init_is_seeded_and_refuses_an_existing_study(base_study, s8f, tmp_path):
    again = tmp_path / "again"
    init_folder(STUDY, s8f.public, s8f.answers, again)
    assert (again / "items.json").read_bytes() == (base_study / "items.json").read_bytes()
    with pytest.raises(InputError, match="exists and is not an empty folder"):
        init_folder(STUDY, s8f.public, s8f.answers, again)
    other = tmp_path / "other"
    init_folder(STUDY, s8f.public, s8f.answers, other, ["x1", "x2", "x3", "x4"])
    assert sorted(StudyFolder(other).annotators) == ["x1", "x2", "x3", "x4"]


def test_items_cli_csv(base_study):
    run = cli("study", "items", base_study, "--annotator", "ben")
    rows = list(csv.reader(run.stdout.splitlines()))
    assert rows[0] == ["item", "record_id", "question", "labels"] and len(rows) == 89
    assert all(r[3] == "yes|no|unsure" for r in rows[1:])
    assert cli("study", "items", base_study, "--annotator", "zed").returncode == 2


# ------------------------------------------------------------------ the event log


def test_event_log_is_append_only_and_undo_is_a_new_event(study):
    name = study.assigned("ann")[0]
    first, second = ev.append(
        study.events_path,
        [
            {"annotator": "ann", "item": name, "kind": "label", "label": "yes", "guideline_version": "1"},
            {"annotator": "ann", "item": name, "kind": "label", "label": "no", "guideline_version": "1"},
        ],
    )
    assert annotator_labels(study)[name] == {"ann": "no"}
    ev.append(study.events_path, [{"annotator": "ann", "item": name, "kind": "undo", "undoes": second, "guideline_version": "1"}])
    assert annotator_labels(study)[name] == {"ann": "yes"}
    assert len(ev.read(study.events_path)) == 3
    connection = sqlite3.connect(study.events_path)
    for statement in ("UPDATE events SET label = 'no'", "DELETE FROM events"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            connection.execute(statement)
    connection.close()
    # a label given under another guideline version is not this study's
    ev.append(study.events_path, [{"annotator": "ben", "item": name, "kind": "label", "label": "yes", "guideline_version": "0"}])
    assert "ben" not in annotator_labels(study)[name]


def test_annotate_cli_refuses_an_unassigned_item_and_an_unknown_label(study, tmp_path):
    mine, theirs = study.assigned("ann")[0], next(i for i in study.items if i not in study.assigned("ann"))
    for rows, expected in (([mine, "maybe"], "label 'maybe' is not one of"), ([theirs, "yes"], "is not assigned")):
        path = tmp_path / "labels.csv"
        path.write_text("item,label\n" + ",".join(rows) + "\n")
        run = cli("study", "annotate", study.path, "--annotator", "ann", "--from", path)
        assert run.returncode == 2 and expected in run.stderr and "labels.csv: record 2" in run.stderr
    assert ev.read(study.events_path) == []


# ------------------------------------------------------------------ agreement against independent implementations


def _reference_values(labels: dict[str, dict[str, str]], annotators: list[str]) -> dict[str, float]:
    import krippendorff
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    items = sorted(i for i, given in labels.items() if len(given) >= 2)
    code = {x: k for k, x in enumerate(LABELS)}
    matrix = np.array([[code[labels[i][a]] if a in labels[i] else np.nan for i in items] for a in annotators])
    counts = np.array([[sum(1 for x in labels[i].values() if x == lab) for lab in LABELS] for i in items])
    kappas = []
    for a, b in combinations(annotators, 2):
        both = [i for i in items if a in labels[i] and b in labels[i]]
        kappas.append(cohen_kappa_score([labels[i][a] for i in both], [labels[i][b] for i in both], labels=LABELS))
    per_item = [sorted(labels[i].values()) for i in items]
    assert aggregate_raters  # statsmodels' table builder; counts built directly (raters differ per item)
    return {
        "krippendorff_alpha": krippendorff.alpha(reliability_data=matrix, level_of_measurement="nominal"),
        "fleiss_kappa": fleiss_kappa(counts, method="fleiss"),
        "cohen_kappa": float(np.mean(kappas)),
        "percent": float(np.mean([float(p[0] == p[1]) for p in per_item])),
    }


def test_point_estimates_match_krippendorff_statsmodels_and_scikit_learn(study):
    truth = truth_for(study, 1)
    simulate(study, truth, {"ann": good(0.9), "ben": good(0.8), "cat": good(0.7)}, seed=2)
    labels = annotator_labels(study)
    rows = study_agreement(study, labels, n_boot=200)
    conflict = {i: x for i, x in labels.items() if study.items[i]["question"] == "conflict"}
    reference = _reference_values(conflict, study.annotators)
    measured = {r["measure"]: r["value"] for r in rows if r["question"] == "conflict" and r["slice_kind"] == "overall"}
    assert measured == pytest.approx(reference, abs=1e-12)
    # a slice: the test split alone
    test_items = {i: x for i, x in conflict.items() if study.items[i]["split"] == "test"}
    sliced = {r["measure"]: r["value"] for r in rows if r["question"] == "conflict" and r["slice"] == "test"}
    assert sliced == pytest.approx(_reference_values(test_items, study.annotators), abs=1e-12)


def test_simulated_annotators_agreement_recovers_the_truth_within_its_interval(study):
    confusions = {"ann": good(0.9), "ben": good(0.85), "cat": good(0.8)}
    truth = truth_for(study, 11)
    simulate(study, truth, confusions, seed=12)
    rows = study_agreement(study, annotator_labels(study), n_boot=N_BOOT)
    row = next(r for r in rows if r["question"] == "conflict" and r["slice_kind"] == "overall" and r["measure"] == "cohen_kappa")
    conflict = [truth[i] for i in truth if study.items[i]["question"] == "conflict"]
    shares = [conflict.count(x) / len(conflict) for x in LABELS]
    target = expected_kappa(confusions, shares)
    assert row["ci_low"] <= target <= row["ci_high"], (row, target)
    assert row["items"] == 120 and row["components"] < row["items"] and 0 < row["n_eff"] <= row["components"]
    # the interval rests on components: it is wider than an independent-items bootstrap would make it
    assert row["ci_high"] - row["ci_low"] > 0.1


def test_a_careless_annotator_is_flagged(study):
    from microctx.semantic.freeze import quality_rows

    truth = truth_for(study, 21)
    simulate(study, truth, {"ann": good(0.92), "ben": good(0.9), "cat": CARELESS}, seed=22)
    quality = {q["annotator"]: q for q in quality_rows(study, annotator_labels(study)) if q["question"] == "conflict"}
    assert [a for a, q in quality.items() if q["flagged"]] == ["cat"]
    duplicates = [q for q in quality_rows(study, annotator_labels(study)) if q["question"] == "duplicate"]
    assert (
        sum(q["labels"] for q in duplicates) == 24
        and max(q["labels"] for q in duplicates) < 20
        and not any(q["flagged"] for q in duplicates)
    )  # too few to judge
    assert quality["cat"]["kappa"] < 0.4 < 0.6 < min(quality["ann"]["kappa"], quality["ben"]["kappa"])


@pytest.mark.filterwarnings("ignore")  # crowd-kit calls pandas APIs that pandas deprecates
def test_dawid_skene_matches_crowd_kit():
    import pandas as pd
    from crowdkit.aggregation import DawidSkene

    from microctx.semantic.quality import dawid_skene

    rng = np.random.default_rng(5)
    triples = []
    for i in range(60):
        t = int(rng.choice(2, p=[0.4, 0.6]))
        for w, p in (("a", 0.9), ("b", 0.8), ("c", 0.75), ("d", 0.34)):
            if rng.random() < 0.8:
                triples.append((f"t{i:02d}", w, LABELS[t] if rng.random() < p else LABELS[int(rng.integers(3))]))
    for n in (1, 5, 30):
        mine = dawid_skene(triples, LABELS, max_iter=n, tol=0)
        theirs = DawidSkene(n_iter=n, tol=-1e9).fit(pd.DataFrame(triples, columns=["task", "worker", "label"]))
        present = [x for x in LABELS if x in theirs.probas_.columns]
        columns = [LABELS.index(x) for x in present]
        assert np.abs(theirs.probas_.loc[mine["items"], present].to_numpy() - mine["posteriors"][:, columns]).max() < 1e-6


# ------------------------------------------------------------------ freeze, the queue, digests, the lexical rule


def test_freeze_is_refused_until_complete_then_binds_every_input(study, s8f, tmp_path):
    from microctx.semantic.freeze import check_binding, load_semantic

    truth = truth_for(study, 31)
    left_out = ("ann", study.assigned("ann")[0])
    simulate(study, truth, {"ann": good(0.9), "ben": good(0.85), "cat": good(0.85)}, seed=32, skip={left_out})
    out = tmp_path / "semantic.json"
    run = cli("study", "freeze", study.path, "--out", out, "--n-boot", 200)
    assert run.returncode == 2 and "refused: 1 items lack a label" in run.stderr and not out.exists()
    ev.append(
        study.events_path,
        [{"annotator": "ann", "item": left_out[1], "kind": "label", "label": truth[left_out[1]], "guideline_version": "1"}],
    )
    queue = cli("study", "queue", study.path)
    rows = list(csv.DictReader(queue.stdout.splitlines()))
    assert queue.stdout.startswith("item,") and rows and len(rows) == len(status(study)["queue"])
    assert all("=" not in r["given"] for r in rows)  # annotator names hidden by default
    run = cli("study", "freeze", study.path, "--out", out, "--n-boot", 200)
    assert run.returncode == 2 and "disagreements lack an adjudication" in run.stderr
    decisions = adjudicate_to_truth(study, truth, [r["item"] for r in rows], tmp_path / "decisions.csv")
    assert cli("study", "adjudicate", study.path, "--from", decisions).returncode == 0
    run = cli("study", "freeze", study.path, "--out", out, "--n-boot", 200)
    assert run.returncode == 0, run.stderr
    semantic = load_semantic(out)
    assert len(semantic["gold"]) == 132 and {g["label"] for g in semantic["gold"]} <= {"yes", "no"}
    assert all(g["label"] == truth[g["item"]] for g in semantic["gold"] if g["via"] == "adjudicated")
    assert check_binding(semantic, s8f.public, s8f.answers, study.path) == []
    # the digests bind: another event, another answer file, another study file are each found
    ev.append(study.events_path, [{"annotator": "ben", "item": left_out[1], "kind": "skip", "guideline_version": "1"}])
    assert [p for p in check_binding(semantic, s8f.public, s8f.answers, study.path) if "events_sha256" in p]
    fake = tmp_path / "answers.json"
    fake.write_bytes(Path(s8f.answers).read_bytes() + b"\n")
    assert [p for p in check_binding(semantic, s8f.public, fake) if "answers_sha256" in p]
    (study.path / "study.toml").write_bytes((study.path / "study.toml").read_bytes() + b"\n")
    assert [p for p in check_binding(semantic, s8f.public, s8f.answers, study.path) if "study_sha256" in p]


def test_notes_and_labels_that_a_spreadsheet_would_run_are_written_as_text(study, tmp_path):
    """An annotator's note is free text (typed, or imported from a tool's export); the queue that the
    adjudicator opens in a spreadsheet writes a note starting `=`, `+`, `-` or `@` as text (a
    leading `'`), as every CSV microctx writes (csvout)."""
    from microctx._io.csvout import unescape_cell

    simulate(study, truth_for(study, 61), {"ann": good(0.6), "ben": good(0.6), "cat": good(0.6)}, seed=62)
    labels = annotator_labels(study)
    queued = [i for i in status(study)["queue"] if "ann" in study.items[i]["annotators"]]
    formulas = ["=cmd|' /C calc'!A0", '@SUM(1+1)*cmd|" /C calc"!A0', '+HYPERLINK("http://evil.example")', "-2+3"]
    given = tmp_path / "notes.csv"
    given.write_text(
        "item,label,note\n"
        + "".join(
            f'{item},{labels[item]["ann"]},"{note.replace(chr(34), chr(34) * 2)}"\n' for item, note in zip(queued, formulas)
        )
    )
    assert cli("study", "annotate", study.path, "--annotator", "ann", "--from", given).returncode == 0
    queue = cli("study", "queue", study.path)
    notes = {r["item"]: r["notes"] for r in csv.DictReader(queue.stdout.splitlines())}
    for item, note in zip(queued, formulas):
        assert notes[item] == "'" + note and unescape_cell(notes[item]) == note


def test_lexical_rule_against_gold_recovers_the_planted_precision(study, tmp_path):
    from semantic_sim import P_YES

    from microctx.semantic.figures import lexical_rows

    truth = truth_for(study, 41)
    gold = dict(truth)  # perfect adjudication: gold is the truth
    import json

    answers = json.loads(Path(study.document["sources"]["answers"]).read_text())
    rows = {
        (r["rule"], r["measure"]): r for r in lexical_rows(study, gold, answers, n_boot=N_BOOT) if r["question"] == "conflict"
    }
    assert rows[("conflict", "precision")]["items"] == 16 and rows[("any", "precision")]["items"] == 90
    by_id = {a["id"]: a for a in answers["answers"]}
    cued = [i for i in study.items.values() if i["question"] == "conflict" and by_id[i["record_id"]]["scope_contradictions"]]
    planted = np.mean([max(P_YES[w] for w in by_id[i["record_id"]]["scope_contradictions"]) for i in cued])
    row = rows[("any", "precision")]
    assert row["ci_low"] <= planted <= row["ci_high"]
    exact = np.mean([truth[i["item"]] == "yes" for i in cued])
    assert row["value"] == pytest.approx(exact)
    # recall: the sampled no-cue positives stand for their whole split's no-cue records
    recall = rows[("any", "recall")]
    assert 0 < recall["value"] <= 1 and recall["ci_low"] <= recall["value"] <= recall["ci_high"]


def test_agreement_cli_writes_the_pinned_columns(study, tmp_path):
    simulate(study, truth_for(study, 51), {"ann": good(0.9), "ben": good(0.9), "cat": good(0.9)}, seed=52)
    out = tmp_path / "agreement.csv"
    run = cli("study", "agreement", study.path, "--output", out, "--n-boot", 200)
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert list(rows[0]) == [
        "question",
        "slice_kind",
        "slice",
        "measure",
        "value",
        "ci_low",
        "ci_high",
        "items",
        "components",
        "n_eff",
    ]
    assert {r["measure"] for r in rows} == {"percent", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha"}
    assert {r["slice_kind"] for r in rows} == {"overall", "split", "state", "cue_word"}
    assert [r["question"] for r in rows if r["slice_kind"] == "overall"] == ["conflict"] * 4 + ["duplicate"] * 4


def test_grade_with_the_semantic_layer_puts_lexical_and_semantic_verdicts_side_by_side(study, s8f, tmp_path):
    import json

    from microctx.contract.schemas import SUBMISSION_SCHEMA
    from microctx.semantic.freeze import write_semantic

    truth = truth_for(study, 71)
    simulate(study, truth, {"ann": good(0.9), "ben": good(0.9), "cat": good(0.9)}, seed=72)
    adjudicate(study, truth, "simulated")
    semantic = tmp_path / "semantic.json"
    write_semantic(study.path, semantic, n_boot=200)
    answers = json.loads(Path(s8f.answers).read_text())
    gold = {g["item"]: g["label"] for g in json.loads(semantic.read_text())["gold"]}
    submission = {
        "schema": SUBMISSION_SCHEMA,
        "corpus_sha256": answers["corpus_sha256"],
        "answers": answers["answers"],
        "aggregates": answers["aggregates"],
    }  # the lexical gold itself, submitted
    path = tmp_path / "submission.json"
    path.write_text(json.dumps(submission))
    out = tmp_path / "grade.json"
    import os

    def grade(answers_path, output):
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "microctx",
                "grade",
                "--answers",
                answers_path,
                "--submission",
                path,
                "--output",
                output,
                "--semantic",
                semantic,
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "MICROCTX_LEDGER": str(tmp_path / "ledger.sqlite")},
        )

    run = grade(s8f.answers, out)
    assert run.returncode == 0, run.stderr
    rows = list(csv.DictReader((tmp_path / "grade.semantic.csv").read_text().splitlines()))
    test_items = [i for i, item in study.items.items() if item["split"] == "test"]
    assert sorted(r["item"] for r in rows) == sorted(test_items)
    by_id = {a["id"]: a for a in answers["answers"]}
    for r in rows:
        cued = bool(by_id[r["record_id"]]["scope_contradictions"]) if r["question"] == "conflict" else True
        assert r["lexical"] == ("tp" if cued else "tn")  # the lexical gold submitted is right by the lexical gold
        expected = {
            ("yes", "yes"): "tp",
            ("yes", "no"): "fp",
            ("no", "yes"): "fn",
            ("no", "no"): "tn",
            ("yes", "unsure"): "excluded",
            ("no", "unsure"): "excluded",
        }
        assert r["semantic"] == expected[("yes" if cued else "no", gold[r["item"]])]
    fp = sum(1 for r in rows if r["semantic"] == "fp")
    assert fp > 0 and "semantic layer: conflict" in run.stdout and "lexical precision 1.000 recall 1.000" in run.stdout
    # bound to other answers: refused
    other = tmp_path / "answers.json"
    other.write_bytes(Path(s8f.answers).read_bytes() + b" ")
    run = grade(other, tmp_path / "g2.json")
    assert run.returncode == 2 and "is bound to answers" in run.stderr
    # the slice table takes the layer too: the same side-by-side rows beside slices.csv
    argv = [
        "slices",
        "--public",
        s8f.public,
        "--answers",
        s8f.answers,
        "--submission",
        path,
        "--output",
        tmp_path / "slices.csv",
        "--semantic",
        semantic,
        "--n-boot",
        "200",
    ]
    run = subprocess.run(
        [sys.executable, "-m", "microctx", *map(str, argv)],
        capture_output=True,
        text=True,
        env={**os.environ, "MICROCTX_LEDGER": str(tmp_path / "ledger.sqlite")},
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "slices.semantic.csv").read_bytes() == (tmp_path / "grade.semantic.csv").read_bytes()


def test_recall_with_no_positive_in_the_no_cue_sample_is_bounded_not_certain(study):
    import json

    from microctx.semantic.figures import lexical_rows

    answers = json.loads(Path(study.document["sources"]["answers"]).read_text())
    by_id = {a["id"]: a for a in answers["answers"]}
    gold = {}
    for name, item in study.items.items():
        cued = item["question"] == "duplicate" or bool(by_id[item["record_id"]]["scope_contradictions"])
        gold[name] = "yes" if cued and hashlib.sha256(name.encode()).digest()[0] % 2 == 0 else "no"
    rows = {(r["rule"], r["measure"]): r for r in lexical_rows(study, gold, answers, n_boot=300) if r["question"] == "conflict"}
    recall = rows[("any", "recall")]
    positives = sum(1 for n, i in study.items.items() if i["question"] == "conflict" and gold[n] == "yes")
    no_cue = sum(1 for a in answers["answers"] if not a["scope_contradictions"])
    assert recall["value"] == 1.0 and no_cue == 910
    assert recall["ci_low"] == pytest.approx(positives / (positives + no_cue * (1 - 0.05 ** (1 / 30))))
    assert "no positive among the 30 sampled no-cue records" in recall["note"]


def test_the_adjudication_widget_needs_a_reason_hides_names_and_undoes(study):
    from microctx.semantic.widget import adjudicate

    pair = [i for i in study.items if study.items[i]["annotators"] == ["ben", "cat"]][:2]
    ev.append(
        study.events_path,
        [
            {"annotator": a, "item": i, "kind": "label", "label": x, "note": f"{a} thinks {x}", "guideline_version": "1"}
            for i in pair
            for a, x in (("ben", "yes"), ("cat", "no"))
        ],
    )
    widget = adjudicate(study.path)
    assert widget.progress == {"done": 0, "total": 2, "unit": "decided"} and widget.item["item"] == pair[0]
    assert sorted(widget.item["given"]) == ["no", "yes"] and "ben" not in str(widget.item["given"])
    widget._on_message(widget, {"action": "label", "label": "yes", "item": pair[0], "note": "  "}, [])
    assert "needs one of the labels and a reason" in widget.status and widget.progress["done"] == 0
    widget._on_message(widget, {"action": "label", "label": "yes", "item": pair[0], "note": "the body says so"}, [])
    assert widget.progress == {"done": 1, "total": 2, "unit": "decided"} and widget.item["item"] == pair[1]
    assert status(study)["gold"][pair[0]] == ("yes", "adjudicated")
    widget._on_message(widget, {"action": "undo"}, [])
    assert widget.progress == {"done": 0, "total": 2, "unit": "decided"} and pair[0] not in status(study)["gold"]
    assert [e["kind"] for e in ev.read(study.events_path)][-2:] == ["adjudicate", "undo"]
