"""Time each report on the s8f corpus (target: a grade report under 20 s).

    python benchmarks/bench_reports.py [--repeat N]

Makes the demo's oracle and planted submissions in a temporary folder, then times, end to end as
the CLI runs them (input checks, kernel start, papermill execution, HTML export, publish):
`report corpus`, `report grade` (planted submission), `report compare` (oracle vs planted).
Also times the in-process parts a grade report is made of (grade + slices, chart rendering) so a
slow report can be pinned on its stage. Prints one line per figure; the best of N runs.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
from pathlib import Path

from timing import best_of

from microctx.contract.canonical import dumps
from microctx.contract.schemas import load_answers
from microctx.corpus import snapshot as data
from microctx.grading.examples import demo_submissions
from microctx.reports import build as reports
from microctx.reports import charts, tables

GRADE_TARGET_SECONDS = 20.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    paths = data.s8f()
    answers = load_answers(paths.answers)
    with tempfile.TemporaryDirectory(prefix="bench-reports-") as tmp:
        tmp = Path(tmp)
        subs = {}
        for name, sub in demo_submissions(answers).items():
            subs[name] = tmp / f"{name}.json"
            subs[name].write_bytes(dumps(sub))
        public, gold = str(paths.public), str(paths.answers)

        # stages in process
        inputs = tables.load_inputs(public, gold, [str(subs["planted"])])
        stage = best_of(args.repeat, lambda: tables.grade_outputs(inputs))
        print(f"grade + slice table (1000 bootstrap replicates), in process: {stage:.2f} s")
        table = tables.grade_outputs(inputs).slices
        for build in (charts.slice_f1, charts.precision_recall, charts.outcomes_by_kind):
            seconds = best_of(args.repeat, lambda build=build: charts.render(build(table)))
            print(f"render {build.__name__} (SVG + PNG): {seconds:.2f} s")

        # whole reports, as the CLI makes them
        runs = {
            "corpus": lambda: reports.corpus_report(public, tmp / "corpus", progress=False),
            "grade": lambda: reports.grade_report(public, gold, str(subs["planted"]), tmp / "grade", progress=False),
            "compare": lambda: reports.compare_report(
                public, gold, [str(subs["oracle"]), str(subs["planted"])], tmp / "compare", progress=False
            ),
        }
        figures = {kind: best_of(args.repeat, run) for kind, run in runs.items()}
        for kind, seconds in figures.items():
            print(f"report {kind}: {seconds:.1f} s end to end")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kernels = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak memory: this process {peak:.0f} MiB, largest kernel {kernels:.0f} MiB")
    verdict = "meets" if figures["grade"] < GRADE_TARGET_SECONDS else "MISSES"
    print(f"grade report {figures['grade']:.1f} s {verdict} the {GRADE_TARGET_SECONDS:.0f} s target")
    return 0 if figures["grade"] < GRADE_TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())
