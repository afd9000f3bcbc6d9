"""Labels made in other tools, read from their export files into the event log.

- Label Studio, JSON export (`[{"id", "data": {"item": ...}, "annotations": [{"completed_by",
  "result": [{"type": "choices", "value": {"choices": [LABEL]}}], "was_cancelled"}]}]`):
  `completed_by` is a user id (a number) or an object with `email`.
- Prodigy, JSONL from `prodigy db-out` (one task a line: `meta.item` or `item`, `answer`
  accept/reject/ignore, `accept` the chosen option ids of a choice task, `_annotator_id`
  `DATASET-SESSION`). Only accepted answers carry a label; reject and ignore are skips.
- Argilla, `dataset.records.to_json` (`[{"id": ITEM, "fields", "metadata", "responses":
  {QUESTION: [{"value": LABEL, "user_id": UUID}]}}]`), the question named as the study's or `label`.
- CSV with the header `item,annotator,label` (and optional `note`).

Annotators are matched to the study's by name: the exact name, a name in `users` (tool id ->
annotator), an e-mail address's local part, or a Prodigy session `DATASET-NAME`. A label from
someone not assigned to the item, or a label the question does not allow, is refused with the
file, the record and the field.
"""

from __future__ import annotations

import os

import orjson

from microctx._io.jsonio import parse_json, read_bytes
from microctx._io.textin import decode_text, read_csv_rows
from microctx.errors import InputError, json_type_name
from microctx.semantic import events as ev
from microctx.semantic.items import StudyFolder

FORMATS = ("label-studio", "prodigy", "argilla", "csv")


def _annotator(folder: StudyFolder, item: dict, who: object, users: dict[str, str], where: tuple) -> str:
    text = str(who.get("email", who.get("id", "")) if isinstance(who, dict) else who)
    candidates = [users.get(text, text), text.split("@")[0]] + [a for a in item["annotators"] if text.endswith("-" + a)]
    for name in candidates:
        if name in item["annotators"]:
            return name
    raise InputError(
        where[0],
        f"annotator {text!r} is not assigned to item {item['item']} (assigned: "
        f"{', '.join(item['annotators'])}; map tool ids with users)",
        record=where[1],
        field=where[2],
    )


def _label_event(
    folder: StudyFolder, item_name: object, who: object, label: object, users: dict, where: tuple, note: str = ""
) -> dict:
    item = folder.item(str(item_name), where[0], where[1])
    annotator = _annotator(folder, item, who, users, where)
    kind = "skip" if label is None else "label"
    if label is not None and label not in item["labels"]:
        raise InputError(where[0], f"label {label!r} is not one of {item['labels']}", record=where[1], field=where[2])
    return {
        "annotator": annotator,
        "item": item["item"],
        "kind": kind,
        "label": label,
        "note": note,
        "guideline_version": folder.guideline_version,
    }


def _json_array(data: bytes, path: str, what: str) -> list:
    parsed = parse_json(data, path)
    if not isinstance(parsed, list):
        raise InputError(path, f"expected a JSON array of {what}")
    return parsed


def _object(value: object, where: tuple, *, missing_ok: bool = False) -> dict:
    """`value` when it is a JSON object (or null/absent, as {}, when `missing_ok`); else an
    InputError naming the file, the record and the field (`where`)."""
    if value is None and missing_ok:
        return {}
    if not isinstance(value, dict):
        raise InputError(where[0], f"expected an object, got {json_type_name(value)}", record=where[1], field=where[2])
    return value


def _array(value: object, where: tuple) -> list:
    """`value` when it is a JSON array (null or absent: []); else an InputError (see `_object`)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(where[0], f"expected an array, got {json_type_name(value)}", record=where[1], field=where[2])
    return value


def _choice(regions: list, question: str, where: tuple) -> str | None:
    """The chosen label of a Label Studio annotation: its `choices` region named after the
    question (or `label`), else its only `choices` region; several unnamed ones are ambiguous."""
    for r, region in enumerate(regions):
        if isinstance(region, dict) and region.get("type") == "choices":
            value = _object(region.get("value"), (where[0], where[1], f"{where[2]}[{r}].value"))
            _array(value.get("choices"), (where[0], where[1], f"{where[2]}[{r}].value.choices"))
    choices = [r for r in regions if isinstance(r, dict) and r.get("type") == "choices" and (r.get("value") or {}).get("choices")]
    named = [r for r in choices if r.get("from_name") in (question, "label")]
    if len(named) > 1 or (not named and len(choices) > 1):
        raise InputError(
            where[0], f"several choices regions and none named {question!r} or 'label'", record=where[1], field=where[2]
        )
    chosen = named or choices
    return chosen[0]["value"]["choices"][0] if chosen else None


def from_label_studio(folder: StudyFolder, data: bytes, path: str, users: dict) -> list[dict]:
    tasks = _json_array(data, path, "tasks (Label Studio's JSON export)")
    found = []
    for t, task in enumerate(tasks):
        task = _object(task, (path, t, None))
        item = _object(task.get("data"), (path, t, "data"), missing_ok=True).get("item")
        question = folder.item(str(item), path, t)["question"]
        for a, annotation in enumerate(_array(task.get("annotations"), (path, t, "annotations"))):
            where = (path, f"{t} (item {item})", f"annotations[{a}].result")
            annotation = _object(annotation, (path, where[1], f"annotations[{a}]"))
            regions = _array(annotation.get("result"), where)
            label = None if annotation.get("was_cancelled") else _choice(regions, question, where)
            found.append(_label_event(folder, item, annotation.get("completed_by"), label, users, where))
    return found


def from_prodigy(folder: StudyFolder, data: bytes, path: str, users: dict) -> list[dict]:
    found = []
    for n, line in enumerate(decode_text(data, path).split("\n"), 1):
        if not line.strip():
            continue
        try:
            task = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InputError(path, f"not JSON: {exc}", record=f"line {n}") from None
        task = _object(task, (path, f"line {n}", None))
        item = _object(task.get("meta"), (path, f"line {n}", "meta"), missing_ok=True).get("item", task.get("item"))
        where = (path, f"line {n} (item {item})", "accept")
        accepted = _array(task.get("accept"), where)
        label = accepted[0] if task.get("answer") == "accept" and accepted else None
        who = task.get("_annotator_id") or task.get("_session_id")
        found.append(_label_event(folder, item, who, label, users, where))
    return found


def from_argilla(folder: StudyFolder, data: bytes, path: str, users: dict) -> list[dict]:
    records = _json_array(data, path, "records (Argilla's records.to_json)")
    found = []
    for r, record in enumerate(records):
        record = _object(record, (path, r, None))
        item = folder.item(str(record.get("id")), path, r)
        where = (path, f"{r} (item {item['item']})", "responses")
        responses = _object(record.get("responses"), where, missing_ok=True)
        for key in (item["question"], "label"):
            for k, response in enumerate(_array(responses.get(key), (*where[:2], f"responses.{key}"))):
                at = (path, where[1], f"responses.{key}[{k}]")
                response = _object(response, at)
                found.append(_label_event(folder, item["item"], response.get("user_id"), response.get("value"), users, at))
    return found


def from_csv(folder: StudyFolder, data: bytes, path: str, users: dict) -> list[dict]:
    rows = read_csv_rows(path, ("item", "annotator", "label"), text=decode_text(data, path))
    return [
        _label_event(
            folder, row["item"], row["annotator"], row["label"] or None, users, (path, n, "label"), row.get("note") or ""
        )
        for n, row in rows
    ]


READERS = {"label-studio": from_label_studio, "prodigy": from_prodigy, "argilla": from_argilla, "csv": from_csv}


def import_labels(folder_path: str | os.PathLike, fmt: str, path: str | os.PathLike, users: dict | None = None) -> int:
    """Append every label of the export file (all or none); how many."""
    folder = StudyFolder(folder_path)
    if fmt not in READERS:
        raise InputError("--format", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    found = READERS[fmt](folder, read_bytes(path), os.fspath(path), users or {})
    ev.append(folder.events_path, found)
    return len(found)
