"""A sweep folder's files: each configuration's result (`runs/<key>/`), sweep.csv and selected.json."""

from __future__ import annotations

import math
import os
from pathlib import Path

from microctx.contract.canonical import dumps
from microctx.contract.records import Selected, SweepResult, as_record
from microctx.contract.schemas import SELECTED_SCHEMA
from microctx.errors import InputError
from microctx.tuning.config import SweepSpec

CANDIDATE_DEVKIT = "candidate-devkit.json"


def read_result(folder: Path) -> dict | None:
    """A configuration's result.json when it is a `SweepResult` record, else None (it runs again)."""
    from microctx._io.jsonio import read_json

    path = folder / "result.json"
    if not path.is_file():
        return None
    try:
        document = read_json(path)
        as_record(document, SweepResult, path)
    except InputError:
        return None
    return document if isinstance(document, dict) else None


def save_result(out: Path, result: dict) -> dict:
    """Write one configuration's files and result.json (last, so a result means a complete folder)."""
    from microctx._io.atomic import AtomicOutputs

    folder = out / "runs" / result["key"]
    folder.mkdir(parents=True, exist_ok=True)
    files = result.pop("files", {}) or {}  # a `transient` failure (a task lost by the cluster) stays marked: resume reruns it
    as_record(result, SweepResult, folder / "result.json")  # what is written is the record a resume reads
    with AtomicOutputs() as staged:
        for name, data in files.items():
            staged.write(folder / name, data)
        staged.write(folder / "result.json", dumps(result))
    return result


def sweep_csv(rows: list[dict], selected_key: str | None) -> bytes:
    from microctx._io.csvout import csv_bytes

    columns = list(rows[0]) + ["selected"] if rows else ["selected"]
    return csv_bytes(columns, ([row.get(k) for k in columns[:-1]] + [row["key"] == selected_key] for row in rows))


def write_outputs(out: Path, spec: SweepSpec, rows: list[dict], selected: dict | None, inputs) -> None:
    from microctx._io.atomic import AtomicOutputs

    row = selected["row"] if selected else None
    document = {
        "schema": SELECTED_SCHEMA,
        "ok": row is not None,
        "sweep": {
            "path": spec.path,
            "sha256": spec.sha256,
            "configurations": len(rows),
            "failed": sum(r["status"] != "ok" for r in rows),
        },
        "candidate": {**spec.identity, "timeout": spec.timeout},
        "sandbox": spec.sandbox_identity if spec.sandbox is not None or spec.pass_env else None,
        "parameters": None if row is None else _params(row, spec),
        "config_key": None if row is None else row["key"],
        "config_digest": None if row is None else row.get("config_digest"),
        "corpus_sha256": inputs.corpus_sha256,
        "devkit_sha256": inputs.devkit_sha256,
        "candidate_devkit": {
            "path": CANDIDATE_DEVKIT,
            "splits": list(spec.devkit_splits),
            "sha256": inputs.candidate_devkit_sha256,
        },
        "selection": {"metric": spec.metric, "rule": spec.rule, "floor": spec.floor, "cost": spec.cost},
        "tune": None
        if row is None
        else {
            k: v
            for k, v in row.items()
            if not k.startswith("param.") and k not in ("index", "key", "status", "error", "config_digest")
        },
        "reason": selected["reason"] if selected else "",
    }
    if spec.project_record is not None:
        document["project"] = spec.project_record
    with AtomicOutputs() as staged:
        staged.write(out / "sweep.csv", sweep_csv(rows, None if row is None else row["key"]))
        staged.write(out / "selected.json", dumps(as_record(_json_safe(document), Selected, out / "selected.json").as_dict()))


def _params(row: dict, spec: SweepSpec) -> dict:
    return {key: row[f"param.{key}"] for key in spec.grid}


def _json_safe(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def sweep_frame(out: str | os.PathLike):
    """DIR/sweep.csv as a DataFrame (for the sweep report)."""
    import pandas as pd

    from microctx._io.jsonio import open_input

    path = Path(out) / "sweep.csv"
    if not path.is_file():
        raise InputError(path, "no sweep.csv: not a finished sweep folder")
    with open_input(path) as handle:
        try:
            from microctx._io.csvout import unescape_frame

            return unescape_frame(pd.read_csv(handle))
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            raise InputError(path, f"not a readable sweep table: {str(exc).splitlines()[0] if str(exc) else exc}") from None
