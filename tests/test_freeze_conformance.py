"""Conformance: the published public corpus, turned back into a raw export and frozen, gives the
published public corpus and answer bundle byte for byte, and a report with the published counts."""

from __future__ import annotations

import hashlib
import random
import re
from pathlib import Path

import orjson
import pytest

from microctx.cli import main
from microctx.corpus import snapshot as data
from microctx.corpus.export import parse_export
from microctx.corpus.freeze import freeze
from microctx.corpus.public import corpus_to_export

PUBLIC_SHA = "0740c911815eba7e44c63a14e021f418b66e8a42556d40f14b8b4cd58f173827"
ANSWERS_SHA = "af827ddca1063c602153f80b14523bda8d07e1a7e909a5c487616f2702eda05d"


def sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def to_rest(row: dict) -> dict:
    """A gh export row as the GitHub REST API writes the issue."""
    return {
        "url": f"https://api.github.com/repos/o/r/issues/{row['number']}",
        "html_url": row["url"],
        "number": row["number"],
        "title": row["title"],
        "body": row["body"] or None,
        "state": row["state"].lower(),
        "labels": [{"id": 1, "name": label["name"], "color": "fff"} for label in row["labels"]],
        "created_at": row["createdAt"],
        "updated_at": row["updatedAt"],
        "closed_at": row["closedAt"],
        "user": {"login": "someone"},
    }


@pytest.fixture(scope="module")
def raw_rows(s8f_corpus):
    return corpus_to_export(s8f_corpus)


@pytest.fixture(scope="module")
def frozen_files(tmp_path_factory, raw_rows, s8f_corpus):
    folder = tmp_path_factory.mktemp("freeze")
    raw = folder / "raw.json"
    raw.write_bytes(orjson.dumps(raw_rows, option=orjson.OPT_INDENT_2))
    out = {k: folder / f"{k}.json" for k in ("public", "answers", "report")}
    code = main(
        [
            "freeze",
            str(raw),
            "--public",
            str(out["public"]),
            "--answers",
            str(out["answers"]),
            "--report",
            str(out["report"]),
            "--source",
            s8f_corpus.source,
        ]
    )
    assert code == 0
    return out


def test_cli_rebuild_is_byte_identical(frozen_files, s8f):
    assert sha(frozen_files["public"]) == PUBLIC_SHA
    assert sha(frozen_files["answers"]) == ANSWERS_SHA
    assert frozen_files["public"].read_bytes() == Path(s8f.public).read_bytes()
    assert frozen_files["answers"].read_bytes() == Path(s8f.answers).read_bytes()


def test_report_counts_equal_published(frozen_files, s8f):
    mine = orjson.loads(frozen_files["report"].read_bytes())
    published = orjson.loads(Path(s8f.report).read_bytes())
    assert list(mine) == list(published)  # same keys, same order
    # scrubbed_matches counts the original private matches, which a rebuild cannot see.
    same = [k for k in published if k not in ("scrubbed_matches", "question_slices", "provenance")]
    assert {k: mine[k] for k in same} == {k: published[k] for k in same}
    assert (mine["records"], mine["train_records"], mine["tune_records"], mine["test_records"]) == (1000, 212, 108, 680)
    assert (mine["open_records"], mine["closed_records"]) == (380, 620)
    assert (mine["reference_edges"], mine["duplicate_edges"], mine["scope_contradictions"]) == (2037, 12, 102)
    assert (mine["scrubbed_records"], mine["scrubbed_matches"]) == (8, 0)


def test_rest_api_shape_source_order_and_pull_requests(raw_rows, s8f_corpus):
    rows = [to_rest(r) for r in raw_rows]
    random.Random(7).shuffle(rows)  # the assignment must not depend on source order
    rows.insert(3, dict(to_rest(raw_rows[0]), number=999999, pull_request={"url": "x"}))
    frozen = freeze(parse_export(rows, "rest.json"), s8f_corpus.source)
    assert (frozen.public_sha256, frozen.answers_sha256) == (PUBLIC_SHA, ANSWERS_SHA)


def test_redaction_map_counts_and_replaces(tmp_path, raw_rows):
    rules = tmp_path / "map.toml"
    rules.write_text('[[rule]]\npattern = "DuckDB|sqlite"\nreplacement = "[redacted:public-corpus]"\n')
    from microctx.corpus.redact import load_rules

    plain = freeze(parse_export(raw_rows), "s")
    redacted = freeze(parse_export(raw_rows), "s", load_rules(rules))
    expected_matches = sum(len(re.findall("duckdb|sqlite", r["title"] + "\0" + r["body"], re.I)) for r in raw_rows)
    touched = sum(
        bool(re.search("duckdb|sqlite", r["body"], re.I)) or "[redacted:public-corpus]" in r["title"] + r["body"]
        for r in raw_rows
    )
    assert redacted.report["scrubbed_matches"] == expected_matches > 0
    assert redacted.report["scrubbed_records"] == touched > plain.report["scrubbed_records"]
    text = orjson.dumps(redacted.public).decode().lower()
    assert "duckdb" not in text and "sqlite" not in text


def test_bad_redaction_map_is_refused(tmp_path, raw_rows, capsys):
    raw = tmp_path / "raw.json"
    raw.write_bytes(orjson.dumps(raw_rows))
    bad = tmp_path / "map.toml"
    bad.write_text('[[rule]]\npattern = "(unclosed"\nreplacement = "x"\n')
    code = main(
        [
            "freeze",
            str(raw),
            "--public",
            str(tmp_path / "p.json"),
            "--answers",
            str(tmp_path / "a.json"),
            "--report",
            str(tmp_path / "r.json"),
            "--source",
            "s",
            "--redactions",
            str(bad),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "map.toml" in err and "'rule[0].pattern'" in err
    assert not list(tmp_path.glob("[par].json"))


def test_data_registry_matches_shared_readme(s8f):
    if not (Path(s8f.public).parent / "README.md").is_file():
        pytest.skip("no s8f README beside the data (a lone clone downloads only the three files)")
    readme = (Path(s8f.public).parent / "README.md").read_text()
    for item in data.S8F.values():
        row = next(line for line in readme.splitlines() if line.startswith(f"| {item.name} "))
        assert item.sha256 in row and item.commit in row
