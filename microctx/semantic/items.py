"""Items and their blind assignment: what each annotator is asked, and the study folder's items.json.

Items of a `cue` question: one per record carrying a lexical cue fact (the base answers'
`scope_contradictions`), plus a seeded random sample of `no_cue_per_split` records without a cue
from each split (so misses of the lexical rule can be found). Items of a `duplicate` question:
one per duplicate edge (record, target). Every item is labelled by `overlap` annotators, chosen
by rotation over a seeded order (each annotator gets a near-equal share); each annotator sees
their items in their own seeded order. Nothing in items.json tells a cue item from a sampled one:
the lexical label stays hidden unless the study sets `highlight_cues`.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import msgspec

from microctx._io.jsonio import parse_json, read_bytes
from microctx.contract.canonical import dumps
from microctx.contract.declared import convert
from microctx.contract.patterns import issue_text, references, scope_contradictions
from microctx.contract.schemas import STUDY_ITEMS_SCHEMA as ITEMS_SCHEMA
from microctx.contract.split import SPLITS
from microctx.errors import InputError
from microctx.semantic.study import Study

ITEMS_FILE = "items.json"
STUDY_FILE = "study.toml"
GUIDELINE_FILE = "guideline.md"
EVENTS_FILE = "events.sqlite"


def item_id(question: str, record_id: str, target: int | None = None) -> str:
    return f"{question}:{record_id}" + (f":{target}" if target is not None else "")


def _question_items(study: Study, qi: int, answers: list[dict], rng: random.Random) -> list[dict]:
    q = study.question[qi]
    found: list[dict] = []
    if q.kind == "cue":
        cued = [a for a in answers if a["scope_contradictions"]]
        found = [{"item": item_id(q.id, a["id"]), "record_id": a["id"]} for a in cued]
        for split in SPLITS:
            pool = sorted(a["id"] for a in answers if a["split"] == split and not a["scope_contradictions"])
            chosen = rng.sample(pool, min(study.no_cue_per_split, len(pool)))
            found += [{"item": item_id(q.id, rid), "record_id": rid} for rid in sorted(chosen)]
    else:
        found = [
            {"item": item_id(q.id, a["id"], t), "record_id": a["id"], "target": t}
            for a in answers
            for t in a["duplicate_targets"]
        ]
    return [{**x, "question": q.id, "labels": list(q.labels)} for x in found]


def build_items(study: Study, public: dict, answers: dict, components: dict[str, int]) -> dict:
    """The items.json document (without the sources, which `init` adds); `components` maps each
    record id to its split component (microctx.grading.slices.record_table)."""
    rng = random.Random(study.seed)
    rows = [row for qi in range(len(study.question)) for row in _question_items(study, qi, answers["answers"], rng)]
    split_of = {r["id"]: r["split"] for r in public["records"]}
    for row in rows:
        row["component"], row["split"] = int(components[row["record_id"]]), split_of[row["record_id"]]
    rng.shuffle(rows)
    annotators = study.annotators
    assignments: dict[str, list[str]] = {a: [] for a in annotators}
    for j, row in enumerate(rows):
        row["annotators"] = sorted(annotators[(j + t) % len(annotators)] for t in range(study.overlap))
        for a in row["annotators"]:
            assignments[a].append(row["item"])
    for name in annotators:
        random.Random(f"{study.seed}:{name}").shuffle(assignments[name])
    by_id = {r["id"]: r for r in public["records"]}
    needed = {r["record_id"] for r in rows}
    needed |= {f"issue-{r['target']}" for r in rows if r.get("target") and f"issue-{r['target']}" in by_id}
    records = {rid: _shown(by_id[rid], study.highlight_cues) for rid in sorted(needed)}
    return {
        "schema": ITEMS_SCHEMA,
        "study": study.name,
        "guideline_version": study.guideline.version,
        "items": sorted(rows, key=lambda r: r["item"]),
        "assignments": assignments,
        "records": records,
    }


def _shown(record: dict, highlight: bool) -> dict:
    """What an annotator sees of a record: public text only."""
    shown = {
        "id": record["id"],
        "number": record["number"],
        "split": record["split"],
        "state": record["state"],
        "title": record["title"],
        "body": record["body"],
        "url": record["url"],
        "references": references(issue_text(record["title"], record["body"])),
    }
    if highlight:
        shown["cue_words"] = scope_contradictions(record["body"])
    return shown


def write_items_bytes(document: dict) -> bytes:
    return dumps(document)


class ItemRow(msgspec.Struct):
    """One item of items.json as the study's commands read it."""

    item: str
    record_id: str
    question: str
    labels: list[str]
    split: str
    annotators: list[str]
    target: int | None = None


class ItemsFile(msgspec.Struct):
    """The keys of items.json the study's commands rely on, typed (a folder edited by hand or cut
    short is one InputError naming the key, never a KeyError later)."""

    guideline_version: str
    items: list[ItemRow]
    assignments: dict[str, list[str]]
    records: dict[str, dict[str, Any]]
    sources: dict[str, str]


class StudyFolder:
    """A study folder: items.json, study.toml, guideline.md and events.sqlite."""

    def __init__(self, folder: str | os.PathLike):
        self.path = Path(folder)
        items = self.path / ITEMS_FILE
        if not items.is_file():
            raise InputError(folder, f"not a study folder (no {ITEMS_FILE}; make one with `microctx study init`)")
        document = parse_json(read_bytes(items), items)
        if not isinstance(document, dict) or document.get("schema") != ITEMS_SCHEMA:
            raise InputError(items, f"expected schema {ITEMS_SCHEMA!r}", field="schema")
        convert(document, ItemsFile, items, "items.json of `microctx study init`")  # its keys, typed
        self.document = document
        self.items = {row["item"]: row for row in document["items"]}
        self.records = document["records"]

    def study(self) -> Study:
        """The study file as copied into the folder (its annotators those the folder assigned)."""
        import msgspec

        from microctx.semantic.study import parse_study

        study = parse_study(read_bytes(self.path / STUDY_FILE), self.path / STUDY_FILE)
        return msgspec.structs.replace(study, annotators=self.annotators)

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def guideline_version(self) -> str:
        return self.document["guideline_version"]

    @property
    def annotators(self) -> list[str]:
        return list(self.document["assignments"])

    def sources(self) -> tuple[dict, dict]:
        """The base answers and the public corpus document, their digests checked against items.json."""
        from microctx.contract.digests import file_sha256
        from microctx.contract.schemas import load_answers
        from microctx.corpus.public import load_corpus

        src = self.document["sources"]
        for key in ("public", "answers"):
            if not Path(src[key]).is_file() or file_sha256(src[key]) != src[f"{key}_sha256"]:
                raise InputError(
                    src[key],
                    f"is not the {key} file the study was made from (SHA-256 {src[key + '_sha256']})",
                    field=f"sources.{key}",
                )
        return load_answers(src["answers"]), load_corpus(src["public"]).document

    def inputs(self) -> dict[str, Path]:
        """Every file the study's commands read (the folder's files, the event log's SQLite side
        files, the public corpus and answers it was made from): what no output may replace."""
        names = (ITEMS_FILE, STUDY_FILE, GUIDELINE_FILE, EVENTS_FILE, EVENTS_FILE + "-wal", EVENTS_FILE + "-shm")
        found = {f"the study's {name}": self.path / name for name in names}
        sources = self.document.get("sources") or {}
        for key in ("public", "answers"):
            if isinstance(sources.get(key), str):
                found[f"the study's {key} file"] = Path(sources[key])
        return found

    def check_output(self, option: str, path: str | os.PathLike) -> None:
        """Refuse `path` as the output `option` when it is one of the study's `inputs` (the event
        log, items.json, the answers it was made from...): exit 2, nothing replaced."""
        from microctx._io.paths import check_paths

        check_paths(self.inputs(), {option: path})

    def assigned(self, annotator: str) -> list[str]:
        if annotator not in self.document["assignments"]:
            raise InputError(
                "--annotator", f"{annotator!r} is not an annotator of this study (annotators: {', '.join(self.annotators)})"
            )
        return list(self.document["assignments"][annotator])

    def item(self, name: str, source: object = "--from", row: object = None) -> dict:
        if name not in self.items:
            raise InputError(source, f"no item {name!r} in this study", record=row, field="item")
        return self.items[name]


def init_folder(
    study_path: str | os.PathLike,
    public_path: str | os.PathLike,
    answers_path: str | os.PathLike,
    out: str | os.PathLike,
    annotators: list[str] | None = None,
) -> StudyFolder:
    """`microctx study init`: a new study folder (refused when `out` exists and is not empty)."""
    from microctx._io.atomic import AtomicOutputs
    from microctx.contract.digests import file_sha256
    from microctx.contract.schemas import load_answers
    from microctx.corpus.public import load_corpus
    from microctx.grading.slices import record_table
    from microctx.semantic import events
    from microctx.semantic.study import load_study, with_annotators

    study, study_bytes, guideline = load_study(study_path)
    if annotators:
        study = with_annotators(study, annotators, "--annotators")
    corpus = load_corpus(public_path)
    answers = load_answers(answers_path)
    if answers["corpus_sha256"] != corpus.sha256:
        raise InputError(
            answers_path, f"names corpus {answers['corpus_sha256']}, not {public_path} ({corpus.sha256})", field="corpus_sha256"
        )
    dest = Path(out)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InputError(out, "exists and is not an empty folder; a study folder is made once (choose a new --out)")
    table = record_table(corpus)
    document = build_items(study, corpus.document, answers, dict(zip(table["id"], table["component"])))
    document["sources"] = {
        "public": str(Path(public_path).resolve()),
        "public_sha256": corpus.sha256,
        "answers": str(Path(answers_path).resolve()),
        "answers_sha256": file_sha256(answers_path),
    }
    dest.mkdir(parents=True, exist_ok=True)
    with AtomicOutputs() as outputs:
        outputs.write(dest / STUDY_FILE, study_bytes)
        outputs.write(dest / GUIDELINE_FILE, guideline)
        outputs.write(dest / ITEMS_FILE, write_items_bytes(document))
    events.create(dest / EVENTS_FILE)
    return StudyFolder(dest)
