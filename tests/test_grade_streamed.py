"""`microctx grade` reads the answer bundle record by record (issue 24): the same grade and fact
table bytes as the whole-document grade, the same ledger marks, and bad input still named by file,
record and field, also after many good records."""

from __future__ import annotations

import contextlib
import copy
import io
import tracemalloc
from pathlib import Path

import orjson
import pytest

from microctx._io.jsonscan import IrregularJSON, ObjectStream
from microctx.cli import main
from microctx.contract.canonical import dumps
from microctx.contract.facts import facts_csv
from microctx.contract.schemas import AnswerStream, CompactSubmission, load_answers, read_submission_compact
from microctx.contract.score import grade
from microctx.errors import InputError
from microctx.grading import ledger
from microctx.grading.examples import demo_submissions, example_kind


def _cli(*argv: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _reference_kind(answers: dict, submission: dict) -> str | None:
    """The decision by definition: the canonical bytes of a built example submission."""
    given = dumps(submission)
    return next((name for name, example in demo_submissions(answers).items() if dumps(example) == given), None)


def _variants(answers: dict) -> dict[str, tuple[dict, str | None]]:
    subs = demo_submissions(answers)
    oracle, planted = subs["oracle"], subs["planted"]
    one_fact = copy.deepcopy(oracle)
    one_fact["answers"][500]["labels"] = [*one_fact["answers"][500]["labels"], "bug?"]
    planted_fact = copy.deepcopy(planted)
    planted_fact["answers"][-2]["references"] = [*planted_fact["answers"][-2]["references"], 1]
    reordered = copy.deepcopy(oracle)
    first = reordered["answers"][0]
    reordered["answers"][0] = {"split": first["split"], **{k: v for k, v in first.items() if k != "split"}}
    float_count = copy.deepcopy(oracle)
    key = next(iter(float_count["aggregates"]["state_counts"]))
    float_count["aggregates"]["state_counts"][key] = float(float_count["aggregates"]["state_counts"][key])
    no_unknown = copy.deepcopy(planted)
    no_unknown["answers"].pop()
    extra = copy.deepcopy(oracle)
    extra["answers"].append(copy.deepcopy(extra["answers"][0]))
    keys_moved = {k: oracle[k] for k in ("corpus_sha256", "schema", "answers", "aggregates")}
    planted_aggregates = copy.deepcopy(planted)
    planted_aggregates["aggregates"] = copy.deepcopy(oracle["aggregates"])
    return {
        "oracle": (oracle, "oracle"),
        "planted": (planted, "planted"),
        "oracle, one fact added": (one_fact, None),
        "planted, one fact added": (planted_fact, None),
        "oracle, one record's keys reordered": (reordered, None),
        "oracle, a count as a float": (float_count, None),
        "planted without its unknown id": (no_unknown, None),
        "oracle and one record more": (extra, None),
        "oracle, top-level keys moved": (keys_moved, None),
        "planted with the gold aggregates": (planted_aggregates, None),
        "no answers": (dict(oracle, answers=[]), None),
    }


def test_example_kind_is_the_canonical_byte_comparison(s8f_answers):
    for name, (submission, expected) in _variants(s8f_answers).items():
        assert example_kind(s8f_answers, submission) == expected == _reference_kind(s8f_answers, submission), name


def test_the_streamed_bundle_is_the_parsed_bundle(s8f):
    whole = load_answers(s8f.answers)
    with AnswerStream(s8f.answers) as stream:
        assert stream.corpus_sha256 == whole["corpus_sha256"]
        assert list(stream.answers()) == whole["answers"]
        assert stream.aggregates() == whole["aggregates"]


@pytest.mark.parametrize("kind", ["oracle", "planted"])
def test_the_grade_command_writes_the_whole_grade_bytes(tmp_path, s8f, s8f_answers, kind):
    submission = demo_submissions(s8f_answers)[kind]
    path = tmp_path / f"{kind}.json"
    path.write_bytes(dumps(submission))
    whole = grade(s8f_answers, submission)
    # the published layout and the aggregates first (streamed), the answers first (read whole)
    layouts = [s8f.answers]
    for order in (("schema", "corpus_sha256", "aggregates", "answers"), ("answers", "schema", "corpus_sha256", "aggregates")):
        layouts.append(tmp_path / f"answers-{order[0]}-{order[2]}.json")
        layouts[-1].write_bytes(dumps({k: s8f_answers[k] for k in order}))
    with AnswerStream(layouts[1]):
        pass
    with pytest.raises(IrregularJSON):
        AnswerStream(layouts[2])
    for answers in layouts:
        out = tmp_path / f"{answers.stem}-{kind}.json"
        code, stdout, _ = _cli("grade", "--answers", answers, "--submission", path, "--output", out)
        assert code == (0 if kind == "oracle" else 1)
        assert out.read_bytes() == dumps(whole.grade)
        assert out.with_suffix(".facts.csv").read_bytes() == facts_csv(whole.facts)
        assert f"a {kind} look" in stdout
    assert [e["marked"] for e in ledger.entries()] == [kind] * 3


def test_a_changed_fact_is_a_counted_look(tmp_path, s8f):
    submission = _variants(load_answers(s8f.answers))["oracle, one fact added"][0]
    path = tmp_path / "sub.json"
    path.write_bytes(dumps(submission))
    code, _, _ = _cli("grade", "--answers", s8f.answers, "--submission", path, "--output", tmp_path / "g.json")
    assert code == 1 and [e["marked"] for e in ledger.entries()] == [None]


def _bad_bundle(tmp_path: Path, answers: dict, index: int, key: str, value: object) -> Path:
    bad = copy.deepcopy(answers)
    bad["answers"][index][key] = value
    path = tmp_path / "answers.json"
    path.write_bytes(dumps(bad))
    return path


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [("state", "MERGED", "expected OPEN or CLOSED, got 'MERGED'"), ("references", ["12"], "expected an array of numbers")],
)
def test_a_bad_record_after_many_good_ones_is_named(tmp_path, s8f_answers, key, value, says):
    index = len(s8f_answers["answers"]) - 3
    path = _bad_bundle(tmp_path, s8f_answers, index, key, value)
    rid = s8f_answers["answers"][index]["id"]
    with AnswerStream(path) as stream:  # streamed: the good records come first
        seen = []
        with pytest.raises(InputError) as caught:
            seen.extend(stream.answers())
    assert len(seen) == index
    assert caught.value.record == f"answers[{index}] ({rid})" and caught.value.field == key
    submission = tmp_path / "oracle.json"
    submission.write_bytes(dumps(demo_submissions(s8f_answers)["oracle"]))
    out = tmp_path / "out" / "g.json"
    code, _, err = _cli("grade", "--answers", path, "--submission", submission, "--output", out)
    assert code == 2 and str(path) in err and f"answers[{index}] ({rid})" in err and key in err and says in err
    assert not out.parent.exists() or not any(out.parent.iterdir())
    assert ledger.entries() == []


def test_bad_aggregates_after_the_records_are_named(tmp_path, s8f_answers):
    bad = copy.deepcopy(s8f_answers)
    bad["aggregates"]["newest_issue_ids"] = [1, 2]
    path = tmp_path / "answers.json"
    path.write_bytes(dumps(bad))
    submission = tmp_path / "oracle.json"
    submission.write_bytes(dumps(demo_submissions(s8f_answers)["oracle"]))
    code, _, err = _cli("grade", "--answers", path, "--submission", submission, "--output", tmp_path / "g.json")
    assert code == 2 and "aggregates" in err and "newest_issue_ids" in err and "expected an array of id strings" in err
    assert not (tmp_path / "g.json").exists() and ledger.entries() == []


def test_a_truncated_bundle_is_bad_json(tmp_path, s8f):
    path = tmp_path / "answers.json"
    path.write_bytes(s8f.answers.read_bytes()[:-200])
    submission = tmp_path / "sub.json"
    submission.write_bytes(b'{"corpus_sha256": "x", "answers": []}')
    code, _, err = _cli("grade", "--answers", path, "--submission", submission, "--output", tmp_path / "g.json")
    assert code == 2 and str(path) in err and "not valid JSON" in err


def _stream(tmp_path: Path, text: bytes, block_size: int = 7) -> tuple[dict, list, dict | None]:
    path = tmp_path / "doc.json"
    path.write_bytes(text)
    with ObjectStream(path, "items", block_size) as stream:
        items = list(stream.items())
        return stream.head, items, stream.tail


def test_object_stream_reads_head_items_and_tail(tmp_path):
    doc = {"a": 1, "items": [{"id": "x", "v": "},{"}, {"id": "y", "v": [1, {"z": "]"}]}], "tail": {"k": [1, 2]}, "t2": "}"}
    head, items, tail = _stream(tmp_path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    assert (head, items, tail) == ({"a": 1}, doc["items"], {"tail": {"k": [1, 2]}, "t2": "}"})
    assert _stream(tmp_path, b'{"a": 1, "items": [] }') == ({"a": 1}, [], {})
    for bad in (
        b'{"a": 1, "items": [{"id": 1}], "a": 2}',  # a key repeated after the list
        b'{"a": 1, "items": [{"id": 1}], "items": []}',
        b'{"a": 1, "items": [{"id": 1}] "b": 2}',
        b'{"a": 1, "items": [{"id": 1}], "b": 2} x',
        b'{"a": 1, "items": [{"id": 1}],}',
    ):
        with pytest.raises(IrregularJSON):
            _stream(tmp_path, bad)


def test_the_compact_submission_is_the_parsed_one(tmp_path, s8f_answers):
    planted = demo_submissions(s8f_answers)["planted"]
    path = tmp_path / "planted.json"
    path.write_bytes(dumps(planted))
    streamed, whole = read_submission_compact(path), CompactSubmission.of(planted)
    assert (streamed.top, streamed.encoded, streamed.ids) == (whole.top, whole.encoded, whole.ids)
    assert list(streamed.top) == list(planted) and streamed.encoded is not None
    assert [orjson.loads(e) for e in streamed.encoded] == planted["answers"]
    assert streamed.answer(planted["answers"][3]["id"]) == planted["answers"][3] and streamed.answer("nope") is None
    tracemalloc.start()  # each answer holds its bytes, not the buffer orjson wrote them into (~4 kB each)
    try:
        held = read_submission_compact(path)
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held.encoded is not None and size < 3 * sum(map(len, held.encoded)), size


def test_a_bad_submission_record_after_many_good_ones_is_named(tmp_path, s8f, s8f_answers):
    oracle = demo_submissions(s8f_answers)["oracle"]
    index = len(oracle["answers"]) - 2
    oracle["answers"][index]["labels"] = ["ok", 7]
    path = tmp_path / "sub.json"
    path.write_bytes(dumps(oracle))
    rid = oracle["answers"][index]["id"]
    out = tmp_path / "out" / "g.json"
    code, _, err = _cli("grade", "--answers", s8f.answers, "--submission", path, "--output", out)
    assert code == 2 and str(path) in err and f"answers[{index}] ({rid})" in err and "labels" in err
    assert not out.parent.exists() and ledger.entries() == []


def _deep_field(document: dict, depth: int) -> bytes:
    """`document` with a field of its own in its first answer, `depth` arrays deep (written as text:
    orjson cannot write it)."""
    text = dumps(document)
    head, rest = text.split(b'"id": ', 1)
    return head + b'"x": ' + b"[" * depth + b"]" * depth + b', "id": ' + rest


@pytest.mark.parametrize("depth", [254, 300, 1022])
def test_an_answer_nested_deeper_than_json_is_written_is_named(tmp_path, s8f, s8f_answers, depth):
    """An answer's own field nested past orjson's writing limit (254 levels with the answer's
    object) was a bug in microctx (exit 70, TypeError) in `grade` and `slices`, streamed or whole;
    1,022 levels also parsed in the stream (its batch is one level shallower than the file) and
    not whole. Now the field is named, exit 2, nothing written, no look."""
    oracle = demo_submissions(s8f_answers)["oracle"]
    path = tmp_path / "sub.json"
    path.write_bytes(_deep_field(oracle, depth))
    rid = oracle["answers"][0]["id"]
    out = tmp_path / "out" / "g.json"
    for argv in (
        ("grade", "--answers", s8f.answers, "--submission", path, "--output", out),
        ("slices", "--public", s8f.public, "--answers", s8f.answers, "--submission", path, "--output", out),
    ):
        code, _, err = _cli(*argv)
        assert code == 2 and str(path) in err, err
        if depth < 1022:
            assert f"answers[0] ({rid})" in err and "'x'" in err and "nested more than 254 levels" in err, err
        else:  # past the parser's own limit in the file: said as a whole parse says it, streamed or not
            assert "not valid JSON: depth limit exceeded" in err, err
    assert not out.parent.exists() and ledger.entries() == []
    ok = tmp_path / "ok.json"
    ok.write_bytes(_deep_field(oracle, depth - 1 if depth == 254 else 10))  # within the limit: graded
    assert _cli("grade", "--answers", s8f.answers, "--submission", ok, "--output", out)[0] == 0  # the oracle passes


def test_a_gold_answer_nested_too_deep_is_named(tmp_path, s8f_answers):
    bundle = tmp_path / "answers.json"
    bundle.write_bytes(_deep_field(s8f_answers, 300))
    submission = tmp_path / "oracle.json"  # shaped as the oracle: its answers are compared as bytes
    submission.write_bytes(dumps(demo_submissions(s8f_answers)["oracle"]))
    out = tmp_path / "out" / "g.json"
    code, _, err = _cli("grade", "--answers", bundle, "--submission", submission, "--output", out)
    assert code == 2 and str(bundle) in err and "'x'" in err and "nested" in err, err
    assert not out.parent.exists() or not any(out.parent.iterdir())
    assert ledger.entries() == []
