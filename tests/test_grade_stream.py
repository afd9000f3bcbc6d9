"""The streamed fact table: the same rows in the same order as the whole table, written in
pieces, and published with the grade (both or neither)."""

from __future__ import annotations

import pytest

from microctx.contract.facts import StreamedFacts, facts_csv, facts_path
from microctx.contract.score import grade
from microctx.grading.examples import planted_submission


def test_streamed_rows_are_the_whole_table(tmp_path, s8f_answers):
    sub = planted_submission(s8f_answers)
    whole = grade(s8f_answers, sub)
    out = tmp_path / "g" / "grade.json"
    with StreamedFacts(out, rows_per_write=7) as table:  # many small writes
        streamed = grade(s8f_answers, sub, rows_to=table)
        table.grade = streamed.grade
    assert streamed.grade == whole.grade and streamed.facts == []
    assert len(whole.facts) > 1000 and any(r.kind == "citation" for r in whole.facts)
    assert (tmp_path / "g" / "grade.facts.csv").read_bytes() == facts_csv(whole.facts)
    assert out.read_bytes().startswith(b"{\n")


def test_a_failure_publishes_neither(tmp_path, s8f_answers):
    out = tmp_path / "grade.json"
    out.write_bytes(b"old grade")
    with pytest.raises(RuntimeError), StreamedFacts(out, rows_per_write=3) as table:
        grade(s8f_answers, planted_submission(s8f_answers), rows_to=table)
        raise RuntimeError("the look could not be recorded")
    assert [p.name for p in tmp_path.iterdir()] == ["grade.json"] and out.read_bytes() == b"old grade"
    assert not (tmp_path / facts_path("grade.json")).exists()


def test_corpus_mismatch_keeps_its_row(tmp_path, s8f_answers):
    sub = dict(planted_submission(s8f_answers), corpus_sha256="0" * 64)
    with StreamedFacts(tmp_path / "grade.json") as table:
        result = grade(s8f_answers, sub, rows_to=table)
        table.grade = result.grade
    assert result.corpus_mismatch and result.summary().startswith("FAIL: the corpus digests differ")
    assert b"corpus" in (tmp_path / "grade.facts.csv").read_bytes()
