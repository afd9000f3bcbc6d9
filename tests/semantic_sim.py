"""Simulated annotators of known confusion matrices on a study folder (the semantic layer's tests).

`simulate(folder, truth, confusions, seed)` labels every assigned item: annotator a, given the
item's true label t, answers label j with probability confusions[a][t][j]. `truth_for` draws
each item's true label: per cue word (or `none`) a probability of `yes`; duplicates `yes` with
`p_dup`. `expected_kappa` is the population value of Cohen's kappa for a pair, averaged over
pairs, from the confusion matrices and the class shares: what the measured value estimates.
"""

from __future__ import annotations

import csv
import random
from itertools import combinations
from pathlib import Path

import numpy as np

from microctx.contract.patterns import scope_contradictions
from microctx.semantic import events as ev
from microctx.semantic.items import StudyFolder

LABELS = ["yes", "no", "unsure"]
P_YES = {"conflict": 0.85, "contradict": 0.7, "inconsistent": 0.75, "mismatch": 0.6, "disagree": 0.3, "none": 0.05}


def good(p: float) -> list[list[float]]:
    """A confusion matrix: right with probability p, otherwise the two other labels equally."""
    return [[p if i == j else (1 - p) / 2 for j in range(3)] for i in range(3)]


CARELESS = [[1 / 3] * 3] * 3


def truth_for(folder: StudyFolder, seed: int, p_dup: float = 0.75) -> dict[str, str]:
    rng = random.Random(seed)
    truth = {}
    for name, item in sorted(folder.items.items()):
        if item["question"] == "duplicate":
            p = p_dup
        else:
            words = scope_contradictions(folder.records[item["record_id"]]["body"]) or ["none"]
            p = max(P_YES[w] for w in words)
        truth[name] = "yes" if rng.random() < p else "no"
    return truth


def simulate(
    folder: StudyFolder,
    truth: dict[str, str],
    confusions: dict[str, list[list[float]]],
    seed: int,
    skip: set[tuple[str, str]] = frozenset(),
) -> dict[str, dict[str, str]]:
    """Append every annotator's labels to the log; returns item -> {annotator: label}."""
    rng = np.random.default_rng(seed)
    given: dict[str, dict[str, str]] = {}
    rows = []
    for annotator in folder.annotators:
        for name in folder.assigned(annotator):
            if (annotator, name) in skip:
                continue
            t = LABELS.index(truth[name])
            label = LABELS[int(rng.choice(3, p=confusions[annotator][t]))]
            given.setdefault(name, {})[annotator] = label
            rows.append(
                {
                    "annotator": annotator,
                    "item": name,
                    "kind": "label",
                    "label": label,
                    "guideline_version": folder.guideline_version,
                }
            )
    ev.append(folder.events_path, rows)
    return given


def adjudicate_to_truth(folder: StudyFolder, truth: dict[str, str], queue: list[str], path: Path) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["item", "label", "reason"])
        writer.writerows([name, truth[name], "read the whole thread"] for name in queue)
    return path


def expected_kappa(confusions: dict[str, list[list[float]]], shares: list[float]) -> float:
    """Population Cohen's kappa, mean over annotator pairs."""
    pi = np.asarray(shares)
    values = []
    for a, b in combinations(sorted(confusions), 2):
        ca, cb = np.asarray(confusions[a]), np.asarray(confusions[b])
        joint = np.einsum("t,ti,tj->ij", pi, ca, cb)
        pa, pb = joint.sum(axis=1), joint.sum(axis=0)
        values.append((np.trace(joint) - pa @ pb) / (1 - pa @ pb))
    return float(np.mean(values))


def adjudicate(folder: StudyFolder, truth: dict[str, str], reason: str = "simulated") -> None:
    """Decide every disagreement in the queue by the truth (a perfect adjudicator)."""
    from microctx.semantic.labels import status

    ev.append(
        folder.events_path,
        [
            {
                "annotator": "adjudicator",
                "item": i,
                "kind": "adjudicate",
                "label": truth[i],
                "reason": reason,
                "guideline_version": folder.guideline_version,
            }
            for i in status(folder)["queue"]
        ],
    )
