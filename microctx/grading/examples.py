"""Example submissions for reports run without a candidate: the oracle (the answers themselves) and a
planted one with known faults, so every part of a report has something to show.

Their looks at the test answers are marked in the held-out ledger and never counted
(`look_mark`), which is why they live beside the ledger in grading/.
"""

from __future__ import annotations

import copy
from typing import Any

from microctx.contract.schemas import SUBMISSION_SCHEMA

# The planted submission's faults, each aimed at a slice the report must expose:
PLANTED_DROPPED_LABEL = "enhancement"  # removed everywhere: label/enhancement recall 0 (a weak slice)
PLANTED_REFS_EVERY = 3  # references removed from every 3rd test record that has some
PLANTED_FALSE_LABEL = "bug"  # added to every 7th test record without it (false positives)
PLANTED_UNKNOWN_ID = "issue-999999"  # a citation of an id not in the corpus


def oracle_submission(answers: dict[str, Any]) -> dict[str, Any]:
    """The published answers submitted as they are (every record, every aggregate)."""
    return {
        "schema": SUBMISSION_SCHEMA,
        "corpus_sha256": answers["corpus_sha256"],
        "answers": copy.deepcopy(answers["answers"]),
        "aggregates": copy.deepcopy(answers["aggregates"]),
    }


def planted_submission(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers with known faults, deterministic: label `enhancement` dropped everywhere,
    references dropped on every 3rd test record that has some, label `bug` added to every 7th
    test record lacking it, the newest-issues list reversed and the most-recently-updated list
    missing (aggregate errors), and an unknown id cited (a citation error)."""
    sub = oracle_submission(answers)
    with_refs = without_bug = 0
    for answer in sub["answers"]:
        answer["labels"] = [label for label in answer["labels"] if label != PLANTED_DROPPED_LABEL]
        if answer["split"] != "test":
            continue
        if answer["references"]:
            with_refs += 1
            if with_refs % PLANTED_REFS_EVERY == 0:
                answer["references"] = []
        if PLANTED_FALSE_LABEL not in answer["labels"]:
            without_bug += 1
            if without_bug % 7 == 0:
                answer["labels"] = sorted(answer["labels"] + [PLANTED_FALSE_LABEL])
    sub["aggregates"]["newest_issue_ids"] = list(reversed(sub["aggregates"]["newest_issue_ids"]))
    del sub["aggregates"]["most_recently_updated_issue_ids"]
    sub["answers"].append(
        {
            "id": PLANTED_UNKNOWN_ID,
            "split": "test",
            "state": "OPEN",
            "labels": [],
            "references": [],
            "duplicate_targets": [],
            "scope_contradictions": [],
        }
    )
    return sub


def demo_submissions(answers: dict[str, Any]) -> dict[str, Any]:
    """{"oracle": ..., "planted": ...}: the planted pair, in memory."""
    return {"oracle": oracle_submission(answers), "planted": planted_submission(answers)}


def example_kind(answers: dict[str, Any], submission: dict[str, Any]) -> str | None:
    """ "oracle" or "planted" when `submission` is that example submission of `answers` (same
    canonical bytes), else None: the held-out ledger keeps such looks marked and never counts them."""
    from microctx.contract.canonical import dumps

    if submission.get("corpus_sha256") != answers.get("corpus_sha256") or len(submission.get("answers", ())) not in (
        len(answers["answers"]),
        len(answers["answers"]) + 1,
    ):
        return None
    given = dumps(submission)
    for name, example in demo_submissions(answers).items():
        if dumps(example) == given:
            return str(name)
    return None


DEMO_ENV = "MICROCTX_DEMO"  # set by `microctx demo` while it grades: its looks are marked "demo"


def look_mark(answers: dict[str, Any], submission: dict[str, Any], run_manifest: object = None) -> str | None:
    """The ledger mark of grading `submission` on `answers`: "demo" inside `microctx demo`; an
    example submission's kind when no candidate run made it (no `run_manifest`: a run whose output
    happens to equal the answers, as exact-sql's may, is a candidate's look); else None (counted)."""
    import os

    if os.environ.get(DEMO_ENV):
        return "demo"
    return None if run_manifest else example_kind(answers, submission)
