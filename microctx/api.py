"""The stages as functions a notebook can call with paths or with data already loaded.

microctx.freeze("raw.json", source="github.com/o/r/issues")      -> Frozen
microctx.verify("public.json", "answers.json", "report.json")    -> Verification
microctx.grade("answers.json", "submission.json")                 -> GradeResult
microctx.load_corpus("public.json")                               -> Corpus
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from microctx.contract.schemas import load_answers, load_submission
from microctx.contract.score import GradeResult
from microctx.contract.score import grade as _grade
from microctx.corpus.export import RawIssue, parse_export, read_export
from microctx.corpus.freeze import Frozen
from microctx.corpus.freeze import freeze as _freeze
from microctx.corpus.public import Corpus, load_corpus
from microctx.corpus.redact import Rule, load_rules
from microctx.corpus.verify import Verification

PathLike = str | os.PathLike

__all__ = [
    "freeze",
    "verify",
    "grade",
    "load_corpus",
    "load_answers",
    "load_submission",
    "Corpus",
    "Frozen",
    "Grade",
    "GradeResult",
    "Verification",
]


class Grade(GradeResult):
    """What `microctx.grade` returns: a GradeResult that also slices itself."""

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
    if isinstance(redactions, (str, os.PathLike)):
        rules = load_rules(redactions)
    else:
        rules = list(redactions or [])
    return _freeze(issues, source, rules)


def grade(answers: PathLike | dict, submission: PathLike | dict) -> Grade:
    """Grade a submission (path or parsed dict) against an answer bundle (path or parsed dict)."""
    if not isinstance(answers, dict):
        answers = load_answers(answers)
    if not isinstance(submission, dict):
        submission = load_submission(submission)
    result = _grade(answers, submission)
    return Grade(result.grade, result.facts)


def verify(public: PathLike, answers: PathLike, report: PathLike) -> Verification:
    """Verify three artifact files; returns a Verification with every problem found."""
    from microctx.corpus.verify import verify_files

    return verify_files(public, answers, report)
