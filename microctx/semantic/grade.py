"""Grading with the semantic layer: `microctx grade ... --semantic semantic.json`.

The contract's grade is unchanged (cue and duplicate facts against the lexical gold). Beside it,
`<grade>.semantic.csv` scores the submission's cue and duplicate answers on the studied test
records against the adjudicated gold, one row per item with the lexical and the semantic verdict
side by side:
- a `cue` question: the submission claims a conflict when it lists any cue word for the record;
  `lexical` is tp/fp/fn/tn of that claim against the base answers' cue words, `semantic` against
  the adjudicated label (the question's positive label, or not);
- a `duplicate` question: the submission claims the edge when the target is in its
  `duplicate_targets`; `lexical` against pattern D's edge (every studied edge is one), `semantic`
  against the adjudicated label.
An item whose gold is neither positive nor negative (`unsure`) is listed with verdict `excluded`.
The counts describe the studied test items only (the seeded sample stands for the no-cue records
but is not reweighted here); the study's semantic.json carries the weighted rule figures.
"""

from __future__ import annotations

import os

from microctx._io.csvout import csv_bytes
from microctx.contract.digests import file_sha256
from microctx.errors import InputError
from microctx.semantic.freeze import load_semantic
from microctx.semantic.study import parse_study

SEMANTIC_COLUMNS = ("item", "record_id", "question", "gold_label", "submitted", "lexical", "semantic")


def _verdict(claim: bool, truth: bool | None) -> str:
    if truth is None:
        return "excluded"
    return ("tp" if truth else "fp") if claim else ("fn" if truth else "tn")


def semantic_rows(semantic: dict, answers: dict, submission: dict, negative: dict[str, set[str]]) -> list[dict]:
    """One row per studied test item; `negative` maps each question to its labels that mean no."""
    gold_answers = {a["id"]: a for a in answers["answers"]}
    submitted = {a.get("id"): a for a in submission.get("answers") or [] if isinstance(a, dict)}
    rows = []
    for g in semantic["gold"]:
        if g["split"] != "test":
            continue
        mine = submitted.get(g["record_id"], {})
        base = gold_answers[g["record_id"]]
        positive = g["label"] not in negative[g["question"]] and g["label"] != "unsure"
        truth = None if g["label"] == "unsure" else positive
        if "target" in g:
            claim, lexical = g["target"] in (mine.get("duplicate_targets") or []), g["target"] in base["duplicate_targets"]
        else:
            claim, lexical = bool(mine.get("scope_contradictions")), bool(base["scope_contradictions"])
        rows.append(
            {
                "item": g["item"],
                "record_id": g["record_id"],
                "question": g["question"],
                "gold_label": g["label"],
                "submitted": "yes" if claim else "no",
                "lexical": _verdict(claim, lexical),
                "semantic": _verdict(claim, truth),
            }
        )
    return rows


def summary(rows: list[dict]) -> str:
    parts = []
    for question in sorted({r["question"] for r in rows}):
        mine = [r for r in rows if r["question"] == question]
        text = []
        for kind in ("lexical", "semantic"):
            n = {v: sum(1 for r in mine if r[kind] == v) for v in ("tp", "fp", "fn")}
            p = n["tp"] / (n["tp"] + n["fp"]) if n["tp"] + n["fp"] else float("nan")
            r = n["tp"] / (n["tp"] + n["fn"]) if n["tp"] + n["fn"] else float("nan")
            text.append(f"{kind} precision {p:.3f} recall {r:.3f}")
        parts.append(f"{question} ({len(mine)} test items): " + ", ".join(text))
    return "semantic layer: " + "; ".join(parts)


def semantic_path(output: str | os.PathLike) -> str:
    """Beside a grade (`G.json`) or a slice table (`S.csv`): `G.semantic.csv`, `S.semantic.csv`."""
    text = os.fspath(output)
    return (text.rsplit(".", 1)[0] if text.endswith((".json", ".csv")) else text) + ".semantic.csv"


def grade_semantic(
    semantic_file: str | os.PathLike, answers_path: str | os.PathLike, answers: dict, submission: dict
) -> tuple[bytes, str]:
    """(the .semantic.csv bytes, its summary line); refused when semantic.json is bound to other answers."""
    semantic = load_semantic(semantic_file)
    if file_sha256(answers_path) != semantic["answers_sha256"]:
        raise InputError(
            semantic_file, f"is bound to answers {semantic['answers_sha256']}, not {answers_path}", field="answers_sha256"
        )
    study = parse_study(semantic["study_toml"].encode(), semantic_file) if "study_toml" in semantic else None
    negative = (
        {q.id: set(q.labels) - {q.positive} for q in study.question}
        if study
        else {g["question"]: {"no"} for g in semantic["gold"]}
    )
    rows = semantic_rows(semantic, answers, submission, negative)
    return csv_bytes(SEMANTIC_COLUMNS, ([r[c] for c in SEMANTIC_COLUMNS] for r in rows)), summary(rows)


def layer_for(semantic_file: str | os.PathLike | None, answers_path, answers: dict, submission: dict):
    """For a command's `--semantic`: the (.semantic.csv bytes, summary) to write later, or None."""
    return grade_semantic(semantic_file, answers_path, answers, submission) if semantic_file else None


def write_beside(layer: tuple[bytes, str] | None, output: str | os.PathLike) -> None:
    """Write `<output>.semantic.csv` beside a grade or slice table and print its summary line."""
    if layer:
        from microctx._io.atomic import atomic_write

        atomic_write(semantic_path(output), layer[0])
        print(layer[1])
