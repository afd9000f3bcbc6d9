"""The devkit: an answer file for tuning that holds the answers of the train and tune splits only.

It keeps the answers schema (fak-microcontext-answers/1) and the corpus digest, so the same
loaders and the grader read it, and the runner can check it belongs to the corpus it is run on.
The gold aggregates count every split, test included, so they would leak test facts (test
label counts, for one); the devkit's aggregates are recomputed over its own splits instead:
`state_counts` and `label_counts` from its answers, and the two top-10 id lists from the
public corpus's timestamps when a corpus is given (empty lists otherwise: answers carry no
timestamps). The `devkit` key says which splits and how the aggregates were made.
"""

from __future__ import annotations

from collections import Counter

from microctx.contract.schemas import ANSWER_FIELDS, ANSWERS_SCHEMA
from microctx.corpus.freeze import top_ten_ids
from microctx.errors import InputError

ALLOWED_SPLITS = ("train", "tune")
_LIST_FIELDS = tuple(key for key, (_, _, is_list) in ANSWER_FIELDS.items() if is_list)


def top_ids(records: list[dict], key: str) -> list[str]:
    """Ten ids by instant of `key`, latest first, ties by the higher issue number."""
    from microctx.contract.timestamps import parse_timestamp

    return top_ten_ids((parse_timestamp(r[key]).instant_ns, r["number"]) for r in records)


def make_devkit(answers: dict, splits=ALLOWED_SPLITS, *, corpus=None) -> dict:
    """The devkit document for `splits` of a (validated) answer bundle. `test` is refused.

    `corpus` (a Corpus or its document, bound to the same digest) lets the top-10 lists be
    recomputed over the devkit's records.
    """
    splits = tuple(dict.fromkeys(splits))
    if not splits:
        raise InputError("--splits", "no split given; expected some of train, tune")
    for split in splits:
        if split == "test":
            raise InputError("--splits", "test answers never go into a devkit: they are what the grade holds out")
        if split not in ALLOWED_SPLITS:
            raise InputError("--splits", f"unknown split {split!r}; expected some of {', '.join(ALLOWED_SPLITS)}")
    # a null list (the schema allows it in gold answers) means none: written as [] for the tuner
    kept = [
        {key: ([] if value is None and key in _LIST_FIELDS else value) for key, value in a.items()}
        for a in answers["answers"]
        if a["split"] in splits
    ]
    states = Counter(a["state"] for a in kept)
    labels = Counter(label for a in kept for label in a["labels"])
    aggregates = {
        "state_counts": dict(sorted(states.items())),
        "label_counts": dict(sorted(labels.items())),
        "newest_issue_ids": [],
        "most_recently_updated_issue_ids": [],
    }
    how = "state_counts and label_counts over these splits only"
    if corpus is not None:
        document = getattr(corpus, "document", corpus)
        digest = getattr(corpus, "sha256", None)
        if digest is not None and digest != answers["corpus_sha256"]:
            raise InputError(
                getattr(corpus, "path", "corpus"), f"corpus {digest} is not the answers' corpus {answers['corpus_sha256']}"
            )
        records = [r for r in document["records"] if r["split"] in splits]
        aggregates["newest_issue_ids"] = top_ids(records, "created_at")
        aggregates["most_recently_updated_issue_ids"] = top_ids(records, "updated_at")
        how += "; the top-10 id lists over these splits' records of the public corpus"
    else:
        how += "; the top-10 id lists are empty (no public corpus given)"
    return {
        "schema": answers.get("schema", ANSWERS_SCHEMA),
        "corpus_sha256": answers["corpus_sha256"],
        "answers": kept,
        "aggregates": aggregates,
        "devkit": {"splits": list(splits), "aggregates": how},
    }
