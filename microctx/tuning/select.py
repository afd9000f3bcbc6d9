"""A sweep's rows (one per configuration: parameters, tune metrics, costs, the configuration
digest) and the `[select]` rule that chooses among them."""

from __future__ import annotations

import math

from microctx.contract.costs import COUNTER_KEYS, RUN_COSTS, SWEEP_MODEL_COSTS
from microctx.contract.records import RunManifest, as_record
from microctx.tuning.config import SweepSpec


def sweep_row(result: dict, spec: SweepSpec) -> dict:
    row: dict = {"index": result["index"], "key": result["key"], "status": result["status"], "error": result.get("error", "")}
    for key in spec.grid:
        row[f"param.{key}"] = result["parameters"].get(key)
    metrics = result.get("metrics") or {}
    for name in ("tune_records", "exact_records", "tp", "fp", "fn"):
        row[name] = metrics.get(name)
    for name in ("exact_rate", "precision", "recall", "f1"):
        for suffix in ("", "_ci_low", "_ci_high"):
            row[name + suffix] = metrics.get(name + suffix)
    found = result.get("manifest")
    manifest = as_record(found, RunManifest, f"runs/{result['key']}/result.json") if found else None
    for name in RUN_COSTS:
        row[name] = getattr(manifest, name) if manifest is not None else None
    for name in COUNTER_KEYS + SWEEP_MODEL_COSTS:
        row[name] = manifest.counter(name) if manifest is not None else None
    row["version"] = manifest.version if manifest is not None else None
    row["config_digest"] = config_digest(manifest) if manifest is not None else None  # the grade/ledger digest of this run
    return row


def config_digest(manifest: RunManifest | dict) -> str:
    """A run's configuration digest, as the grade report and the ledger compute it
    (microctx.contract.records.Configuration)."""
    from microctx.contract.records import config_digest as digest

    return digest(manifest) or ""


def _cost(row: dict, measure: str) -> float:
    value = row.get(f"param.{measure[6:]}") if measure.startswith("param:") else row.get(measure)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
        return math.inf  # not reported: unknown, never the cheapest
    return float(value)


def select(rows: list[dict], spec: SweepSpec) -> dict | None:
    """The chosen row and why, or None (with the reason) when no configuration qualifies.

    max: the highest tune metric; ties go to the earlier configuration (file order).
    least-cost-meeting-floor: among configurations whose tune metric is at least the floor, the
    lowest cost; ties go to the higher metric, then to the earlier configuration.
    """
    ok = [
        r for r in rows if r["status"] == "ok" and isinstance(r.get(spec.metric), (int, float)) and not math.isnan(r[spec.metric])
    ]
    failed = len(rows) - len(ok)
    tail = f" ({failed} failed configuration{'s' if failed != 1 else ''} not considered)" if failed else ""
    if not ok:
        return {"row": None, "reason": f"no configuration ran and graded on tune{tail}"}
    if spec.rule == "max":
        best = max(ok, key=lambda r: (r[spec.metric], -r["index"]))
        return {
            "row": best,
            "reason": f"highest tune {spec.metric} ({best[spec.metric]:.4f}) of {len(ok)} "
            f"configurations; ties go to the earlier one{tail}",
        }
    assert spec.floor is not None and spec.cost is not None
    meeting = [r for r in ok if r[spec.metric] >= spec.floor]
    if not meeting:
        top = max(r[spec.metric] for r in ok)
        return {
            "row": None,
            "reason": f"no configuration meets the tune {spec.metric} floor {spec.floor:g} (best {top:.4f}){tail}",
        }
    best = min(meeting, key=lambda r: (_cost(r, spec.cost or ""), -r[spec.metric], r["index"]))
    return {
        "row": best,
        "reason": f"least {spec.cost} ({_cost(best, spec.cost):g}) of the {len(meeting)} of {len(ok)} "
        f"configurations whose tune {spec.metric} meets the floor {spec.floor:g} "
        f"(this one {best[spec.metric]:.4f}){tail}",
    }
