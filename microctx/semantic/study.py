"""The study file (STUDY.toml): questions, guideline, items, overlap, annotators, the judge's bar.

Declarative and checked whole on load (msgspec): every problem is one `InputError` naming the
file, the key (`question[0].labels`) and what was expected. The guideline is a Markdown file
beside the study file, with a version; a changed guideline is a new version (the event log
records the version each label was given under, and freezing refuses labels of another one).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal

import msgspec

from microctx._io.jsonio import read_bytes
from microctx.errors import InputError

QUESTION_KINDS = ("cue", "duplicate")
AGREEMENT_MEASURES = ("percent", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha")


class Guideline(msgspec.Struct, forbid_unknown_fields=True):
    version: str
    file: str


class Question(msgspec.Struct, forbid_unknown_fields=True):
    id: str
    kind: Literal["cue", "duplicate"]
    text: str
    labels: list[str]
    positive: str
    shortcuts: list[str] = []


class Judge(msgspec.Struct, forbid_unknown_fields=True):
    measure: Literal["percent", "cohen_kappa"] = "cohen_kappa"
    bar: float = 0.6


class Study(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    guideline: Guideline
    question: list[Question]
    annotators: list[str]
    overlap: int = 2
    seed: int = 0
    no_cue_per_split: int = 10
    highlight_cues: bool = False
    judge: Judge = msgspec.field(default_factory=Judge)


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _key_of(message: str) -> tuple[str, str]:
    """msgspec's 'Expected `int`, got `str` - at `$.question[0].labels`' as (key, what)."""
    what, _, at = message.partition(" - at `$")
    at = at.rstrip("`").lstrip(".")
    unknown = re.fullmatch(r"Object contains unknown field `(.+)`", what)
    if unknown:
        return (
            f"{at}.{unknown.group(1)}" if at else unknown.group(1)
        ), "Expected a key the study file knows (this one is unknown)"
    return (at or "(top level)"), what


def _check(study: Study, path: str) -> None:
    def bad(key: str, expected: str) -> InputError:
        return InputError(path, f"expected {expected}", field=key)

    for i, name in enumerate(study.annotators):
        if not _NAME.fullmatch(name) or name.startswith("judge"):
            raise bad(f"annotators[{i}]", "a name of letters, digits, '.', '_' or '-' (not starting with 'judge')")
    if len(set(study.annotators)) != len(study.annotators):
        raise bad("annotators", "distinct names")
    if not 2 <= study.overlap <= len(study.annotators):
        raise bad("overlap", f"at least 2 and at most the {len(study.annotators)} annotators")
    if study.no_cue_per_split < 0:
        raise bad("no_cue_per_split", "a count of 0 or more")
    if not -1 <= study.judge.bar <= 1:
        raise bad("judge.bar", "a number between -1 and 1")
    seen = set()
    for i, q in enumerate(study.question):
        if not _NAME.fullmatch(q.id) or q.id in seen:
            raise bad(f"question[{i}].id", "a distinct name of letters, digits, '.', '_' or '-'")
        seen.add(q.id)
        if len(q.labels) < 2 or len(set(q.labels)) != len(q.labels) or any(not _NAME.fullmatch(x) for x in q.labels):
            raise bad(f"question[{i}].labels", "two or more distinct labels of letters, digits, '.', '_' or '-'")
        if q.positive not in q.labels:
            raise bad(f"question[{i}].positive", f"one of the labels {q.labels}")
        if q.shortcuts and (len(q.shortcuts) != len(q.labels) or any(len(k) != 1 for k in q.shortcuts)):
            raise bad(f"question[{i}].shortcuts", "one single-character key per label")
    if not study.question:
        raise bad("question", "at least one [[question]]")


def parse_study(data: bytes, path: str | os.PathLike) -> Study:
    """The study file's bytes as a checked `Study` (annotators' shortcuts default to 1, 2, 3...)."""
    try:
        study = msgspec.toml.decode(data, type=Study)
    except msgspec.ValidationError as exc:
        key, what = _key_of(str(exc))
        raise InputError(path, what[0].lower() + what[1:], field=key) from None
    except msgspec.DecodeError as exc:
        raise InputError(path, f"not a TOML study file: {exc}") from None
    _check(study, str(path))
    for q in study.question:
        q.shortcuts = q.shortcuts or [str(i + 1) for i in range(len(q.labels))]
    return study


def load_study(path: str | os.PathLike) -> tuple[Study, bytes, bytes]:
    """(study, the study file's bytes, the guideline's bytes); the guideline is read beside it."""
    data = read_bytes(path)
    study = parse_study(data, path)
    guide = Path(path).parent / study.guideline.file
    if not guide.is_file():
        raise InputError(path, f"the guideline {guide} does not exist", field="guideline.file")
    return study, data, read_bytes(guide)


def with_annotators(study: Study, names: list[str], path: str) -> Study:
    """The study with its annotators replaced (`--annotators a,b,c`), checked again."""
    changed = msgspec.structs.replace(study, annotators=names)
    _check(changed, path)
    return changed


def question(study: Study, question_id: str) -> Question:
    return next(q for q in study.question if q.id == question_id)
