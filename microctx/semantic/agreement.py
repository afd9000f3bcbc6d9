"""Agreement between annotators: percent, Cohen's kappa (mean over pairs), Fleiss' kappa and
Krippendorff's alpha (nominal), each with a cluster-bootstrap interval over split components.

Every measure is a function of sums over items of per-item counts (how many labels of each
category, the coincidences, each pair's confusion), so one feature row per item, summed per split
component, is all the bootstrap needs: `microctx.grading.stats.bootstrap_totals` resamples whole
components (items of one component together) and each replicate's measure is computed from its
totals. The interval answers "how much would this agreement vary over other draws of components
like these" (on these records' population of components, beyond these very items); it assumes
components are independent and nothing inside one. `items`, `components` and `n_eff` (Kish's
effective number of components) stand beside each row.

Definitions (items with at least two labels; n_ic labels of category c on item i, n_i = sum_c n_ic):
- percent: mean over items of the share of agreeing label pairs;
- cohen_kappa: Cohen's kappa of each annotator pair on the items both labelled, then the mean
  over the pairs where it is defined (they share an item, and chance agreement is below 1);
- fleiss_kappa: (P - Pe) / (1 - Pe), P the mean over items of sum_c n_ic (n_ic - 1) / (n_i (n_i - 1)),
  Pe = sum_c p_c^2 with p_c the share of all labels in c (statsmodels' formula when n_i is constant);
- krippendorff_alpha: 1 - (n - 1) (n - sum_c o_cc) / (n^2 - sum_c n_c^2) over the coincidence matrix
  o_ck = sum_i (n_ic n_ik - [c = k] n_ic) / (n_i - 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np

from microctx.grading.stats import DEFAULT_N_BOOT, DEFAULT_SEED, bootstrap_totals, kish_n_eff, percentile_interval

MEASURES = ("percent", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha")
AGREEMENT_COLUMNS = ("question", "slice_kind", "slice", "measure", "value", "ci_low", "ci_high", "items", "components", "n_eff")


@dataclass
class Layout:
    """Where each part sits in an item's feature row (C categories, P annotator pairs)."""

    categories: list[str]
    pairs: list[tuple[str, str]]

    @property
    def c(self) -> int:
        return len(self.categories)

    @property
    def width(self) -> int:
        return 3 + self.c + self.c * self.c + len(self.pairs) * self.c * self.c


def item_features(labels: dict[str, str], layout: Layout) -> np.ndarray:
    """One item's row: [1, agreeing pair share, Fleiss P_i, n_c..., o_ck..., pair confusions...]."""
    c = layout.c
    index = {k: i for i, k in enumerate(layout.categories)}
    counts = np.zeros(c)
    for label in labels.values():
        counts[index[label]] += 1
    n = counts.sum()
    row = np.zeros(layout.width)
    row[0] = 1
    row[1] = row[2] = (counts * (counts - 1)).sum() / (n * (n - 1))
    row[3 : 3 + c] = counts
    row[3 + c : 3 + c + c * c] = ((np.outer(counts, counts) - np.diag(counts)) / (n - 1)).ravel()
    base = 3 + c + c * c
    for p, (a, b) in enumerate(layout.pairs):
        if a in labels and b in labels:
            row[base + p * c * c + index[labels[a]] * c + index[labels[b]]] = 1
    return row


def kappa_from_confusion(confusion: np.ndarray) -> np.ndarray:
    """Cohen's kappa from (..., C, C) confusion counts; NaN where no item or no chance disagreement."""
    total = confusion.sum(axis=(-2, -1))
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = np.trace(confusion, axis1=-2, axis2=-1) / total
        expected = (confusion.sum(axis=-1) * confusion.sum(axis=-2)).sum(axis=-1) / (total * total)
        return np.where(total > 0, (observed - expected) / (1 - expected), np.nan)


def measures_from_totals(totals: np.ndarray, layout: Layout) -> dict[str, np.ndarray]:
    """Each measure from (R, width) summed feature rows (R replicates, or one row of the data)."""
    c = layout.c
    t = np.atleast_2d(totals)
    items = t[:, 0]
    counts = t[:, 3 : 3 + c]
    coincidence = t[:, 3 + c : 3 + c + c * c].reshape(-1, c, c)
    pairs = t[:, 3 + c + c * c :].reshape(-1, len(layout.pairs), c, c)
    with np.errstate(invalid="ignore", divide="ignore"):
        percent = np.where(items > 0, t[:, 1] / items, np.nan)
        share = counts / counts.sum(axis=1, keepdims=True)
        pe = (share * share).sum(axis=1)
        fleiss = (t[:, 2] / items - pe) / (1 - pe)
        n_c = coincidence.sum(axis=2)
        n = n_c.sum(axis=1)
        alpha = 1 - (n - 1) * (n - np.trace(coincidence, axis1=1, axis2=2)) / (n * n - (n_c * n_c).sum(axis=1))
        kappas = kappa_from_confusion(pairs)
        defined = (pairs.sum(axis=(2, 3)) > 0) & ~np.isnan(kappas)  # a pair with no item, or no chance disagreement, is left out
        cohen = np.where(defined.any(axis=1), np.where(defined, kappas, 0).sum(axis=1) / defined.sum(axis=1), np.nan)
    return {"percent": percent, "cohen_kappa": cohen, "fleiss_kappa": fleiss, "krippendorff_alpha": alpha}


def agreement_rows(
    labels: dict[str, dict[str, str]],
    components: dict[str, object],
    categories: list[str],
    annotators: list[str],
    *,
    n_boot: int = DEFAULT_N_BOOT,
    seed: int = DEFAULT_SEED,
) -> list[dict]:
    """One row per measure for a set of items: `labels` item -> {annotator: label}, `components`
    item -> its split component. Items with fewer than two labels are left out."""
    layout = Layout(list(categories), list(combinations(sorted(annotators), 2)))
    kept = sorted(i for i, given in labels.items() if len(given) >= 2)
    empty = {"value": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "items": 0, "components": 0, "n_eff": 0.0}
    if not kept:
        return [{"measure": m, **empty} for m in MEASURES]
    groups = sorted({str(components[i]) for i in kept})
    position = {g: k for k, g in enumerate(groups)}
    per_component = np.zeros((len(groups), layout.width))
    for i in kept:
        per_component[position[str(components[i])]] += item_features(labels[i], layout)
    point = measures_from_totals(per_component.sum(axis=0), layout)
    replicates = measures_from_totals(bootstrap_totals(per_component, n_boot, seed), layout)
    n_eff = float(kish_n_eff(per_component[:, 0]))
    rows = []
    for m in MEASURES:
        low, high, _ = percentile_interval(replicates[m][:, None])
        rows.append(
            {
                "measure": m,
                "value": float(point[m][0]),
                "ci_low": float(low[0]),
                "ci_high": float(high[0]),
                "items": len(kept),
                "components": len(groups),
                "n_eff": round(n_eff, 3),
            }
        )
    return rows


def pair_confusions(labels: dict[str, dict[str, str]], categories: list[str], annotators: list[str]) -> dict:
    """(a, b) -> C x C confusion counts (rows a's label, columns b's) over the items both labelled."""
    index = {k: i for i, k in enumerate(categories)}
    out = {}
    for a, b in combinations(sorted(annotators), 2):
        matrix = np.zeros((len(categories), len(categories)), dtype=int)
        for given in labels.values():
            if a in given and b in given:
                matrix[index[given[a]], index[given[b]]] += 1
        out[(a, b)] = matrix
    return out
