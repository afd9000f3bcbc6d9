"""`microctx study freeze`: the adjudicated labels as a new answer layer, semantic.json.

Refused (InputError, exit 2) while any item lacks a label from one of its annotators or a
disagreement lacks an adjudication. The document is bound by SHA-256 to the public corpus, the
base answer bundle, the study file, the guideline, the items and the event log (the canonical
JSON of every event, oldest first: the SQLite file's bytes change with checkpoints, its events do
not), and carries the agreement figures, each annotator's Dawid-Skene quality, the lexical rules
against gold with intervals, and the model judge's verdict when one was run.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from microctx.contract.canonical import dumps
from microctx.contract.digests import file_sha256, sha256_hex
from microctx.contract.schemas import SEMANTIC_SCHEMA
from microctx.errors import InputError
from microctx.grading.stats import DEFAULT_N_BOOT, DEFAULT_SEED
from microctx.semantic import events as ev
from microctx.semantic.figures import lexical_rows, study_agreement
from microctx.semantic.items import GUIDELINE_FILE, ITEMS_FILE, STUDY_FILE, StudyFolder
from microctx.semantic.judge import judge_section
from microctx.semantic.labels import status
from microctx.semantic.quality import dawid_skene


def refusal(state: dict) -> str | None:
    """Why the study cannot be frozen yet, or None."""
    parts = []
    if state["missing"]:
        first = sorted(state["missing"])[0]
        parts.append(f"{len(state['missing'])} items lack a label (e.g. {first} from {', '.join(state['missing'][first])})")
    if state["queue"]:
        parts.append(
            f"{len(state['queue'])} disagreements lack an adjudication (e.g. {state['queue'][0]}; see `microctx study queue`)"
        )
    return "; ".join(parts) or None


def bindings(folder: StudyFolder, log: list[dict]) -> dict:
    src = folder.document["sources"]
    return {
        "public_sha256": src["public_sha256"],
        "answers_sha256": src["answers_sha256"],
        "study_sha256": file_sha256(folder.path / STUDY_FILE),
        "guideline_sha256": file_sha256(folder.path / GUIDELINE_FILE),
        "items_sha256": file_sha256(folder.path / ITEMS_FILE),
        "events_sha256": sha256_hex(dumps(log)),
    }


def quality_rows(folder: StudyFolder, labels: dict[str, dict[str, str]]) -> list[dict]:
    rows = []
    for q in folder.study().question:
        triples = [(i, a, x) for i, given in labels.items() if folder.items[i]["question"] == q.id for a, x in given.items()]
        if not triples:
            continue
        fit = dawid_skene(triples, q.labels)
        rows += [
            {
                "question": q.id,
                "annotator": a,
                "accuracy": round(fit["accuracy"][a], 6),
                "kappa": round(fit["kappa"][a], 6),
                "labels": fit["labels"][a],
                "flagged": a in fit["flagged"],
            }
            for a in fit["annotators"]
        ]
    return rows


def semantic_document(folder: StudyFolder, *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED) -> dict:
    """The semantic.json document; InputError when the study is not complete."""
    log = ev.read(folder.events_path)
    state = status(folder, log)
    why = refusal(state)
    if why:
        raise InputError(folder.path, f"refused: {why}")
    answers, _ = folder.sources()
    gold = {name: label for name, (label, _) in state["gold"].items()}
    study = folder.study()
    document = {
        "schema": SEMANTIC_SCHEMA,
        "study": study.name,
        "guideline_version": folder.guideline_version,
        "study_toml": (folder.path / STUDY_FILE).read_text(),
        **bindings(folder, log),
        "gold": [
            {
                "item": name,
                "question": row["question"],
                "record_id": row["record_id"],
                "split": row["split"],
                **({"target": row["target"]} if "target" in row else {}),
                "label": state["gold"][name][0],
                "via": state["gold"][name][1],
            }
            for name, row in sorted(folder.items.items())
        ],
        "agreement": study_agreement(folder, state["labels"], n_boot=n_boot, seed=seed),
        "annotators": quality_rows(folder, state["labels"]),
        "lexical": lexical_rows(folder, gold, answers, n_boot=n_boot, seed=seed),
        "judge": judge_section(folder, log, gold, n_boot=n_boot, seed=seed),
    }
    return document


def write_semantic(folder: str | os.PathLike, out: str | os.PathLike, **kw) -> dict:
    from microctx._io.atomic import atomic_write

    study = StudyFolder(folder)
    study.check_output("--out", out)
    document = semantic_document(study, **kw)
    atomic_write(out, dumps(document))
    return document


def check_binding(
    semantic: dict, public_path: str | os.PathLike, answers_path: str | os.PathLike, folder: str | os.PathLike | None = None
) -> list[str]:
    """What does not match: the corpus and answers files (and the study folder, when given)."""
    problems = []
    for key, path in (("public_sha256", public_path), ("answers_sha256", answers_path)):
        if file_sha256(path) != semantic[key]:
            problems.append(f"{path}: SHA-256 {file_sha256(path)}, semantic.json is bound to {semantic[key]} ({key})")
    if folder is not None:
        study = StudyFolder(folder)
        for key, value in bindings(study, ev.read(study.events_path)).items():
            if value != semantic[key]:
                problems.append(f"{folder}: {key} is {value}, semantic.json is bound to {semantic[key]}")
    return problems


class SemanticGold(msgspec.Struct):
    """One adjudicated label of semantic.json, as its readers (grade, slices, the report) use it."""

    item: str
    question: str
    record_id: str
    split: str
    label: str
    via: str
    target: int | None = None


class SemanticFile(msgspec.Struct):
    """The keys of semantic.json its readers rely on, with their types (more keys are allowed)."""

    schema: str
    public_sha256: str
    answers_sha256: str
    gold: list[SemanticGold]
    agreement: list[dict[str, Any]]
    judge: list[dict[str, Any]]
    study_toml: str | None = None


def load_semantic(path: str | os.PathLike) -> dict:
    """semantic.json, checked: its schema, and the keys its readers use, of their types (a file
    cut short or edited by hand is one InputError naming the key, never a KeyError later)."""
    from microctx._io.jsonio import parse_json, read_bytes
    from microctx.contract.declared import convert

    document = parse_json(read_bytes(path), path)
    if not isinstance(document, dict) or document.get("schema") != SEMANTIC_SCHEMA:
        raise InputError(path, f"expected schema {SEMANTIC_SCHEMA!r}", field="schema")
    convert(document, SemanticFile, path, "semantic.json from `microctx study freeze`")
    return document
