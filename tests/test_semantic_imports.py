"""Imports of labels made in Label Studio, Prodigy and Argilla, and plain CSV: files in each tool's
documented export shape, planted labels, round trip through the event log; hostile rows refused."""

from __future__ import annotations

import csv
import json
import re
import shutil
import uuid
from pathlib import Path

import pytest

from microctx.errors import InputError
from microctx.semantic import events as ev
from microctx.semantic.imports import import_labels
from microctx.semantic.items import StudyFolder, init_folder
from microctx.semantic.labels import annotator_labels

ROOT = Path(__file__).resolve().parents[1]
USER_IDS = {"ann": 1, "ben": 2, "cat": 3}
USER_UUIDS = {name: str(uuid.UUID(int=n)) for name, n in USER_IDS.items()}


@pytest.fixture(scope="module")
def base_study(s8f, tmp_path_factory):
    out = tmp_path_factory.mktemp("imports") / "s8f"
    init_folder(ROOT / "studies" / "s8f-conflicts.toml", s8f.public, s8f.answers, out)
    return out


@pytest.fixture
def study(base_study, tmp_path):
    shutil.copytree(base_study, tmp_path / "study")
    return StudyFolder(tmp_path / "study")


def planted(folder: StudyFolder) -> dict[str, dict[str, str]]:
    """Every assigned (annotator, item) gets a label: a fixed rotation of the labels."""
    labels = ["yes", "no", "unsure"]
    out: dict[str, dict[str, str]] = {}
    for k, (name, item) in enumerate(sorted(folder.items.items())):
        out[name] = {a: labels[(k + j) % 3] for j, a in enumerate(item["annotators"])}
    return out


def label_studio(folder: StudyFolder, labels: dict) -> bytes:
    tasks = []
    for t, (name, given) in enumerate(sorted(labels.items()), 1):
        record = folder.records[folder.items[name]["record_id"]]
        tasks.append(
            {
                "id": t,
                "data": {"item": name, "title": record["title"], "text": record["body"]},
                "annotations": [
                    {
                        "id": 100 * t + k,
                        "completed_by": USER_IDS[a],
                        "was_cancelled": False,
                        "ground_truth": False,
                        "created_at": "2026-08-10T10:00:00.000000Z",
                        "lead_time": 12.5,
                        "result": [
                            {
                                "id": "r1",
                                "type": "choices",
                                "from_name": "label",
                                "to_name": "text",
                                "origin": "manual",
                                "value": {"choices": [x]},
                            }
                        ],
                    }
                    for k, (a, x) in enumerate(sorted(given.items()))
                ],
                "predictions": [],
                "meta": {},
                "created_at": "2026-08-10T09:00:00.000000Z",
                "inner_id": t,
            }
        )
    return json.dumps(tasks).encode()


def prodigy(folder: StudyFolder, labels: dict) -> bytes:
    lines = []
    for k, (name, given) in enumerate(sorted(labels.items())):
        record = folder.records[folder.items[name]["record_id"]]
        for a, x in sorted(given.items()):
            lines.append(
                json.dumps(
                    {
                        "text": record["title"],
                        "meta": {"item": name},
                        "_input_hash": k,
                        "_task_hash": 7 * k,
                        "options": [{"id": o, "text": o} for o in ("yes", "no", "unsure")],
                        "_view_id": "choice",
                        "accept": [x],
                        "config": {"choice_style": "single"},
                        "answer": "accept",
                        "_timestamp": 1786000000 + k,
                        "_annotator_id": f"s8f_conflicts-{a}",
                        "_session_id": f"s8f_conflicts-{a}",
                    }
                )
            )
    return ("\n".join(lines) + "\n").encode()


def argilla(folder: StudyFolder, labels: dict) -> bytes:
    records = []
    for name, given in sorted(labels.items()):
        record = folder.records[folder.items[name]["record_id"]]
        records.append(
            {
                "id": name,
                "fields": {"title": record["title"], "body": record["body"]},
                "metadata": {"split": record["split"]},
                "suggestions": {},
                "vectors": {},
                "responses": {
                    folder.items[name]["question"]: [{"value": x, "user_id": USER_UUIDS[a]} for a, x in sorted(given.items())]
                },
                "_server_id": str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
            }
        )
    return json.dumps(records).encode()


def plain_csv(folder: StudyFolder, labels: dict) -> bytes:
    rows = ["item,annotator,label,note"] + [
        f"{name},{a},{x},planted" for name, given in sorted(labels.items()) for a, x in sorted(given.items())
    ]
    return ("\n".join(rows) + "\n").encode()


CASES = {
    "label-studio": (label_studio, {str(n): a for a, n in USER_IDS.items()}),
    "prodigy": (prodigy, {}),
    "argilla": (argilla, {u: a for a, u in USER_UUIDS.items()}),
    "csv": (plain_csv, {}),
}


@pytest.mark.parametrize("fmt", sorted(CASES))
def test_an_export_round_trips_into_the_event_log(study, tmp_path, fmt):
    write, users = CASES[fmt]
    labels = planted(study)
    path = tmp_path / f"export.{fmt}"
    path.write_bytes(write(study, labels))
    count = import_labels(study.path, fmt, path, users)
    assert count == sum(len(g) for g in labels.values()) == 264
    assert annotator_labels(study) == labels
    events = ev.read(study.events_path)
    assert len(events) == 264 and {e["guideline_version"] for e in events} == {"1"}


def test_prodigy_reject_and_ignore_are_skips_and_cancelled_label_studio_too(study, tmp_path):
    name = sorted(study.items)[0]
    a = study.items[name]["annotators"][0]
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"meta": {"item": name}, "answer": "ignore", "accept": [], "_annotator_id": f"d-{a}"}) + "\n")
    import_labels(study.path, "prodigy", path)
    assert [e["kind"] for e in ev.read(study.events_path)] == ["skip"]
    assert annotator_labels(study)[name] == {}


def test_hostile_imports_are_refused_whole(study, tmp_path):
    labels = planted(study)
    name = sorted(labels)[0]
    outsider = next(a for a in study.annotators if a not in labels[name])
    bad = {**labels, name: {**labels[name], outsider: "yes"}}
    path = tmp_path / "bad.csv"
    path.write_bytes(plain_csv(study, bad))
    with pytest.raises(InputError, match=f"annotator '{outsider}' is not assigned to item {name}"):
        import_labels(study.path, "csv", path)
    path.write_text("item,annotator,label\nconflict:issue-1,ann,yes\n")
    with pytest.raises(InputError, match="bad.csv: record 2: field 'item': no item 'conflict:issue-1'"):
        import_labels(study.path, "csv", path)
    rows = list(csv.reader(plain_csv(study, labels).decode().splitlines()))
    rows[5][2] = "definitely"
    path.write_text("\n".join(",".join(r) for r in rows) + "\n")
    with pytest.raises(InputError, match="record 6: field 'label': label 'definitely' is not one of"):
        import_labels(study.path, "csv", path)
    assert ev.read(study.events_path) == []  # all or none


def test_label_studio_picks_the_question_s_region_among_several(study, tmp_path):
    name = sorted(study.items)[0]
    a = study.items[name]["annotators"][0]
    question = study.items[name]["question"]
    region = {"type": "choices", "to_name": "text", "value": {"choices": ["no"]}}
    task = {
        "id": 1,
        "data": {"item": name},
        "annotations": [
            {
                "completed_by": USER_IDS[a],
                "result": [
                    {**region, "from_name": "confidence", "value": {"choices": ["unsure"]}},
                    {**region, "from_name": question},
                ],
            }
        ],
    }
    path = tmp_path / "ls.json"
    path.write_text(json.dumps([task]))
    import_labels(study.path, "label-studio", path, {str(n): x for x, n in USER_IDS.items()})
    assert annotator_labels(study)[name] == {a: "no"}
    task["annotations"][0]["result"][1]["from_name"] = "other"
    path.write_text(json.dumps([task]))
    with pytest.raises(InputError, match="several choices regions and none named"):
        import_labels(study.path, "label-studio", path, {str(n): x for x, n in USER_IDS.items()})


def _wrong_shapes(item: str) -> list[tuple[str, bytes, str]]:
    """(format, export bytes, what the one-line error says) for exports whose records or fields
    are of the wrong JSON type: each was an AttributeError (exit 70) before."""
    task = {"data": {"item": item}, "annotations": [{"completed_by": 1, "result": []}]}

    def ls(**change) -> bytes:
        return json.dumps([{**task, **change}]).encode()

    return [
        ("label-studio", b"[5]", "record 0: expected an object, got number"),
        ("label-studio", ls(data=[item]), "record 0: field 'data': expected an object, got array"),
        ("label-studio", ls(annotations=[5]), "field 'annotations[0]': expected an object, got number"),
        ("label-studio", ls(annotations={"a": 1}), "field 'annotations': expected an array, got object"),
        (
            "label-studio",
            ls(annotations=[{"completed_by": 1, "result": [{"type": "choices", "value": 5}]}]),
            "field 'annotations[0].result[0].value': expected an object, got number",
        ),
        (
            "label-studio",
            ls(annotations=[{"completed_by": 1, "result": [{"type": "choices", "value": {"choices": "yes"}}]}]),
            "field 'annotations[0].result[0].value.choices': expected an array, got string",
        ),
        ("prodigy", b"[1]\n", "record line 1: expected an object, got array"),
        ("prodigy", json.dumps({"meta": 5}).encode(), "record line 1: field 'meta': expected an object, got number"),
        ("prodigy", json.dumps({"item": item, "accept": "yes"}).encode(), "field 'accept': expected an array, got string"),
        ("argilla", b"[null]", "record 0: expected an object, got null"),
        ("argilla", json.dumps([{"id": item, "responses": [1]}]).encode(), "field 'responses': expected an object, got array"),
        (
            "argilla",
            json.dumps([{"id": item, "responses": {"conflict": [5], "duplicate": [5]}}]).encode(),
            "expected an object, got number",
        ),
    ]


def test_exports_of_the_wrong_shape_are_refused_naming_record_and_field(study, tmp_path):
    item = next(name for name, row in sorted(study.items.items()) if row["question"] == "conflict")
    for fmt, payload, said in _wrong_shapes(item):
        path = tmp_path / f"bad.{fmt}"
        path.write_bytes(payload)
        with pytest.raises(InputError) as caught:
            import_labels(study.path, fmt, path, {"1": "ann"})
        assert str(caught.value).startswith(str(path)) and said in str(caught.value), (fmt, payload, str(caught.value))
    assert ev.read(study.events_path) == []


def test_text_exports_are_decoded_and_split_strictly(study, tmp_path):
    """A CSV saved by a spreadsheet (a byte order mark first) is read; bytes that are not UTF-8, a
    row with a cell missing and a cell past the csv module's limit are one InputError naming the
    file and the line (before: exit 70, or a short row taken as a skip)."""
    labels = planted(study)
    path = tmp_path / "export.csv"
    path.write_bytes(b"\xef\xbb\xbf" + plain_csv(study, labels))
    assert import_labels(study.path, "csv", path) == 264
    name = sorted(labels)[0]
    annotator = sorted(labels[name])[0]
    cases = [
        ("csv", f"item,annotator,label\n{name},{annotator},caf\xe9\n".encode("latin-1"), "not valid UTF-8: byte 0xe9 at offset"),
        ("prodigy", b'{"item": "caf\xe9"}\n', "not valid UTF-8: byte 0xe9 at offset 13"),
        ("csv", f"item,annotator,label\n{name},{annotator}\n".encode(), "record 2: field 'label': missing"),
        ("csv", f"item,annotator,label\n{name},{annotator},yes,x\n".encode(), "record 2: 4 cells, the header has 3"),
        (
            "csv",
            f'item,annotator,label\n{name},{annotator},"{"x" * 200_000}"\n'.encode(),
            "record 2: not valid CSV: field larger",
        ),
    ]
    before = ev.read(study.events_path)
    for fmt, payload, said in cases:
        path.write_bytes(payload)
        with pytest.raises(InputError, match=re.escape(said)):
            import_labels(study.path, fmt, path)
    assert ev.read(study.events_path) == before
