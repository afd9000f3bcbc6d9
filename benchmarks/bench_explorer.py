"""The corpus explorer at scale: build time, memory, and the time of each filter a user makes.

Builds `ExplorerData` (every filter column precomputed) on the s8f corpus and on a scale corpus
(benchmarks/scale.py), then times the filters a click makes (split, label, component, free text,
all combined), the record view and the widget refresh, each the median of `--repeat` runs.

    python benchmarks/bench_explorer.py [--records 100000] [--repeat 5] [--work /tmp/microctx-bench]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scale  # noqa: E402

from microctx import load_corpus  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402
from microctx.lab.explorer import Explorer, ExplorerData, Filters  # noqa: E402


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def bench(name: str, corpus, repeat: int) -> None:
    start = time.perf_counter()
    explorer = ExplorerData(corpus)
    build = time.perf_counter() - start
    label = explorer.labels[min(3, len(explorer.labels) - 1)]
    some = explorer.table["number"].iat[len(explorer) // 2]
    cases = {
        "no filter": Filters(),
        "split=test": Filters(split="test"),
        f"label={label}": Filters(label=label),
        f"component of #{some}": Filters(component=f"#{some}"),
        "text 'conflict'": Filters(text="conflict"),
        "text 'zzzz-nothing'": Filters(text="zzzz-nothing"),
        "split+state+label+text": Filters(split="test", state=explorer.states[0], label=label, text="the"),
    }
    print(
        f"{name}: {len(explorer):,} records; build {build:.2f} s; peak RSS so far "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )
    for case, filters in cases.items():
        seconds, rows = timed(lambda f=filters: explorer.filter(f), repeat)
        print(f"  filter {case:<32} {seconds * 1000:8.1f} ms  {len(rows):>8,} match")
    seconds, _ = timed(lambda: explorer.record_html(len(explorer) // 2), repeat)
    print(f"  record view                            {seconds * 1000:8.1f} ms")
    widget = Explorer(explorer)
    seconds, _ = timed(lambda: widget.text.set_trait("value", widget.text.value + "e"), 1)
    print(f"  widget refilter (text change)          {seconds * 1000:8.1f} ms")
    seconds, _ = timed(lambda: widget.open(len(explorer) // 2), repeat)
    print(f"  widget open record + neighbours        {seconds * 1000:8.1f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--work", default="/tmp/microctx-bench")
    args = parser.parse_args()
    bench("s8f", load_corpus(data.s8f().public), args.repeat)
    public, _ = scale.freeze_scale_corpus(args.work, args.records)
    bench(f"scale {args.records:,}", load_corpus(public), args.repeat)


if __name__ == "__main__":
    main()
