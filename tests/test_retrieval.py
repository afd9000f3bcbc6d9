"""The retrieval candidate: BM25 against a hand computation, leave-one-out, and a run on s8f."""

from __future__ import annotations

import json
import math

import pytest

from microctx.api import grade
from microctx.candidates.builtins import retrieval
from microctx.candidates.runner import manifest_path
from microctx.cli import main
from microctx.grading import slices


def test_bm25_matches_a_hand_computation():
    docs = ["apple apple banana", "banana cherry", "cherry cherry cherry durian"]
    index = retrieval.BM25Index(k1=1.2, b=0.75).fit(docs)
    lengths = [3, 2, 4]
    avg = sum(lengths) / 3

    def term(tf, df, length):
        idf = math.log(1 + (3 - df + 0.5) / (df + 0.5))
        return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * length / avg))

    scores = index.scores(["banana cherry"])[0]
    expected = [term(1, 2, 3), term(1, 2, 2) + term(1, 2, 2), term(3, 2, 4)]
    assert scores == pytest.approx(expected, rel=1e-12)
    assert index.nearest(["banana cherry"], 2) == [[(1, pytest.approx(expected[1])), (2, pytest.approx(expected[2]))]]
    assert index.nearest(["zebra"], 3) == [[]]  # nothing shares a term: no neighbour


def test_a_record_never_votes_for_itself(s8f_corpus):
    records = [dict(r) for r in s8f_corpus.records]
    pool = [r for r in records if r["split"] in ("train", "tune")]
    nearest = retrieval.neighbours(records, pool, {"k": 1})
    # a train record that is some other record's nearest neighbour
    t = next(i for i, r in enumerate(records) if r["split"] == "train" and any(pool[n[0]]["id"] == r["id"] for n in nearest if n))
    followers = [j for j, n in enumerate(nearest) if n and pool[n[0]]["id"] == records[t]["id"]]
    before, _ = retrieval.predict(records, {"k": 1, "min_share": 1.0})
    records[t] = {**records[t], "labels": ["planted-label"]}
    after, _ = retrieval.predict(records, {"k": 1, "min_share": 1.0})
    assert after[t] == before[t]  # its own public labels never vote for it
    assert followers and all(after[j]["labels"] == ["planted-label"] for j in followers)
    assert all(after[j] == before[j] for j in range(len(records)) if j not in followers)


def test_bad_parameters():
    for params, match in [
        ({"k": 0}, "k"),
        ({"rerank": "dense"}, "rerank"),
        ({"min_share": 2}, "min_share"),
        ({"task": "all"}, "task"),
    ]:
        with pytest.raises(ValueError, match=match):
            retrieval.predict([], params)


@pytest.mark.parametrize("rerank", ["none", "cosine"])
def test_retrieval_on_s8f_changes_only_labels(s8f, s8f_corpus, tmp_path, rerank):
    out = tmp_path / f"retrieval-{rerank}.json"
    assert main(["run", "retrieval", "--public", str(s8f.public), "--submission", str(out), "--param", f"rerank={rerank}"]) == 0
    manifest = json.loads(manifest_path(out).read_text())
    assert manifest["counters"]["model_calls"] == 0 and manifest["parameters"]["rerank"] == rerank
    result = grade(s8f.answers, out)
    table = slices.slice_table(slices.facts_frame(result.facts), s8f_corpus, n_boot=50)
    kinds = table[table.slice_kind == "fact_kind"].set_index("slice")
    assert kinds.loc[["state", "ref", "dup", "contradiction"], "f1"].eq(1.0).all()
    assert 0.3 < kinds.loc["label", "f1"] < 0.95  # a real but imperfect predictor
    assert not result.passed
