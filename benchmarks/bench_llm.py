"""What an `llm` run on s8f costs in calls and tokens, per mode, measured against the local fake server.

Each configuration runs through the isolated runner (`microctx run llm ...`, process mode) against
tests/fake_openai.py, a deterministic OpenAI-compatible server that answers correctly. Its token
counts are characters / 4 (no real tokenizer), so read the token figures as an estimate of a
real model's; calls and prompts are exact. Dollars use the price given on the command line
(default: $0.15 per million input tokens, $0.075 cached, $0.60 output: an example price, not a
quote of any provider). Wall seconds measure the fake server, not a model.

    python benchmarks/bench_llm.py
    python benchmarks/bench_llm.py --price-in 2.5 --price-out 10 --price-cached 1.25
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI  # noqa: E402

from microctx.candidates.runner import run_candidate  # noqa: E402
from microctx.contract.schemas import load_answers, load_submission  # noqa: E402
from microctx.contract.score import grade  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402

CONFIGURATIONS = [
    ("hybrid", {"mode": "hybrid"}),
    ("micro", {"mode": "micro"}),
    ("micro, task=labels, retrieval_k=3", {"mode": "micro", "task": "labels", "retrieval_k": 3}),
    ("long, 32k context", {"mode": "long", "context_tokens": 32768}),
    ("long, 128k context", {"mode": "long", "context_tokens": 131072}),
    ("chunks of 20", {"mode": "chunks", "chunk_records": 20}),
    ("chunks of 20, overlap 5", {"mode": "chunks", "chunk_records": 20, "overlap": 5}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--price-in", type=float, default=0.15)
    parser.add_argument("--price-out", type=float, default=0.60)
    parser.add_argument("--price-cached", type=float, default=0.075)
    args = parser.parse_args()
    paths = data.s8f()
    gold = load_answers(paths.answers)
    oracle = {a["id"]: a for a in gold["answers"]}
    print(
        f"s8f, 1,000 records; price per million tokens: in ${args.price_in}, cached ${args.price_cached}, out ${args.price_out}"
    )
    print(f"{'configuration':36} {'calls':>6} {'input tok':>10} {'cached':>9} {'output':>8} {'dollars':>8} {'wall s':>7}  grade")
    with tempfile.TemporaryDirectory() as folder:
        for label, params in CONFIGURATIONS:
            with FakeOpenAI(oracle=oracle) as fake:
                out = Path(folder) / "llm.json"
                manifest = run_candidate(
                    "llm",
                    paths.public,
                    out,
                    params={
                        "base_url": fake.base_url,
                        "model": "fake-model",
                        "concurrency": 8,
                        "price_in": args.price_in,
                        "price_out": args.price_out,
                        "price_cached": args.price_cached,
                        **params,
                    },
                )
            if not manifest["ok"]:
                print(f"{label:36} FAILED: {manifest['error']}")
                continue
            c = manifest["counters"]
            verdict = grade(gold, load_submission(out)).summary().split(",")[0]
            print(
                f"{label:36} {c['model_calls']:>6,} {c['input_tokens']:>10,} {c['cached_tokens']:>9,} "
                f"{c['output_tokens']:>8,} {c['cost_microdollars'] / 1e6:>8.4f} {manifest['wall_seconds']:>7.2f}  {verdict}"
            )


if __name__ == "__main__":
    main()
