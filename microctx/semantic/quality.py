"""Per-annotator quality from a consensus model: Dawid-Skene (1979), fitted by EM.

Each annotator has a confusion matrix (P(label given | true class)); classes have priors; items'
true classes are latent. Initialised from the majority vote's class shares per item, then E and M
steps alternate until the item posteriors stop moving (the same steps as crowd-kit's DawidSkene,
against which tests check it). An annotator's `accuracy` is sum_c prior_c * P(c given | c), and
`kappa` is Cohen's kappa of their labels against the consensus (the most probable class); one
whose kappa is below `CARELESS_BELOW` is flagged: a careless annotator (random labels) lands near
0, a careful one near their chance-corrected accuracy. Only an annotator with at least
`MIN_LABELS_TO_FLAG` labels on the question is judged (on s8f's 12 duplicate edges each annotator
gives about 8 labels: too few to call anyone careless, so nobody is flagged there). The figures
describe these items and this model (conditional independence of annotators given the true
class); they carry no interval.
"""

from __future__ import annotations

import numpy as np

from microctx.semantic.agreement import kappa_from_confusion

EPS = float(np.finfo(float).eps)
CARELESS_BELOW = 0.4
MIN_LABELS_TO_FLAG = 20


def dawid_skene(labels: list[tuple[str, str, str]], categories: list[str], *, max_iter: int = 500, tol: float = 1e-10) -> dict:
    """Fit on (item, annotator, label) triples. Returns items, annotators, `posteriors` (items x C),
    `priors` (C), `errors` (annotators x given x true), `consensus` item -> label, `accuracy` and
    `flagged` per annotator."""
    items = sorted({t for t, _, _ in labels})
    workers = sorted({w for _, w, _ in labels})
    ti = {t: i for i, t in enumerate(items)}
    wi = {w: i for i, w in enumerate(workers)}
    ci = {c: i for i, c in enumerate(categories)}
    rows = np.array([ti[t] for t, _, _ in labels], dtype=int)
    cols = np.array([wi[w] for _, w, _ in labels], dtype=int)
    given = np.array([ci[x] for _, _, x in labels], dtype=int)
    c = len(categories)
    votes = np.zeros((len(items), c))
    np.add.at(votes, (rows, given), 1)
    post = votes / votes.sum(axis=1, keepdims=True)
    priors, errors = _m_step(post, rows, cols, given, len(workers), c)
    for _ in range(max_iter):
        new = _e_step(priors, errors, rows, cols, given, len(items), c)
        priors, errors = _m_step(new, rows, cols, given, len(workers), c)
        moved = float(np.abs(new - post).max())
        post = new
        if moved < tol:
            break
    accuracy = (errors[:, np.arange(c), np.arange(c)] * priors[None, :]).sum(axis=1)
    best = np.argmax(post, axis=1)
    kappa = {}
    given_by = {w: int((cols == i).sum()) for w, i in wi.items()}
    for w, i in wi.items():
        mine = cols == i
        confusion = np.zeros((c, c))
        np.add.at(confusion, (given[mine], best[rows[mine]]), 1)
        kappa[w] = float(kappa_from_confusion(confusion))
    return {
        "items": items,
        "annotators": workers,
        "categories": list(categories),
        "posteriors": post,
        "priors": priors,
        "errors": errors,
        "consensus": {t: categories[int(np.argmax(post[i]))] for t, i in ti.items()},
        "accuracy": {w: float(accuracy[i]) for w, i in wi.items()},
        "kappa": kappa,
        "labels": given_by,
        "flagged": sorted(w for w in workers if given_by[w] >= MIN_LABELS_TO_FLAG and not kappa[w] >= CARELESS_BELOW),
    }


def _m_step(post, rows, cols, given, n_workers, c):
    errors = np.zeros((n_workers, c, c))  # worker, given label, true class
    np.add.at(errors, (cols, given), post[rows])
    errors = np.clip(errors, EPS, None)
    errors /= errors.sum(axis=1, keepdims=True)
    return post.mean(axis=0), errors


def _e_step(priors, errors, rows, cols, given, n_items, c):
    log = np.tile(np.log2(np.clip(priors, EPS, None)), (n_items, 1))
    np.add.at(log, rows, np.log2(errors[cols, given]))
    log -= log.max(axis=1, keepdims=True)
    scaled = np.exp2(log)
    return scaled / scaled.sum(axis=1, keepdims=True)
