"""The artifacts' schema ids, the validators of answer bundles and submissions, and their loaders.

One home for what a document must look like: `check_*` take a parsed document and the path it
came from (for messages) and return it, or raise an InputError naming file, record and field.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

# microctx.errors is imported by the validators, not here: a sandboxed candidate that needs only a
# schema id (exact-sql) imports this module alone.

CORPUS_SCHEMA = "fak-microcontext-corpus/1"

ANSWERS_SCHEMA = "fak-microcontext-answers/1"


REPORT_SCHEMA = "fak-microcontext-corpus-report/1"
# the counts a corpus report carries that `verify` recomputes (and a Frozen's view lists)
REPORT_COUNTS = (
    "records",
    "train_records",
    "tune_records",
    "test_records",
    "open_records",
    "closed_records",
    "reference_edges",
    "duplicate_edges",
    "scope_contradictions",
)

GRADE_SCHEMA = "fak-microcontext-grade/1"


SUBMISSION_SCHEMA = "fak-microcontext-submission/1"

# microctx's own records (microctx.contract.records types them; each module imports its id from here)
RUN_SCHEMA = "microctx-run/2"
RUN_SCHEMAS = (RUN_SCHEMA, "microctx-run/1")  # run manifests the readers accept (/1: an earlier runner)
SANDBOX_SCHEMA = "microctx-sandbox/1"
SWEEP_SCHEMA = "microctx-sweep/1"  # the marker file of a sweep folder (sweep.json)
RESULT_SCHEMA = "microctx-sweep-result/1"  # one configuration's result (runs/<key>/result.json)
SELECTED_SCHEMA = "microctx-selected/1"
EVALUATION_SCHEMA = "microctx-evaluation/1"
REPORT_MANIFEST_SCHEMA = "microctx-report/1"  # report.json of a report folder
DEMO_SCHEMA = "microctx-demo/1"
RECEIPT_SCHEMA = "microctx-receipt/1"  # a signed receipt of the competition service (microctx.service.receipts)
SEMANTIC_SCHEMA = "microctx-semantic/1"  # an adjudicated answer layer (microctx.semantic.freeze)
STUDY_ITEMS_SCHEMA = "microctx-study-items/1"  # a study folder's items (microctx.semantic.items)
MICROCTX_SCHEMAS = (
    RUN_SCHEMA,
    SANDBOX_SCHEMA,
    SWEEP_SCHEMA,
    RESULT_SCHEMA,
    SELECTED_SCHEMA,
    EVALUATION_SCHEMA,
    REPORT_MANIFEST_SCHEMA,
    DEMO_SCHEMA,
    RECEIPT_SCHEMA,
    SEMANTIC_SCHEMA,
    STUDY_ITEMS_SCHEMA,
)


# The only issue states (the contract's `OPEN`/`CLOSED`; an export may write them in any case).
# Anything else is refused where it enters (export, public corpus, answers): a third state would
# break every sum over states.
STATES = ("OPEN", "CLOSED")

# The largest issue number (the export's and the public corpus's): record tables hold numbers as
# 64-bit integers (numpy), so a larger one is refused where it enters, not met as an overflow later.
MAX_NUMBER = (1 << 63) - 1

AGGREGATE_FIELDS = ("state_counts", "label_counts", "newest_issue_ids", "most_recently_updated_issue_ids")


# the fields of a public corpus record (corpus.freeze_stream.public_record writes them)
PUBLIC_FIELDS = frozenset(
    {"id", "split", "number", "title", "body", "created_at", "updated_at", "url", "state", "labels", "closed_at"}
    | {"title_sha256", "body_sha256"}
)

# answer key -> (fact kind, element type, is a list)
ANSWER_FIELDS = {
    "state": ("state", str, False),
    "labels": ("label", str, True),
    "references": ("ref", int, True),
    "duplicate_targets": ("dup", int, True),
    "scope_contradictions": ("contradiction", str, True),
}


def _is(value: object, kind: type) -> bool:
    return isinstance(value, kind) and not isinstance(value, bool)


def check_answer_list(answers: object, path: object, *, gold: bool) -> list[dict[str, Any]]:
    """Validate the `answers` array of an answer bundle (gold) or a submission."""
    from microctx.errors import InputError, json_type_name

    if not isinstance(answers, list):
        raise InputError(path, f"expected an array, got {json_type_name(answers)}", field="answers")
    for index, answer in enumerate(answers):
        check_answer(answer, index, path, gold=gold)
    return answers


def check_answer(answer: object, index: int, path: object, *, gold: bool) -> dict[str, Any]:
    """Validate `answers[index]` of an answer bundle (gold) or a submission; the answer."""
    if type(answer) is dict and _plainly_valid(answer, gold):
        return answer
    from microctx.errors import InputError, json_type_name

    if not isinstance(answer, dict):
        raise InputError(path, f"expected an object, got {json_type_name(answer)}", record=f"answers[{index}]")
    if not _is(answer.get("id"), str):
        raise InputError(
            path, f"expected a string id, got {json_type_name(answer.get('id'))}", record=f"answers[{index}]", field="id"
        )
    where = f"answers[{index}] ({answer['id']})"
    required = ("split",) + tuple(ANSWER_FIELDS) if gold else ()
    for key in required:
        if key not in answer:
            raise InputError(path, "missing", record=where, field=key)
    if gold and not _is(answer["split"], str):
        raise InputError(path, f"expected a string, got {json_type_name(answer['split'])}", record=where, field="split")
    if gold and answer["state"] not in STATES:
        raise InputError(path, f"expected {' or '.join(STATES)}, got {answer['state']!r}", record=where, field="state")
    for key, (_, element, is_list) in ANSWER_FIELDS.items():
        value = answer.get(key)
        if value is None and not (gold and key == "state"):
            continue
        if not is_list:
            if not _is(value, element):
                raise InputError(
                    path, f"expected a {json_type_name(element())}, got {json_type_name(value)}", record=where, field=key
                )
            continue
        if not isinstance(value, list) or not all(_is(v, element) for v in value):
            raise InputError(path, f"expected an array of {json_type_name(element())}s or null", record=where, field=key)
    _check_extra_depth(answer, path, where)
    return answer


def _check_extra_depth(answer: dict[str, Any], path: object, where: str) -> None:
    """Fields an answer may carry besides its own (ignored by the scorer) must nest no deeper than
    orjson writes (254 levels with the answer's own object): the graders keep and compare each
    answer as its JSON bytes (`CompactSubmission`, `grading.examples`)."""
    import orjson

    from microctx.errors import InputError

    for key in answer.keys() - _GOLD_KEYS:
        try:
            orjson.dumps({key: answer[key]})
        except TypeError:  # orjson's recursion limit (the only TypeError of parsed JSON)
            raise InputError(
                path, "nested more than 254 levels deep (an answer's own object included)", record=where, field=key
            ) from None


_GOLD_KEYS = frozenset(("id", "split", *ANSWER_FIELDS))
_FIELD_TYPES = tuple((key, element, is_list, {element}) for key, (_, element, is_list) in ANSWER_FIELDS.items())


def _plainly_valid(answer: dict[str, Any], gold: bool) -> bool:
    """A quick yes for the usual answer, every value of exactly its type (a million answers are
    checked); False leaves the decision, and the error, to the full check of `check_answer`."""
    if type(answer.get("id")) is not str:
        return False
    if gold and (not _GOLD_KEYS <= answer.keys() or type(answer["split"]) is not str or answer["state"] not in STATES):
        return False
    if not answer.keys() <= _GOLD_KEYS:  # fields of its own: `_check_extra_depth`
        return False
    get = answer.get
    for key, element, is_list, types in _FIELD_TYPES:
        value = get(key)
        if value is None:
            if gold and key == "state":
                return False
        elif is_list:
            if type(value) is not list or (value and not types.issuperset(map(type, value))):  # [] holds no wrong type
                return False
        elif type(value) is not element:
            return False
    return True


def check_aggregates(aggregates: object, path: object, *, gold: bool) -> dict[str, Any] | None:
    """Validate an `aggregates` object: count maps of integers, id lists of strings."""
    from microctx.errors import InputError, json_type_name

    if aggregates is None and not gold:
        return None
    if not isinstance(aggregates, dict):
        raise InputError(path, f"expected an object, got {json_type_name(aggregates)}", field="aggregates")
    for key in AGGREGATE_FIELDS:
        value = aggregates.get(key)
        if value is None:
            if gold:
                raise InputError(path, "missing", record="aggregates", field=key)
            continue
        if key.endswith("_counts"):
            ok = isinstance(value, dict) and all(_is(v, int) for v in value.values())
            expected = "an object of integer counts"
        else:
            ok = isinstance(value, list) and all(_is(v, str) for v in value)
            expected = "an array of id strings"
        if not ok:
            raise InputError(path, f"expected {expected} or null", record="aggregates", field=key)
    return aggregates


def check_answers_document(document: object, path: object) -> dict[str, Any]:
    """Validate a parsed answer bundle (schema fak-microcontext-answers/1)."""
    _check_answers_head(document, path)
    assert isinstance(document, dict)
    check_answer_list(document.get("answers"), path, gold=True)
    check_aggregates(document.get("aggregates"), path, gold=True)
    return document


def _check_answers_head(document: object, path: object) -> None:
    """An answer bundle's object, schema id and corpus digest (checked before its answers)."""
    from microctx.errors import InputError, json_type_name

    if not isinstance(document, dict):
        raise InputError(path, f"expected a JSON object, got {json_type_name(document)}")
    if document.get("schema") != ANSWERS_SCHEMA:
        raise InputError(path, f"expected schema {ANSWERS_SCHEMA!r}, got {document.get('schema')!r}", field="schema")
    if not _is(document.get("corpus_sha256"), str):
        raise InputError(path, "expected a string", field="corpus_sha256")


class AnswerStream:
    """An answer bundle read record by record, checked as `check_answers_document` checks it (the
    same errors, in the same order): the head on opening (`corpus_sha256`), each answer as it is
    read (`answers()`), then `aggregates()`. Memory holds one block of the file, not the bundle.

    A layout the streaming reader cannot take (keys in another order, bad JSON) raises
    `microctx._io.jsonscan.IrregularJSON`, on opening or while the answers are read: the caller
    then reads the bundle whole (`load_answers`), whose errors name the problem."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from microctx._io.jsonscan import IrregularJSON, ObjectStream

        self.path = path
        self._stream = ObjectStream(path, "answers", hashed=True)  # the digest of the bytes graded
        head = self._stream.head
        if "schema" not in head or "corpus_sha256" not in head:
            self._stream.__exit__()
            raise IrregularJSON
        try:
            _check_answers_head(head, path)
        except BaseException:
            self._stream.__exit__()
            raise
        self.corpus_sha256: str = head["corpus_sha256"]

    def answers(self) -> Iterator[dict[str, Any]]:
        """The gold answers, in order, each validated (`check_answer`) before it is given."""
        for index, answer in enumerate(self._stream.items()):
            yield check_answer(answer, index, self.path, gold=True)

    def aggregates(self) -> dict[str, Any]:
        """The validated aggregates, once every answer was read."""
        if self._stream.tail is None:
            raise ValueError("AnswerStream.aggregates: read every answer first")
        document = {**self._stream.head, **self._stream.tail}
        checked = check_aggregates(document.get("aggregates"), self.path, gold=True)
        assert checked is not None
        return checked

    @property
    def sha256(self) -> str | None:
        """The SHA-256 of the bytes read, once the whole bundle was read (`aggregates()`), else None."""
        return self._stream.sha256

    def __enter__(self) -> AnswerStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.__exit__()


def check_submission_document(document: object, path: object) -> dict[str, Any]:
    """Validate a parsed submission. Its `schema` is not checked (the blind oracle submits answers)."""
    _check_submission_head(document, path)
    assert isinstance(document, dict)
    if document.get("answers") is not None:
        check_answer_list(document["answers"], path, gold=False)
    check_aggregates(document.get("aggregates"), path, gold=False)
    return document


def _check_submission_head(document: object, path: object) -> None:
    from microctx.errors import InputError, json_type_name

    if not isinstance(document, dict):
        raise InputError(path, f"expected a JSON object, got {json_type_name(document)}")
    if not _is(document.get("corpus_sha256"), str):
        raise InputError(path, f"expected a string, got {json_type_name(document.get('corpus_sha256'))}", field="corpus_sha256")


class CompactSubmission:
    """A validated submission whose answers are held as their compact JSON bytes, in order (a
    fraction of the parsed objects' memory), each parsed again when it is graded (`answer`).

    `top`: the document without its answers (its keys in the file's order, `answers` None);
    `encoded`: each answer's `orjson.dumps` bytes, None when the document has no answer list;
    `ids`: each answer's id, in order; `sha256`: the digest of the bytes it was read from (what
    the held-out ledger records), None when it was made from a document."""

    def __init__(self, top: dict[str, Any], encoded: list[bytes] | None, ids: list[str], sha256: str | None = None) -> None:
        self.top, self.encoded, self.ids, self.sha256 = top, encoded, ids, sha256
        self._last = {rid: index for index, rid in enumerate(ids)}  # the last answer of an id counts

    @classmethod
    def of(cls, document: dict[str, Any], sha256: str | None = None) -> CompactSubmission:
        """The compact form of a parsed (validated) submission (read from bytes of digest `sha256`)."""
        import orjson

        answers = document.get("answers")
        top = {key: None if key == "answers" else value for key, value in document.items()}
        if not isinstance(answers, list):
            return cls(top, None, [], sha256)
        return cls(top, [_compact(orjson.dumps(a)) for a in answers], [a["id"] for a in answers], sha256)

    @property
    def corpus_sha256(self) -> object:
        return self.top.get("corpus_sha256")

    @property
    def aggregates(self) -> dict[str, Any] | None:
        return self.top.get("aggregates")

    def answer(self, rid: str) -> dict[str, Any] | None:
        """The (last) answer for `rid`, parsed; None when there is none."""
        import orjson

        index = self._last.get(rid)
        return None if index is None or self.encoded is None else orjson.loads(self.encoded[index])


def _compact(encoded: bytes) -> bytes:
    """A copy of `orjson.dumps` bytes that holds only its length: orjson's own bytes object keeps
    the buffer it was written into (measured: about 4 kB for a 180-byte answer)."""
    return bytes(memoryview(encoded))


def read_submission_compact(path: str | os.PathLike[str]) -> CompactSubmission:
    """Read and validate a submission record by record into its compact form, with the errors of
    `load_submission` in the same order; a layout the streaming reader cannot take (the answers
    before the corpus digest, bad JSON) is read whole with `load_submission`."""
    import orjson

    from microctx._io.jsonscan import IrregularJSON, ObjectStream

    try:  # standard input (`-`) is read whole at once: the stream refuses it before reading
        with ObjectStream(path, "answers", hashed=True) as stream:  # the digest of the bytes graded
            if "corpus_sha256" not in stream.head:
                raise IrregularJSON
            _check_submission_head(stream.head, path)
            ids, encoded = [], []
            for index, answer in enumerate(stream.items()):
                ids.append(check_answer(answer, index, path, gold=False)["id"])
                encoded.append(_compact(orjson.dumps(answer)))
            assert stream.tail is not None
            top = {**stream.head, "answers": None, **stream.tail}
            sha256 = stream.sha256  # set: a file that changed size as it was read is read whole
    except IrregularJSON:
        return CompactSubmission.of(*read_submission(path))
    check_aggregates(top.get("aggregates"), path, gold=False)
    return CompactSubmission(top, encoded, ids, sha256)


def load_answers(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate an answer bundle (schema fak-microcontext-answers/1)."""
    return read_answers(path)[0]


def load_submission(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a submission (schema fak-microcontext-submission/1)."""
    return read_submission(path)[0]


def read_answers(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """`load_answers`, and the SHA-256 of the bytes it parsed (what the held-out ledger records:
    the file is read once, so standard input works and a file changed after its read is not
    taken for the one graded)."""
    from microctx._io.jsonio import parse_json, read_bytes  # loaded when a file is read, not for the schema ids
    from microctx.contract.digests import sha256_hex

    data = read_bytes(path)
    return check_answers_document(parse_json(data, path), path), sha256_hex(data)


def read_submission(path: str | os.PathLike[str]) -> tuple[dict[str, Any], str]:
    """`load_submission`, and the SHA-256 of the bytes it parsed (see `read_answers`)."""
    from microctx._io.jsonio import parse_json, read_bytes
    from microctx.contract.digests import sha256_hex

    data = read_bytes(path)
    return check_submission_document(parse_json(data, path), path), sha256_hex(data)
