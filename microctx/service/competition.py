"""What the service holds in memory: the answers, the public/private split, and scoring one submission.

The public/private split is made by *split component* (`microctx.grading.slices.record_table`:
records joined by duplicate text or references), so linked records never straddle it: a test
component is public when the first 8 bytes of HMAC-SHA256(secret seed, component key) read as
an integer are below PUBLIC_SHARE of 2**64. The seed is chosen when the competition is created
and never leaves the service state, so the split cannot be derived from the public corpus.

A submission is validated exactly as `microctx grade` validates it (`check_submission_document`)
and then, because a service must not count what it cannot score, refused (HTTP 422, not counted)
when it names another corpus, names an id that is not a record of this corpus, repeats an id,
or carries a field the submission schema does not have. Depth: the parser (orjson) refuses more
than 1,024 levels, and what the schema admits is 4 deep (document, answers, answer, labels);
every field is checked for its type and unknown fields are refused, so nothing deeper gets
past validation (the hostile-input test sends 100,000 levels and 50 inside an aggregate). The scoring is `grade()`: a test record
is exact when the grade's fact table has no false positive or false negative fact of it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import stat
from dataclasses import dataclass

import numpy as np

from microctx._io.jsonio import parse_json
from microctx.contract.digests import file_sha256
from microctx.contract.schemas import AGGREGATE_FIELDS, ANSWER_FIELDS, check_submission_document, load_answers
from microctx.contract.score import grade
from microctx.errors import InputError

PUBLIC_SHARE = 0.5
METRIC = "exact_record_rate"
SUBMISSION_KEYS = frozenset({"schema", "corpus_sha256", "answers", "aggregates"})
ANSWER_KEYS = frozenset({"id", "split", *ANSWER_FIELDS})


class Rejected(Exception):
    """A submission the service refuses before scoring (422, not counted): the reason."""


def check_private_file(path: str | os.PathLike) -> None:
    """Refuse an answer file that users other than its owner can read (or write)."""
    mode = os.stat(path).st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InputError(
            path,
            f"the answer file is readable by others (mode {stat.filemode(mode)}): "
            f"`chmod 600` it and own it by the service's user",
        )


def is_public(seed_hex: str, component_key: int) -> bool:
    digest = hmac.new(bytes.fromhex(seed_hex), str(component_key).encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") < PUBLIC_SHARE * 2**64


@dataclass
class Competition:
    """The loaded answers and their split: test record i is in component `component[i]` (0..G-1),
    public when `public[i]`."""

    answers: dict
    answers_sha256: str
    corpus_sha256: str
    test_ids: list[str]
    component: np.ndarray
    n_components: int
    public: np.ndarray
    known_ids: frozenset[str]

    def part(self, name: str) -> np.ndarray:
        return self.public if name == "public" else ~self.public


def load_competition(answers_path: str | os.PathLike, public_path: str | os.PathLike, seed_hex: str) -> Competition:
    """Load the (private) answer bundle and the public corpus and split the test components."""
    from microctx.corpus.public import load_corpus
    from microctx.grading.slices import record_table

    check_private_file(answers_path)
    answers = load_answers(answers_path)
    corpus = load_corpus(public_path)
    if corpus.sha256 != answers["corpus_sha256"]:
        raise InputError(
            public_path, f"this corpus is {corpus.sha256[:12]}…, the answers are of {answers['corpus_sha256'][:12]}…"
        )
    component_of = dict(zip(*(record_table(corpus)[c] for c in ("id", "component"))))
    test_ids = [a["id"] for a in answers["answers"] if a["split"] == "test"]
    keys = sorted({int(component_of[i]) for i in test_ids})
    index = {key: n for n, key in enumerate(keys)}
    component = np.array([index[int(component_of[i])] for i in test_ids], dtype=np.int64)
    public_keys = np.array([is_public(seed_hex, key) for key in keys], dtype=bool)
    return Competition(
        answers,
        file_sha256(answers_path),
        answers["corpus_sha256"],
        test_ids,
        component,
        len(keys),
        public_keys[component],
        frozenset(a["id"] for a in answers["answers"]),
    )


def _unknown_fields(document: dict) -> str:
    extra = sorted(set(document) - SUBMISSION_KEYS)
    if extra:
        return f"unknown field {extra[0]!r}"
    for n, answer in enumerate(document.get("answers") or []):
        extra = sorted(set(answer) - ANSWER_KEYS)
        if extra:
            return f"answers[{n}]: unknown field {extra[0]!r}"
    extra = sorted(set(document.get("aggregates") or {}) - set(AGGREGATE_FIELDS))
    return f"aggregates: unknown field {extra[0]!r}" if extra else ""


def parse_submission(body: bytes, comp: Competition) -> dict:
    """The validated submission document of a request body; Rejected(reason) when it cannot be scored."""
    try:
        document = parse_json(body, "submission")
    except InputError as exc:
        raise Rejected(str(exc)) from None
    except RecursionError:
        raise Rejected("submission: nested too deep") from None
    try:
        check_submission_document(document, "submission")
    except InputError as exc:
        raise Rejected(str(exc)) from None
    assert isinstance(document, dict)
    if not isinstance(document.get("schema", ""), str):
        raise Rejected("submission: field 'schema': expected a string")
    reason = _unknown_fields(document)
    if reason:
        raise Rejected(f"submission: {reason}")
    if document["corpus_sha256"] != comp.corpus_sha256:
        raise Rejected(
            f"submission: field 'corpus_sha256': bound to corpus {document['corpus_sha256']}, "
            f"this competition grades corpus {comp.corpus_sha256}"
        )
    seen: set[str] = set()
    for n, answer in enumerate(document.get("answers") or []):
        if answer["id"] not in comp.known_ids:
            raise Rejected(f"submission: record answers[{n}]: field 'id': unknown id {answer['id']!r}")
        if answer["id"] in seen:
            raise Rejected(f"submission: record answers[{n}]: field 'id': repeated id {answer['id']!r}")
        seen.add(answer["id"])
    return document


@dataclass
class Scored:
    grade: dict
    exact: np.ndarray  # bool per test record, in `Competition.test_ids` order

    def rate(self, mask: np.ndarray) -> float:
        return float(self.exact[mask].mean()) if mask.any() else float("nan")


def score(comp: Competition, submission: dict) -> Scored:
    """Grade with the project's scorer; which test records came out exact."""
    result = grade(comp.answers, submission)
    wrong = {row.record_id for row in result.facts if row.outcome in ("fp", "fn")}
    exact = np.array([rid not in wrong for rid in comp.test_ids], dtype=bool)
    if int(exact.sum()) != result.grade["exact_records"]:
        raise AssertionError("the fact table and the grade disagree on the exact records")
    return Scored(result.grade, exact)


def outcomes_text(exact: np.ndarray) -> str:
    return "".join("1" if e else "0" for e in exact)


def outcomes_of(text: str) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8) == ord("1")
