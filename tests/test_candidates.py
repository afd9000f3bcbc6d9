"""The built-in candidates (exact-sql, text-only), the devkit and the candidate registry, on s8f."""

from __future__ import annotations

import csv
import json
from collections import Counter, defaultdict

import pytest

from microctx.candidates.devkit import make_devkit
from microctx.candidates.registry import resolve
from microctx.cli import main
from microctx.contract import patterns as facts
from microctx.contract.canonical import dumps
from microctx.contract.schemas import load_answers
from microctx.errors import InputError


@pytest.fixture(scope="module")
def runs(s8f, s8f_corpus, tmp_path_factory):
    """Both built-ins run once through the CLI, graded through the CLI; exit codes kept."""
    folder = tmp_path_factory.mktemp("runs")
    codes = {}
    codes["devkit"] = main(
        [
            "devkit",
            "--answers",
            str(s8f.answers),
            "--splits",
            "train,tune",
            "--output",
            str(folder / "devkit.json"),
            "--public",
            str(s8f.public),
        ]
    )
    for name, extra in (("exact-sql", []), ("text-only", ["--devkit", str(folder / "devkit.json")])):
        sub, grade = folder / f"{name}.json", folder / f"{name}.grade.json"
        codes[f"run {name}"] = main(["run", name, "--public", str(s8f.public), "--submission", str(sub), *extra])
        codes[f"grade {name}"] = main(["grade", "--answers", str(s8f.answers), "--submission", str(sub), "--output", str(grade)])
    return folder, codes


def _read(folder, name):
    return json.loads((folder / name).read_text())


def test_exact_sql_passes_the_quality_floor(runs):
    folder, codes = runs
    assert codes["run exact-sql"] == 0 and codes["grade exact-sql"] == 0
    grade = _read(folder, "exact-sql.grade.json")
    assert (grade["test_records"], grade["exact_records"]) == (680, 680)
    assert grade["false_positive_facts"] == grade["false_negative_facts"] == 0
    assert grade["aggregate_errors"] == grade["citation_errors"] == 0 and grade["quality_pass"] is True
    manifest = _read(folder, "exact-sql.run.json")
    assert manifest["ok"] and manifest["counters"] == {"model_calls": 0, "tool_calls": 6, "input_tokens": 0, "output_tokens": 0}


def test_exact_sql_matches_the_gold_answers_of_every_split(runs, s8f_answers, s8f_corpus):
    # DuckDB's RE2 and lower() against microctx.contract.patterns, and against the gold, on all 1,000 records
    submission = _read(runs[0], "exact-sql.json")
    for record, answer in zip(s8f_corpus.records, submission["answers"], strict=True):
        text = facts.issue_text(record["title"], record["body"])
        assert (answer["references"], answer["duplicate_targets"], answer["scope_contradictions"]) == (
            facts.references(text),
            facts.duplicate_targets(text),
            facts.scope_contradictions(record["body"]),
        ), record["id"]
    assert submission["answers"] == s8f_answers["answers"]
    assert submission["aggregates"] == s8f_answers["aggregates"]


TRICKY = [
    ("#1#2 x#3 _#4 é#5 \u017f#6 \u212a#7 (#8) #12345678 #1234567", "a\n#9"),
    ("Duplicate  #11", "DUPLICATED\tof\n#12 duplicates #13 xduplicate of #14 duplicate of #15x"),
    ("\u017fuper\u017feded by #16", "SUPERSEDED BY #17 superseds by #18 duplicate\u000bof #19 duplicate\u00a0#20"),
    ("cue words", "\u0130NCONS\u0130STENT and CONFLICTS; MisMatch; contra dict; DISAGREEMENT"),
    ("title with #0 and #00012", "no cues here; \u212aelvin; inconsistEnt"),
]


def test_exact_sql_regexes_and_lower_agree_with_the_contract_on_planted_text(tmp_path):
    from microctx.candidates.builtins.exact_sql import answer_corpus

    records = [
        {
            "id": f"issue-{i}",
            "split": "test",
            "number": i,
            "title": title,
            "body": body,
            "created_at": f"2026-01-0{i}T00:00:00Z",
            "updated_at": f"2026-02-0{i}T00:00:00+02:00",
            "url": "u",
            "state": "OPEN",
            "labels": None,
            "closed_at": None,
            "title_sha256": "",
            "body_sha256": "",
        }
        for i, (title, body) in enumerate(TRICKY, start=1)
    ]
    path = tmp_path / "tricky.json"
    path.write_bytes(dumps({"schema": "fak-microcontext-corpus/1", "source": "t", "frozen_at": "", "records": records}))
    submission, _ = answer_corpus(str(path))
    for record, answer in zip(records, submission["answers"]):
        text = facts.issue_text(record["title"], record["body"])
        assert answer["references"] == facts.references(text), record["title"]
        assert answer["duplicate_targets"] == facts.duplicate_targets(text), record["title"]
        assert answer["scope_contradictions"] == facts.scope_contradictions(record["body"]), record["title"]
    # exact expectations, so that a shared mistake in both would still show
    assert submission["answers"][0]["references"] == [1, 5, 8, 9, 1234567]
    assert submission["answers"][1]["duplicate_targets"] == [11, 12, 13]
    assert submission["answers"][2]["duplicate_targets"] == [17]
    assert submission["answers"][3]["scope_contradictions"] == ["conflict", "disagree", "inconsistent", "mismatch"]
    assert submission["answers"][4]["references"] == [12]
    # updated_at +02:00 on day i is an instant before day i's midnight UTC: order by instant, not text
    assert submission["aggregates"]["most_recently_updated_issue_ids"] == [f"issue-{i}" for i in (5, 4, 3, 2, 1)]
    assert submission["aggregates"]["label_counts"] == {} and submission["aggregates"]["state_counts"] == {"OPEN": 5}


def _per_value(folder, name):
    counts = defaultdict(Counter)
    with open(folder / name, newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["kind"], row["value"]) if row["kind"] in ("state", "label") else (row["kind"], "")
            counts[key][row["outcome"]] += 1
    return counts


def test_text_only_is_valid_and_fails_where_metadata_is_hidden(runs, s8f_answers):
    folder, codes = runs
    assert codes["run text-only"] == 0 and codes["grade text-only"] == 1
    grade = _read(folder, "text-only.grade.json")
    assert grade["quality_pass"] is False and grade["test_records"] == 680 and grade["citation_errors"] == 0
    assert 0 < grade["exact_records"] < 680
    counts = _per_value(folder, "text-only.grade.facts.csv")
    for kind in ("ref", "dup", "contradiction"):  # by regex: exact
        assert counts[(kind, "")]["fp"] == counts[(kind, "")]["fn"] == 0 and counts[(kind, "")]["tp"] > 0
    gold = Counter(label for a in s8f_answers["answers"] if a["split"] == "test" for label in a["labels"])
    learned = {v for (k, v), c in counts.items() if k == "label" and c["tp"] > 0}
    assert "class:dev" in learned  # the commonest label is learned
    never = {label for label in gold if label not in learned}
    assert len(never) > len(learned)  # most labels are never predicted right
    rare = [label for label, n in gold.items() if n <= 5]
    assert rare and all(label in never for label in rare)
    assert counts[("state", "CLOSED")]["tp"] > 0 and counts[("state", "OPEN")]["fn"] > 0
    manifest = _read(folder, "text-only.run.json")
    assert manifest["devkit_sha256"] is not None and "label models" in manifest["output_tail"]


def test_text_only_never_reads_state_labels_or_closed_at(runs, s8f_corpus, s8f_answers):
    # hide them from the public records: the predictions for test records stay the same
    from microctx.candidates.builtins.text_only import predict_submission

    blank = [{**r, "state": "OPEN", "labels": None, "closed_at": None} for r in s8f_corpus.records]
    devkit = make_devkit(s8f_answers)
    submission, model = predict_submission(blank, devkit, s8f_corpus.sha256)
    ran = {a["id"]: a for a in _read(runs[0], "text-only.json")["answers"]}
    test_ids = [a["id"] for a in s8f_answers["answers"] if a["split"] == "test"]
    by_id = {a["id"]: a for a in submission["answers"]}
    assert [by_id[i] for i in test_ids] == [ran[i] for i in test_ids]
    assert model.skipped_labels_ and model.label_models_


def test_devkit_holds_train_and_tune_only(runs, s8f_answers):
    folder, codes = runs
    assert codes["devkit"] == 0
    devkit = load_answers(folder / "devkit.json")
    assert devkit["corpus_sha256"] == s8f_answers["corpus_sha256"]
    assert Counter(a["split"] for a in devkit["answers"]) == {"train": 212, "tune": 108}
    assert devkit["aggregates"]["state_counts"] == {"CLOSED": 200, "OPEN": 120}
    assert devkit["aggregates"]["label_counts"]["class:dev"] == 208  # 124 train + 84 tune, not 711
    assert "trust-floor" in devkit["aggregates"]["label_counts"] and "moe" not in devkit["aggregates"]["label_counts"]
    gold_test_top = set(s8f_answers["aggregates"]["newest_issue_ids"])
    kept = {a["id"] for a in devkit["answers"]}
    assert set(devkit["aggregates"]["newest_issue_ids"]) <= kept and len(devkit["aggregates"]["newest_issue_ids"]) == 10
    assert gold_test_top - kept  # the gold list has test ids; the devkit's has none


def test_devkit_refuses_test_and_unknown_splits(s8f_answers, s8f, tmp_path):
    for splits in (("train", "test"), ("test",), ("validation",), ()):
        with pytest.raises(InputError):
            make_devkit(s8f_answers, splits)
    assert main(["devkit", "--answers", str(s8f.answers), "--splits", "tune,test", "--output", str(tmp_path / "d.json")]) == 2
    assert not (tmp_path / "d.json").exists()
    only_tune = make_devkit(s8f_answers, ["tune"])
    assert len(only_tune["answers"]) == 108 and only_tune["aggregates"]["newest_issue_ids"] == []


def test_registry_resolves_names_and_refuses_unknowns():
    assert resolve("exact-sql").params == {"threads": 1}
    assert resolve("text-only", {"alpha": 0.001}).params["alpha"] == 0.001
    assert resolve("label", cmd="python x.py {public} {submission}").kind == "command"
    assert resolve("microctx.candidates.builtins.exact_sql:run").kind == "function"
    for name, params in (("exact-sql", {"bogus": 1}), ("nope", None), ("no_such_module_xyz:run", None), ("m:1x", None)):
        with pytest.raises(InputError):
            resolve(name, params)
