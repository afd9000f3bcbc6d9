"""The tables of the agreement report (notebooks/semantic_report.ipynb): plain pandas frames.

Everything comes from a frozen semantic.json and its study folder: agreement per question and
slice with intervals, a confusion matrix per annotator pair, each annotator's Dawid-Skene
quality, disagreement examples (annotator names hidden), the lexical rules against gold, the
judge against gold.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pandas as pd

from microctx.semantic import events as ev
from microctx.semantic.agreement import pair_confusions
from microctx.semantic.items import StudyFolder
from microctx.semantic.labels import status


def agreement_frame(semantic: dict, measures: tuple[str, ...] = ("cohen_kappa", "krippendorff_alpha")) -> pd.DataFrame:
    frame = pd.DataFrame(semantic["agreement"])
    return frame[frame["measure"].isin(measures)].reset_index(drop=True)


def confusion_frames(folder: StudyFolder) -> dict[str, dict[tuple[str, str], pd.DataFrame]]:
    """question -> (a, b) -> a C x C frame (rows a's label, columns b's) over the items both labelled."""
    given = status(folder)["labels"]
    out: dict[str, dict[tuple[str, str], pd.DataFrame]] = {}
    for q in folder.study().question:
        mine = {i: x for i, x in given.items() if folder.items[i]["question"] == q.id}
        matrices = pair_confusions(mine, q.labels, folder.annotators)
        out[q.id] = {
            pair: pd.DataFrame(m, index=[f"{pair[0]}: {x}" for x in q.labels], columns=[f"{pair[1]}: {x}" for x in q.labels])
            for pair, m in matrices.items()
            if m.sum()
        }
    return out


def disagreement_examples(folder: StudyFolder, n: int = 10, seed: int = 0) -> pd.DataFrame:
    """Up to n adjudicated disagreements: the labels given (names hidden), the decision, its reason."""
    state = status(folder)
    chosen = sorted(state["adjudications"])
    random.Random(seed).shuffle(chosen)
    rows = []
    for name in sorted(chosen[:n]):
        record = folder.records[folder.items[name]["record_id"]]
        decision = state["adjudications"][name]
        rows.append(
            {
                "item": name,
                "title": record["title"][:90],
                "given": " | ".join(sorted(state["labels"][name].values())),
                "decision": decision["label"],
                "reason": decision["reason"],
            }
        )
    return pd.DataFrame(rows, columns=["item", "title", "given", "decision", "reason"])


def judge_frame(semantic: dict) -> pd.DataFrame:
    rows = []
    for j in semantic["judge"]:
        t = j["tune_agreement"]
        rows.append(
            {
                "judge": j["annotator"],
                "measure": j["measure"],
                "tune_value": t["value"],
                "ci_low": t["ci_low"],
                "ci_high": t["ci_high"],
                "tune_items": t["items"],
                "bar": j["bar"],
                "used": j["used"],
                "why_not": j.get("reason", ""),
            }
        )
    return pd.DataFrame(
        rows, columns=["judge", "measure", "tune_value", "ci_low", "ci_high", "tune_items", "bar", "used", "why_not"]
    )


def event_counts(folder: StudyFolder) -> pd.DataFrame:
    log = ev.read(folder.events_path)
    frame = pd.DataFrame(log, columns=list(ev.COLUMNS))
    if frame.empty:
        return pd.DataFrame(columns=["kind", "events"])
    return frame.groupby("kind").size().rename("events").reset_index()


def semantic_report(
    study_dir: str | os.PathLike, semantic: str | os.PathLike, out: str | os.PathLike, *, examples: int = 10, **kw
) -> dict:
    """semantic_report.ipynb (microctx.reports.build) on a study folder and its frozen semantic.json
    into `out`: agreement per slice with intervals, confusion matrices, annotator quality,
    disagreements, the lexical rules and the judge against gold (plus agreement.csv, lexical.csv)."""
    from microctx.reports.build import make_report
    from microctx.semantic.freeze import load_semantic

    StudyFolder(study_dir)  # bad input fails here, before a kernel starts
    load_semantic(semantic)
    params = {"study_dir": str(Path(study_dir).resolve()), "semantic": str(Path(semantic).resolve()), "examples": int(examples)}
    return make_report("semantic", params, out, **kw)
