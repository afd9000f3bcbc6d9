"""Loading the grader's inputs: answer bundles and submissions, validated, with their digests."""

from __future__ import annotations

import os

from .files import parse_json, read_bytes
from .grading import check_answers_document, check_submission_document


def load_answers(path: str | os.PathLike) -> dict:
    """Read and validate an answer bundle (schema fak-microcontext-answers/1)."""
    return check_answers_document(parse_json(read_bytes(path), path), path)


def load_submission(path: str | os.PathLike) -> dict:
    """Read and validate a submission (schema fak-microcontext-submission/1)."""
    return check_submission_document(parse_json(read_bytes(path), path), path)
