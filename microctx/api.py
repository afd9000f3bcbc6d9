"""The stages as functions a notebook can call with paths or with data already loaded.

microctx.freeze("raw.json", source="github.com/o/r/issues")      -> Frozen
microctx.verify("public.json", "answers.json", "report.json")    -> Verification
microctx.grade("answers.json", "submission.json")                 -> GradeResult
microctx.load_corpus("public.json")                               -> Corpus

The names the package exports from here are listed once, in `microctx/__init__.py` (loaded
lazily from this module); a name re-exported here is imported as `X as X`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from microctx.contract.schemas import load_answers as load_answers
from microctx.contract.schemas import load_submission as load_submission
from microctx.contract.schemas import read_answers, read_submission
from microctx.contract.score import GradeResult as GradeResult
from microctx.contract.score import grade as _grade
from microctx.corpus.export import RawIssue, check_enough, parse_export, read_export
from microctx.corpus.freeze import Frozen as Frozen
from microctx.corpus.freeze import freeze as _freeze
from microctx.corpus.public import Corpus as Corpus
from microctx.corpus.public import load_corpus as load_corpus
from microctx.corpus.redact import Rule, load_rules
from microctx.corpus.verify import Verification as Verification

PathLike = str | os.PathLike


class Grade(GradeResult):
    """What `microctx.grade` returns: a GradeResult that also slices itself, and `look`, the
    held-out ledger entry its grading made (None with `record_look=False`)."""

    look: dict | None = None

    def slices(self, corpus: Corpus, **kw):
        """The slice statistics of this grade on `corpus` (a SliceFrame: `.table` is the DataFrame,
        `.weakest()`, `.too_small()`, ...). Keyword arguments go to `slices.slice_table`
        (min_support, n_boot, seed, group_by, ...)."""
        from microctx.grading.slices import slice_frame

        return slice_frame(self.facts_frame(), corpus, **kw)


def freeze(
    raw: PathLike | Sequence[RawIssue] | list[dict], *, source: str, redactions: PathLike | Sequence[Rule] | None = None
) -> Frozen:
    """Freeze a raw export (a path, parsed export rows, or RawIssues) into the three documents.

    Nothing is written; `frozen.write(public, answers, report)` writes the three files.
    """
    if isinstance(raw, (str, os.PathLike)):
        issues = read_export(raw)
    elif raw and isinstance(raw[0], dict):
        issues = parse_export(list(raw), "<export rows>")
    else:
        issues = [issue for issue in raw if isinstance(issue, RawIssue)]
        if len(issues) != len(raw):
            raise TypeError("freeze: expected a path, export rows (dicts) or RawIssues, not a mix")
        check_enough(issues, "freeze: the issues given")
    if isinstance(redactions, (str, os.PathLike)):
        rules = load_rules(redactions)
    else:
        rules = list(redactions or [])
    return _freeze(issues, source, rules)


def grade(answers: PathLike | dict, submission: PathLike | dict, *, record_look: bool = True) -> Grade:
    """Grade a submission (path or parsed dict) against an answer bundle (path or parsed dict).

    A grade on test is a look at the held-out answers: like `microctx grade`, it appends one entry
    to the held-out ledger (`Grade.look`; candidate and configuration digest from the run manifest
    beside a submission path). The oracle and planted example submissions, and gradings inside
    `microctx demo`, are kept marked and never counted. `record_look=False` is for the documented
    cases only: a check of the grader itself (the oracle self-check), never to take a look unseen."""
    answers_path = None if isinstance(answers, dict) else answers
    submission_path = None if isinstance(submission, dict) else submission
    # each file read once, with the digest of the bytes graded (what the ledger records)
    gold, gold_sha = (answers, None) if isinstance(answers, dict) else read_answers(answers)
    given, given_sha = (submission, None) if isinstance(submission, dict) else read_submission(submission)
    result = _grade(gold, given)
    graded = Grade(result.grade, result.facts)
    if record_look:
        graded.look = _record_look(gold, given, (answers_path, gold_sha), (submission_path, given_sha), graded.grade)
    return graded


def _record_look(answers: dict, submission: dict, answers_read: tuple, submission_read: tuple, grade: dict) -> dict:
    """The look: `answers_read` and `submission_read` are (path, SHA-256 of the bytes graded), or
    (None, None) for a document given parsed."""
    from microctx.contract.canonical import dumps
    from microctx.contract.digests import sha256_hex
    from microctx.grading.ledger import record_graded

    (answers_path, answers_sha), (submission_path, submission_sha) = answers_read, submission_read
    return record_graded(
        answers_path,
        answers,
        submission,
        grade,
        via="python grade",
        submission_path=submission_path,
        answers_sha256=answers_sha if answers_path is not None else sha256_hex(dumps(answers)),
        submission_sha256=submission_sha,
    )


def verify(public: PathLike, answers: PathLike, report: PathLike) -> Verification:
    """Verify three artifact files; returns a Verification with every problem found."""
    from microctx.corpus.verify import verify_files

    return verify_files(public, answers, report)
