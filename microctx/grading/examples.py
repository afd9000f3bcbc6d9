"""Example submissions for reports run without a candidate: the oracle (the answers themselves) and a
planted one with known faults, so every part of a report has something to show.

Their looks at the test answers are marked in the held-out ledger and never counted
(`look_mark`), which is why they live beside the ledger in grading/. Telling a submission from
them (`ExampleMatch`) goes record by record beside the gold answers, without building the examples:
a grade that streams the answer bundle never holds it whole.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

import orjson

from microctx.contract.schemas import SUBMISSION_SCHEMA

# The planted submission's faults, each aimed at a slice the report must expose:
PLANTED_DROPPED_LABEL = "enhancement"  # removed everywhere: label/enhancement recall 0 (a weak slice)
PLANTED_REFS_EVERY = 3  # references removed from every 3rd test record that has some
PLANTED_FALSE_LABEL = "bug"  # added to every 7th test record without it (false positives)
PLANTED_FALSE_EVERY = 7
PLANTED_UNKNOWN_ID = "issue-999999"  # a citation of an id not in the corpus
EXAMPLE_KEYS = ["schema", "corpus_sha256", "answers", "aggregates"]  # an example submission's keys, in order


def oracle_submission(answers: dict[str, Any]) -> dict[str, Any]:
    """The published answers submitted as they are (every record, every aggregate)."""
    return {
        "schema": SUBMISSION_SCHEMA,
        "corpus_sha256": answers["corpus_sha256"],
        "answers": copy.deepcopy(answers["answers"]),
        "aggregates": copy.deepcopy(answers["aggregates"]),
    }


class Planter:
    """The planted faults, one gold answer at a time (`answer`), in the answers' order: label
    `enhancement` dropped everywhere, references dropped on every 3rd test record that has some,
    label `bug` added to every 7th test record lacking it."""

    def __init__(self) -> None:
        self.with_refs = self.without_bug = 0

    def answer(self, gold: dict[str, Any]) -> dict[str, Any]:
        """The planted answer of `gold` (a new dict, its keys in gold's order; unchanged lists shared)."""
        planted = dict(gold)
        planted["labels"] = [label for label in gold["labels"] if label != PLANTED_DROPPED_LABEL]
        if planted["split"] != "test":
            return planted
        if planted["references"]:
            self.with_refs += 1
            if self.with_refs % PLANTED_REFS_EVERY == 0:
                planted["references"] = []
        if PLANTED_FALSE_LABEL not in planted["labels"]:
            self.without_bug += 1
            if self.without_bug % PLANTED_FALSE_EVERY == 0:
                planted["labels"] = sorted(planted["labels"] + [PLANTED_FALSE_LABEL])
        return planted


def planted_aggregates(gold: dict[str, Any]) -> dict[str, Any]:
    """The planted aggregate errors: the newest-issues list reversed, the most-recently-updated list missing."""
    planted = dict(gold)
    planted["newest_issue_ids"] = list(reversed(gold["newest_issue_ids"]))
    del planted["most_recently_updated_issue_ids"]
    return planted


def planted_unknown() -> dict[str, Any]:
    """The planted citation error: an answer for an id not in the corpus (after every gold answer)."""
    return {
        "id": PLANTED_UNKNOWN_ID,
        "split": "test",
        "state": "OPEN",
        "labels": [],
        "references": [],
        "duplicate_targets": [],
        "scope_contradictions": [],
    }


def planted_submission(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers with known faults, deterministic (`Planter`, `planted_aggregates`,
    `planted_unknown`): label `enhancement` dropped everywhere, references dropped on every 3rd
    test record that has some, label `bug` added to every 7th test record lacking it, the
    newest-issues list reversed and the most-recently-updated list missing (aggregate errors),
    and an unknown id cited (a citation error)."""
    sub = oracle_submission(answers)
    planter = Planter()
    sub["answers"] = [planter.answer(answer) for answer in sub["answers"]] + [planted_unknown()]
    sub["aggregates"] = planted_aggregates(sub["aggregates"])
    return sub


def demo_submissions(answers: dict[str, Any]) -> dict[str, Any]:
    """{"oracle": ..., "planted": ...}: the planted pair, in memory."""
    return {"oracle": oracle_submission(answers), "planted": planted_submission(answers)}


def _same(given: object, expected: object) -> bool:
    """The same JSON bytes (key order and types included: true is not 1); `==` first, as a quick
    refusal (equal bytes imply equal values for parsed JSON, which holds no NaN)."""
    return given == expected and orjson.dumps(given) == orjson.dumps(expected)


class _Encoded(Sequence[bytes]):
    """A parsed answer list seen as each answer's compact JSON bytes (encoded when asked for)."""

    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers

    def __len__(self) -> int:
        return len(self.answers)

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            return [orjson.dumps(a) for a in self.answers[index]]
        return orjson.dumps(self.answers[index])


class ExampleMatch:
    """Whether a submission is the oracle or the planted example of an answer bundle, decided
    as the gold answers come (`gold`, in order; then `finish` with the gold aggregates): the same
    decision as comparing the canonical bytes of the submission and of each example, without
    building either. Gives up at the first difference from both.

    The submission is `top`, its document with any value in place of its answers (the keys in
    order), and `encoded`, its answers as compact JSON bytes (`orjson.dumps`; None when it has no
    answer list): a `schemas.CompactSubmission`'s, or `of(document)`."""

    def __init__(self, top: dict[str, Any], encoded: Sequence[bytes] | None, corpus_sha256: object) -> None:
        self.top, self.given = top, encoded
        self.kinds = {"oracle", "planted"}
        if (
            list(top) != EXAMPLE_KEYS
            or not _same(top["schema"], SUBMISSION_SCHEMA)
            or not _same(top["corpus_sha256"], corpus_sha256)
            or encoded is None
        ):
            self.kinds.clear()
        self.count, self.planter = 0, Planter()

    @classmethod
    def of(cls, submission: dict[str, Any], corpus_sha256: object) -> ExampleMatch:
        """The match of a parsed submission."""
        answers = submission.get("answers")
        return cls(submission, _Encoded(answers) if isinstance(answers, list) else None, corpus_sha256)

    def gold(self, answer: dict[str, Any]) -> None:
        """The next gold answer."""
        index, self.count = self.count, self.count + 1
        if not self.kinds:
            return
        assert self.given is not None
        if index >= len(self.given):
            self.kinds.clear()
            return
        given = self.given[index]
        if "oracle" in self.kinds and given != orjson.dumps(answer):
            self.kinds.discard("oracle")
        if "planted" in self.kinds and not self._planted_matches(given, answer):
            self.kinds.discard("planted")

    def _planted_matches(self, given: bytes, gold: dict[str, Any]) -> bool:
        if not isinstance(gold.get("labels"), list):  # a gold answer with null labels has no planted example
            return False
        return given == orjson.dumps(self.planter.answer(gold))

    def finish(self, aggregates: dict[str, Any]) -> str | None:
        """The kind ("oracle" or "planted") once every gold answer was given, else None."""
        given, count = self.given, self.count
        if "oracle" in self.kinds:
            assert given is not None
            if len(given) == count and _same(self.top["aggregates"], aggregates):
                return "oracle"
        if "planted" in self.kinds:
            assert given is not None
            if (
                len(given) == count + 1
                and given[count] == orjson.dumps(planted_unknown())
                and _same(self.top["aggregates"], planted_aggregates(aggregates))
            ):
                return "planted"
        return None


def example_kind(answers: dict[str, Any], submission: dict[str, Any]) -> str | None:
    """ "oracle" or "planted" when `submission` is that example submission of `answers` (same
    canonical bytes), else None: the held-out ledger keeps such looks marked and never counts them."""
    return match_examples(submission, answers["corpus_sha256"], answers["answers"], answers["aggregates"])


def match_examples(
    submission: dict[str, Any], corpus_sha256: object, gold: Iterable[dict[str, Any]], aggregates: dict[str, Any]
) -> str | None:
    """`example_kind` of gold answers given one by one (`ExampleMatch`)."""
    match = ExampleMatch.of(submission, corpus_sha256)
    for answer in gold:
        if not match.kinds:
            return None
        match.gold(answer)
    return match.finish(aggregates)


DEMO_ENV = "MICROCTX_DEMO"  # set by `microctx demo` while it grades: its baselines' looks are marked "demo"
# The candidates `microctx demo` runs. Only their runs' looks are marked "demo" (kept, not counted):
# the variable alone marks nothing else, so it cannot hide a look at a researcher's own candidate.
DEMO_CANDIDATES = ("exact-sql", "text-only")


class LookMark:
    """`look_mark` decided as the gold answers stream by (`feed`, then `finish` with the gold
    aggregates), for a grade that never holds the answer bundle; the submission as `ExampleMatch`
    takes it (`top`, `encoded`)."""

    def __init__(
        self, top: dict[str, Any], encoded: Sequence[bytes] | None, corpus_sha256: object, run_manifest: object = None
    ) -> None:
        self.demo = _in_demo(run_manifest)
        self.match = None if self.demo or run_manifest else ExampleMatch(top, encoded, corpus_sha256)

    def feed(self, gold: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The gold answers, passed on unchanged, each shown to the example match on the way."""
        match = self.match
        for answer in gold:
            if match is not None and match.kinds:
                match.gold(answer)
            yield answer

    def finish(self, aggregates: dict[str, Any]) -> str | None:
        return "demo" if self.demo else self.match.finish(aggregates) if self.match is not None else None


def _in_demo(run_manifest: object) -> bool:
    """Inside `microctx demo` (DEMO_ENV) and a run of one of its built-in candidates (the
    `RunManifest`'s `kind` and `candidate`): a submission without a run, or any other candidate's, is not."""
    import os

    return (
        bool(os.environ.get(DEMO_ENV))
        and getattr(run_manifest, "kind", None) == "builtin"
        and getattr(run_manifest, "candidate", None) in DEMO_CANDIDATES
    )


def look_mark(answers: dict[str, Any], submission: dict[str, Any], run_manifest: object = None) -> str | None:
    """The ledger mark of grading `submission` on `answers`: "demo" for a run of the demo's own
    built-in candidates inside `microctx demo` (`_in_demo`); an example submission's kind when
    no candidate run made it (no `run_manifest`: a run whose output happens to equal the answers,
    as exact-sql's may, is a candidate's look); else None (counted)."""
    if _in_demo(run_manifest):
        return "demo"
    return None if run_manifest else example_kind(answers, submission)
