"""retrieval: predict labels (and optionally state) from the nearest train/tune records.

Each record's title and body are matched by BM25 (Okapi; k1, b) against the train and tune
records of the same public corpus, the record itself excluded; their public labels are the votes.
A label is predicted when at least `min_share` of the `k` neighbours carry it; with
`task=text` the state is the neighbours' majority too (ties go to the nearest neighbour's state).
`rerank=cosine` re-orders the `rerank_depth` best BM25 hits by TF-IDF cosine (words and word
pairs) before the k are taken. The public record's own state and labels are never read for the
record being predicted (leave-one-out for train/tune records as well); references, duplicate
targets and cue words, and the state unless `task=text`, come from the exact frontier
(exact-sql's queries), so a grade's slices isolate what retrieval predicts. Aggregates are
counted from the submitted answers; the top-10 lists come from the public timestamps.

`BM25Index` is also what the `llm` candidate uses to show similar records (`retrieval_k`).
No network and no model: counters report zero model calls and tokens.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

TASKS = ("labels", "text")
RERANKS = ("none", "cosine")


class BM25Index:
    """Okapi BM25 over a list of texts (scikit-learn's tokenizer: lower-cased words of 2+ characters).

    `fit(texts)` builds the weighted term matrix; `nearest(queries, k)` returns, per query, up to
    k (index, score) pairs, best first, ties by the lower index; documents sharing no term with
    the query are not returned.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75):
        self.k1 = k1
        self.b = b

    def fit(self, texts: list[str]) -> BM25Index:
        from scipy import sparse
        from sklearn.feature_extraction.text import CountVectorizer

        self.vectorizer_ = CountVectorizer(lowercase=True)
        counts = sparse.csr_matrix(self.vectorizer_.fit_transform(texts), dtype=np.float64)
        n = counts.shape[0]
        df = np.bincount(counts.indices, minlength=counts.shape[1])
        self.idf_ = np.log1p((n - df + 0.5) / (df + 0.5))
        lengths = np.asarray(counts.sum(axis=1)).ravel()
        norm = self.k1 * (1 - self.b + self.b * lengths / max(lengths.mean(), 1e-9))
        rows = np.repeat(np.arange(n), np.diff(counts.indptr))
        tf = counts.data
        weighted = counts.copy()
        weighted.data = tf * (self.k1 + 1) / (tf + norm[rows]) * self.idf_[counts.indices]
        self.weights_ = weighted.T.tocsr()  # terms x documents
        return self

    def scores(self, queries: list[str]):
        """(queries x documents) BM25 scores; a query term counts once per occurrence."""
        q = self.vectorizer_.transform(queries).astype(np.float64)
        return (q @ self.weights_).toarray()

    def nearest(self, queries: list[str], k: int, *, batch: int = 256) -> list[list[tuple[int, float]]]:
        out: list[list[tuple[int, float]]] = []
        for start in range(0, len(queries), batch):
            block = self.scores(queries[start : start + batch])
            for row in block:
                order = np.lexsort((np.arange(len(row)), -row))[:k]
                out.append([(int(i), float(row[i])) for i in order if row[i] > 0])
        return out


def _check(params: dict) -> dict:
    p = {
        "k": 10,
        "rerank": "none",
        "rerank_depth": 50,
        "min_share": 0.5,
        "task": "labels",
        "k1": 1.5,
        "b": 0.75,
        **(params or {}),
    }
    for key in ("k", "rerank_depth"):
        if isinstance(p[key], bool) or not isinstance(p[key], int) or p[key] < 1:
            raise ValueError(f"parameter {key}: expected a positive integer, got {p[key]!r}")
    if p["rerank"] not in RERANKS:
        raise ValueError(f"parameter rerank: expected one of {', '.join(RERANKS)}, got {p['rerank']!r}")
    if p["task"] not in TASKS:
        raise ValueError(f"parameter task: expected one of {', '.join(TASKS)}, got {p['task']!r}")
    for key, low, high in (("min_share", 0.0, 1.0), ("k1", 0.0, 100.0), ("b", 0.0, 1.0)):
        if isinstance(p[key], bool) or not isinstance(p[key], (int, float)) or not low <= p[key] <= high:
            raise ValueError(f"parameter {key}: expected a number in [{low}, {high}], got {p[key]!r}")
    return p


def _text(record: dict) -> str:
    return record["title"] + "\n" + record["body"]


def neighbours(records: list[dict], pool: list[dict], params: dict) -> list[list[int]]:
    """For each record, the indexes into `pool` of its k nearest pool records (itself excluded)."""
    p = _check(params)
    index = BM25Index(p["k1"], p["b"]).fit([_text(r) for r in pool])
    depth = max(p["k"], p["rerank_depth"] if p["rerank"] == "cosine" else 0) + 1
    hits = index.nearest([_text(r) for r in records], depth)
    found = [[i for i, _ in h if pool[i]["id"] != r["id"]] for r, h in zip(records, hits)]
    if p["rerank"] == "cosine":
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2)).fit([_text(r) for r in pool])
        pool_vectors = vectorizer.transform([_text(r) for r in pool])
        query_vectors = vectorizer.transform([_text(r) for r in records])
        reranked: list[list[int]] = []
        for q, candidates in enumerate(found):
            if not candidates:
                reranked.append([])
                continue
            sims = (pool_vectors[candidates] @ query_vectors[q].T).toarray().ravel()
            order = np.lexsort((np.arange(len(candidates)), -sims))
            reranked.append([candidates[i] for i in order])
        found = reranked
    return [f[: p["k"]] for f in found]


def predict(records: list[dict], params: dict | None = None) -> tuple[list[dict], dict]:
    """(predictions {id, labels[, state]} per record, statistics) from the train/tune records' public labels."""
    p = _check(params or {})
    pool = [r for r in records if r["split"] in ("train", "tune")]
    if not pool:
        raise ValueError("the corpus has no train or tune records to retrieve from")
    found = neighbours(records, pool, p)
    predictions = []
    for record, near in zip(records, found):
        votes = Counter(label for i in near for label in set(pool[i]["labels"] or []))
        labels = sorted(label for label, n in votes.items() if near and n >= p["min_share"] * len(near))
        prediction: dict = {"id": record["id"], "labels": labels}
        if p["task"] == "text":
            states = Counter(pool[i]["state"] for i in near)
            best = max(states.values()) if states else 0
            prediction["state"] = next((pool[i]["state"] for i in near if states[pool[i]["state"]] == best), "OPEN")
        predictions.append(prediction)
    stats = {"pool": len(pool), "without_neighbours": sum(1 for f in found if not f)}
    return predictions, stats


def run(public_path: str, output_path: str, *, devkit_path: str | None = None, params: dict | None = None) -> dict:
    """Candidate entry point (see microctx.candidates.registry): write the submission, return the counters."""
    from microctx._io.atomic import atomic_write
    from microctx.candidates.builtins.exact_sql import answer_corpus
    from microctx.candidates.devkit import top_ids
    from microctx.contract.canonical import dumps
    from microctx.corpus.public import load_corpus

    corpus = load_corpus(public_path)
    exact, statements = answer_corpus(public_path)
    predictions, stats = predict(corpus.records, params)
    answers = []
    for answer, prediction in zip(exact["answers"], predictions):
        answers.append({**answer, **{k: v for k, v in prediction.items() if k != "id"}})
    exact["answers"] = answers
    exact["aggregates"] = {
        "state_counts": dict(sorted(Counter(a["state"] for a in answers).items())),
        "label_counts": dict(sorted(Counter(label for a in answers for label in a["labels"]).items())),
        "newest_issue_ids": top_ids(corpus.records, "created_at"),
        "most_recently_updated_issue_ids": top_ids(corpus.records, "updated_at"),
    }
    atomic_write(output_path, dumps(exact))
    print(f"retrieval: BM25 over {stats['pool']} train/tune records; {stats['without_neighbours']} records without a neighbour")
    return {"model_calls": 0, "tool_calls": statements, "input_tokens": 0, "output_tokens": 0}
