"""From the event log to each item's labels: who gave what, which items disagree, what gold is.

Only events given under the study folder's guideline version count (a label given under another
version is not this study's). An item is *labelled* when every annotator assigned to it has a
label in force (a skip is no label); it *needs adjudication* when those labels are not all the
same; its *gold* is the unanimous label, else the adjudication in force (the latest one).
"""

from __future__ import annotations

import random

from microctx.semantic import events as ev
from microctx.semantic.items import StudyFolder


def annotator_labels(folder: StudyFolder, log: list[dict] | None = None) -> dict[str, dict[str, str]]:
    """item -> {annotator: label} of the assigned annotators' labels in force."""
    log = ev.read(folder.events_path) if log is None else log
    log = [e for e in log if e["guideline_version"] == folder.guideline_version]
    out: dict[str, dict[str, str]] = {name: {} for name in folder.items}
    for (annotator, item), event in ev.current_labels(log).items():
        if event["kind"] == "label" and item in folder.items and annotator in folder.items[item]["annotators"]:
            out[item][annotator] = event["label"]
    return out


def adjudications(folder: StudyFolder, log: list[dict] | None = None) -> dict[str, dict]:
    """item -> the adjudication event in force (the latest one)."""
    log = ev.read(folder.events_path) if log is None else log
    found: dict[str, dict] = {}
    for event in ev.active(log, ("adjudicate",)):
        if event["guideline_version"] == folder.guideline_version:
            found[event["item"]] = event
    return found


def status(folder: StudyFolder, log: list[dict] | None = None) -> dict:
    """missing (item -> annotators without a label), queue (items that need an adjudication and
    have none), gold (item -> (label, via)) for the items that have one."""
    log = ev.read(folder.events_path) if log is None else log
    given = annotator_labels(folder, log)
    decided = adjudications(folder, log)
    missing, queue, gold = {}, [], {}
    for name, row in folder.items.items():
        lacking = [a for a in row["annotators"] if a not in given[name]]
        if lacking:
            missing[name] = lacking
            continue
        values = set(given[name].values())
        if len(values) == 1:
            gold[name] = (values.pop(), "unanimous")
        elif name in decided:
            gold[name] = (decided[name]["label"], "adjudicated")
        else:
            queue.append(name)
    return {"missing": missing, "queue": sorted(queue), "gold": gold, "labels": given, "adjudications": decided}


def queue_rows(folder: StudyFolder, *, names: bool = False) -> list[dict]:
    """The disagreement queue: item, record, question, the labels side by side (in a seeded order
    per item, annotator names hidden unless `names`), and the annotators' notes."""
    log = ev.read(folder.events_path)
    state = status(folder, log)
    notes = {(a, i): e["note"] for (a, i), e in ev.current_labels(log).items() if e["note"]}
    rows = []
    for name in state["queue"]:
        pairs = sorted(state["labels"][name].items())
        random.Random(name).shuffle(pairs)
        given = [f"{a}={x}" if names else x for a, x in pairs]
        row = folder.items[name]
        rows.append(
            {
                "item": name,
                "record_id": row["record_id"],
                "question": row["question"],
                "given": "|".join(given),
                "notes": " / ".join(notes[(a, name)] for a, _ in pairs if (a, name) in notes),
            }
        )
    return rows
