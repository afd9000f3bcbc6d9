"""Make the tiny synthetic corpus the unit tests use (no s8f file needed): 60 invented issues.

    python tests/data/make_synthetic.py     # rewrites tests/data/synthetic-*.json

Deterministic (a fixed seed, fixed timestamps). The issues carry what the tests need to see:
labels (a common one, rare ones, none), open and closed states, `#N` references inside the corpus
and outside it, explicit duplicates ("Duplicate of #N", "superseded by #N"), the five cue words
(one in upper case), a chain of references that forms a component, an identical title pair,
a non-ASCII body, and days without any event. The raw export is frozen with microctx itself
into the public corpus, answer bundle and report committed beside this script.
"""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

SOURCE = "synthetic:microctx-tests/60-issues"
N = 60
FIRST = 101  # issue numbers 101..160
LABELS = ["bug", "enhancement", "docs", "question", "perf", "security"]
CUES = ["conflict", "contradict", "disagree", "inconsistent", "mismatch"]
WORDS = (
    "parser cache index loader export grade split corpus token widget chart report timeline "
    "label state reference record freeze verify answer bundle digest"
).split()


def make_export() -> list[dict]:
    rng = random.Random(12)
    start = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    rows = []
    for k in range(N):
        number = FIRST + k
        # days 10..13 have no event at all: the timeline must show them as zero
        day = k // 3 + (4 if k // 3 >= 10 else 0)
        created = start + timedelta(days=day, hours=rng.randrange(0, 12), minutes=rng.randrange(60))
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(8, 30)))
        body = f"Observed while testing the {rng.choice(WORDS)}: {words}."
        if k % 4 == 1:
            body += f" Related to #{number - 1}."
        if k % 9 == 2:
            body += " See also #9999 (another tracker) and #5 upstream."
        if k % 10 == 3:
            body += f"\n\nDuplicate of #{number - 2}"
        if k == 30:
            body += f"\nSuperseded by #{FIRST + 40}"
        if k % 7 == 0:
            body += f" The results {CUES[(k // 7) % 5]} with the docs."
        if k == 14:
            body += " A MISMATCH in upper case."
        if k == 21:
            body += " Ünïcödé body: naïve café, İstanbul, ſ and K (Kelvin)."
        if 40 <= k < 46:  # a chain: 141 <- 142 <- ... <- 146
            body += f" Follows #{number - 1}."
        labels = []
        if k % 2 == 0:
            labels.append("bug")
        if k % 3 == 0:
            labels.append("enhancement")
        if k % 11 == 0:
            labels.append(rng.choice(LABELS[2:]))
        if k == 17:
            labels = []
        closed = k % 5 in (0, 2) and k != 55
        closed_at = created + timedelta(days=rng.randrange(1, 5), hours=3) if closed else None
        updated = (closed_at or created) + timedelta(hours=1)
        title = f"{rng.choice(WORDS).capitalize()} {rng.choice(WORDS)} fails when {rng.choice(WORDS)} is empty"
        if k in (50, 51):
            title = "Identical title shared by two issues"
        rows.append(
            {
                "number": number,
                "title": title,
                "body": body,
                "state": "CLOSED" if closed else "OPEN",
                "labels": [{"name": name} for name in labels],
                "createdAt": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "updatedAt": updated.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "closedAt": closed_at.strftime("%Y-%m-%dT%H:%M:%SZ") if closed_at else None,
                "url": f"https://github.com/example/synthetic/issues/{number}",
            }
        )
    return rows


def main() -> None:
    import microctx

    rows = make_export()
    raw = HERE / "synthetic-raw.json"
    raw.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n")
    frozen = microctx.freeze(raw, source=SOURCE)
    frozen.write(HERE / "synthetic-public.json", HERE / "synthetic-answers.json", HERE / "synthetic-report.json")
    print(frozen.summary)


if __name__ == "__main__":
    main()
