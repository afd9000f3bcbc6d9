"""A candidate whose tune quality and cost are planted by its parameters, for sweep tests.

It answers every record from the public record itself (state and labels are public, relations
and cue words by the contract's patterns), which is exact, then spoils it on purpose:
- `miss` (0-10): records whose number ends in a digit below `miss` get no labels, so the tune
  F1 falls as `miss` grows, by amounts fixed by the corpus;
- `calls`: `model_calls` is reported as `calls * (10 - miss)` (the cost a selection rule weighs);
- `sleep`: seconds to wait before answering (so a test can kill a worker mid-task);
- `fail`: true makes this configuration crash.
Aggregates are counted from the public records, so with `miss = 0` the submission passes the test
grade. It reports which splits its devkit held as its version, `devkit-splits:<splits>`, so a
test can check that a sweep's candidate never saw a tune answer.
"""

import json
import time
from collections import Counter


def run(public_path, output_path, *, devkit_path=None, params=None):
    from microctx.contract.patterns import duplicate_targets, issue_text, references, scope_contradictions

    params = params or {}
    if params.get("fail"):
        raise RuntimeError(f"planted failure for {params}")
    time.sleep(float(params.get("sleep", 0)))
    with open(public_path, "rb") as handle:
        corpus = json.load(handle)
    miss = int(params.get("miss", 0))
    answers = []
    for r in corpus["records"]:
        text = issue_text(r["title"], r["body"])
        labels = [] if r["number"] % 10 < miss else sorted(r["labels"] or [])
        answers.append(
            {
                "id": r["id"],
                "split": r["split"],
                "state": r["state"],
                "labels": labels,
                "references": references(text),
                "duplicate_targets": duplicate_targets(text),
                "scope_contradictions": scope_contradictions(r["body"]),
            }
        )
    import hashlib

    from microctx.candidates.devkit import top_ids

    digest = hashlib.sha256(open(public_path, "rb").read()).hexdigest()
    aggregates = {
        "state_counts": dict(Counter(r["state"] for r in corpus["records"])),
        "label_counts": dict(Counter(label for r in corpus["records"] for label in r["labels"] or [])),
        "newest_issue_ids": top_ids(corpus["records"], "created_at"),
        "most_recently_updated_issue_ids": top_ids(corpus["records"], "updated_at"),
    }
    with open(output_path, "w") as handle:
        json.dump(
            {"schema": "fak-microcontext-submission/1", "corpus_sha256": digest, "answers": answers, "aggregates": aggregates},
            handle,
        )
    splits = "none"
    if devkit_path:
        with open(devkit_path, "rb") as handle:
            splits = ",".join(sorted(Counter(a["split"] for a in json.load(handle)["answers"])))
    # the better the answers, the more calls: a least-cost rule must trade quality for cost
    return {"model_calls": int(params.get("calls", 0)) * (10 - miss), "version": f"devkit-splits:{splits}"}
