"""A study's figures: agreement per question and slice, and the lexical rules against adjudicated gold.

Slices: `overall`, `split`, `state`, and for `cue` questions `cue_word` (each cue word the lexical
rule finds in the record's public body, and `none`); an item with two cue words counts in both.
Every interval is the cluster bootstrap over split components (microctx.grading.stats).

The lexical rules against gold (`lexical_rows`), for a `cue` question: `precision` of each cue
word = the share of records carrying it whose gold is the question's positive label; `recall` =
those records' positives over every positive, where positives among records *without* a cue are
estimated from the seeded sample: each sampled no-cue record stands for N_s / n_s records of its
split s (N_s no-cue records in it, n_s sampled). The weights are fixed by the design, not
re-estimated per replicate. The `any` row is the rule as a whole (any cue word). For a
`duplicate` question: the precision of pattern D's edges (recall needs a sample of non-edges,
which the study does not draw, so it is not estimated).
"""

from __future__ import annotations

import numpy as np

from microctx.contract.patterns import scope_contradictions
from microctx.contract.split import SPLITS
from microctx.grading.stats import (
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    bootstrap_totals,
    boundary_bound,
    kish_n_eff,
    percentile_interval,
    ratio,
)
from microctx.semantic.agreement import agreement_rows
from microctx.semantic.items import StudyFolder

CUE_WORDS = ("conflict", "contradict", "disagree", "inconsistent", "mismatch")
LEXICAL_COLUMNS = ("question", "rule", "measure", "value", "ci_low", "ci_high", "items", "components", "n_eff")


def item_slices(folder: StudyFolder, item: dict, kind: str) -> list[tuple[str, str]]:
    record = folder.records[item["record_id"]]
    found = [("overall", "all"), ("split", record["split"]), ("state", record["state"])]
    if kind == "cue":
        found += [("cue_word", w) for w in (scope_contradictions(record["body"]) or ["none"])]
    return found


def study_agreement(
    folder: StudyFolder, labels: dict[str, dict[str, str]], *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> list[dict]:
    """Rows of AGREEMENT_COLUMNS for every question and slice that holds items."""
    study = folder.study()
    rows = []
    for q in study.question:
        slices: dict[tuple[str, str], list[str]] = {}
        for name, item in folder.items.items():
            if item["question"] == q.id:
                for key in item_slices(folder, item, q.kind):
                    slices.setdefault(key, []).append(name)
        order = ["overall", "split", "state", "cue_word"]
        for kind, value in sorted(slices, key=lambda k: (order.index(k[0]), k[1])):
            chosen = slices[(kind, value)]
            found = agreement_rows(
                {i: labels[i] for i in chosen},
                {i: folder.items[i]["component"] for i in chosen},
                q.labels,
                folder.annotators,
                n_boot=n_boot,
                seed=seed,
            )
            rows += [{"question": q.id, "slice_kind": kind, "slice": value, **r} for r in found]
    return rows


def _interval_rows(
    question: str, per_component: np.ndarray, stats: dict[str, tuple[int, int]], n_boot: int, seed: int
) -> list[dict]:
    """Rows for ratio statistics name -> (numerator column, denominator column)."""
    totals = per_component.sum(axis=0)
    replicates = bootstrap_totals(per_component, n_boot, seed)
    rows = []
    for name, (num, den) in stats.items():
        rule, measure = name.split("/")
        low, high, _ = percentile_interval(ratio(replicates[:, num], replicates[:, den])[:, None])
        present = per_component[:, -1] if measure == "recall" else per_component[:, den]
        rows.append(
            {
                "question": question,
                "rule": rule,
                "measure": measure,
                "value": float(ratio(totals[num], totals[den])),
                "ci_low": float(low[0]),
                "ci_high": float(high[0]),
                "items": int(round(totals[-2] if measure == "recall" else totals[den])),
                "components": int((present > 0).sum()),
                "n_eff": round(float(kish_n_eff(present)), 3),
            }
        )
    return rows


def lexical_rows(
    folder: StudyFolder, gold: dict[str, str], answers: dict, *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> list[dict]:
    """Rows of LEXICAL_COLUMNS: precision and recall of each lexical rule against gold."""
    study = folder.study()
    by_id = {a["id"]: a for a in answers["answers"]}
    rows: list[dict] = []
    for q in study.question:
        mine = [(name, item) for name, item in folder.items.items() if item["question"] == q.id]
        groups = sorted({item["component"] for _, item in mine})
        where = {g: k for k, g in enumerate(groups)}
        if q.kind == "cue":
            weights = _sample_weights(mine, answers)
            # columns: per word (has, has & positive), any (has, has & positive), weighted positives, items, ones
            width = 2 * len(CUE_WORDS) + 2 + 3
            table = np.zeros((len(groups), width))
            for name, item in mine:
                cues = by_id[item["record_id"]]["scope_contradictions"]
                positive = float(gold[name] == q.positive)
                row = np.zeros(width)
                for k, word in enumerate(CUE_WORDS):
                    row[2 * k], row[2 * k + 1] = (word in cues), (word in cues) * positive
                row[-5], row[-4] = bool(cues), bool(cues) * positive
                row[-3], row[-2], row[-1] = weights[name] * positive, 1, 1
                table[where[item["component"]]] += row
            stats = {f"{w}/precision": (2 * k + 1, 2 * k) for k, w in enumerate(CUE_WORDS)}
            stats |= {f"{w}/recall": (2 * k + 1, width - 3) for k, w in enumerate(CUE_WORDS)}
            stats |= {"any/precision": (width - 4, width - 5), "any/recall": (width - 4, width - 3)}
        else:
            table = np.zeros((len(groups), 4))
            for name, item in mine:
                table[where[item["component"]]] += [1, float(gold[name] == q.positive), 1, 1]
            stats = {"pattern_d/precision": (1, 0)}
        found = _interval_rows(q.id, table, stats, n_boot, seed)
        if q.kind == "cue":
            _bound_unseen_misses(found, mine, gold, q.positive, weights)
        rows += found
    return rows


def _bound_unseen_misses(
    rows: list[dict], mine: list[tuple[str, dict]], gold: dict[str, str], positive: str, weights: dict[str, float]
) -> None:
    """No positive among the sampled no-cue records: the bootstrap cannot see misses it never drew,
    so each recall's lower end becomes the one under the exact one-sided 95% bound on the no-cue
    share, 1 - 0.05^(1/n) (n sampled no-cue records, independence assumed), times the no-cue pool."""
    sampled = [name for name, _ in mine if weights[name] != 1.0]
    if not sampled or any(gold[name] == positive for name in sampled):
        return
    pool = sum(weights[name] for name in sampled)
    unseen = pool * float(1 - boundary_bound(len(sampled)))
    for row in rows:
        if row["measure"] == "recall":
            found = row["value"] * sum(gold[name] == positive for name, _ in mine)  # the rule's positives (weight 1)
            row["ci_low"] = found / (sum(gold[name] == positive for name, _ in mine) + unseen)
            row["note"] = (
                f"no positive among the {len(sampled)} sampled no-cue records: lower end from 1 - 0.05^(1/{len(sampled)})"
            )


def _sample_weights(mine: list[tuple[str, dict]], answers: dict) -> dict[str, float]:
    """Each cue item weighs 1; each sampled no-cue item N_s / n_s (the no-cue records its split holds)."""
    cues = {a["id"]: bool(a["scope_contradictions"]) for a in answers["answers"]}
    split_of = {a["id"]: a["split"] for a in answers["answers"]}
    pool = {s: sum(1 for rid, c in cues.items() if not c and split_of[rid] == s) for s in SPLITS}
    sampled = {s: sum(1 for _, it in mine if not cues[it["record_id"]] and split_of[it["record_id"]] == s) for s in SPLITS}
    return {
        name: 1.0 if cues[it["record_id"]] else pool[split_of[it["record_id"]]] / sampled[split_of[it["record_id"]]]
        for name, it in mine
    }
