"""The demo job: the README's main flow end to end on the s8f corpus.

verify the published artifacts -> make submissions -> grade each -> corpus report, one grade
report per submission, compare report. Submissions are either the built-in candidates run by
`microctx.candidates` (`exact-sql`, and `text-only` tuned on a train/tune devkit), or the planted
pair: the published answers submitted as an oracle, and `planted_submission`, made from them
deterministically with known faults. Everything is built in a staging folder beside the
destination and renamed into place at the end (see `reports.staged_folder`). The reports run two
at a time (`ReportPool`), each as soon as its inputs exist: the corpus report from the start,
beside verification and the candidate runs; a grade report once its submission is graded; the
compare report last.

Layout of the output folder:
    demo.json                       what was run, verdicts, and where everything is
    devkit.json                     (candidates only) train/tune answers for text-only
    submissions/<name>.json         each submission (+ <name>.run.json, the run manifest)
    grades/<name>.json              each grade (+ <name>.facts.csv)
    reports/corpus/                 corpus_overview report
    reports/grade-<name>/           grade_report per submission
    reports/compare/                compare_candidates report
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from microctx._io.atomic import atomic_write
from microctx.contract.canonical import dumps
from microctx.contract.schemas import DEMO_SCHEMA
from microctx.grading.examples import DEMO_CANDIDATES, demo_submissions

DEMO_MANIFEST = "demo.json"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def verify_step(paths) -> str:
    """Verify the three published files.

    Returns a one-line result; raises ContractError when verification finds problems.
    """
    from microctx.corpus import verify as verifying
    from microctx.errors import ContractError

    result = verifying.verify_files(paths.public, paths.answers, paths.report)
    if not result.ok:
        raise ContractError("verification failed: " + "; ".join(map(str, result.problems[:5])))
    return f"ok: {result.summary}"


def make_submissions(mode: str, paths, answers: dict, folder: Path, timeout: float | None = None, made=None) -> dict:
    """Write the submissions into `folder`; returns {name: path} of the usable ones, and calls
    `made(name, path)` as each one is written (so its grade report can start while the next
    candidate runs).

    mode "candidates": run each built-in candidate (a failed run is reported and left out);
    mode "planted": write the oracle and the planted submission.
    """
    folder.mkdir(parents=True, exist_ok=True)
    usable: dict = {}

    def keep(name: str, path: Path) -> None:
        usable[name] = path
        if made is not None:
            made(name, path)

    if mode == "planted":
        for name, sub in demo_submissions(answers).items():
            atomic_write(folder / f"{name}.json", dumps(sub))
            keep(name, folder / f"{name}.json")
        return usable
    from microctx.candidates.devkit import make_devkit
    from microctx.candidates.runner import run_candidate

    devkit = folder.parent / "devkit.json"
    atomic_write(devkit, dumps(make_devkit(answers)))
    for name in DEMO_CANDIDATES:
        _say(f"demo: running candidate {name}")
        manifest = run_candidate(name, paths.public, folder / f"{name}.json", devkit=devkit, timeout=timeout)
        if manifest.get("ok"):
            _say(f"demo: {name} ok in {manifest.get('wall_seconds')} s")
            keep(name, folder / f"{name}.json")
        else:
            _say(f"demo: {name} failed: {manifest.get('error')}")
    return usable


class ReportPool:
    """The demo's reports, `workers` at a time, each started as soon as its inputs exist (the
    corpus report at once, a grade report when its submission is graded), so reports overlap the
    verification and the candidate runs; each runs its own kernel process. `wait` raises the first
    failure after the running reports finish; leaving the block early (an error) cancels the
    reports not started and waits for the running ones, so nothing writes into a removed folder."""

    def __init__(self, workers: int, root: Path):
        from microctx.reports.build import SharedKernels

        self.kernels = SharedKernels()  # one kernel per worker thread, reused by its next report
        self.root = root
        self.folders: dict[str, Path] = {}
        self.futures: dict[str, Future] = {}
        self.pool = ThreadPoolExecutor(max_workers=max(1, workers))

    def submit(self, key: str, job) -> None:
        _say(f"demo: {key} report")
        self.folders[key] = self.root / key
        self.futures[key] = self.pool.submit(job, self.folders[key])

    def wait(self) -> None:
        for future in self.futures.values():
            future.result()

    def __enter__(self) -> ReportPool:
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.pool.shutdown(wait=True, cancel_futures=exc[0] is not None)
        finally:
            self.kernels.close()


def run_demo(
    out: str | os.PathLike, *, mode: str = "auto", progress: bool = True, timeout: float | None = None, workers: int | None = None
) -> dict:
    """The whole demo into `out`; returns the demo manifest (also written as demo.json).

    `workers`: reports made at once (default: 2 when there are at least 2 CPUs, else 1).
    """
    from microctx.corpus.snapshot import data_dir, s8f
    from microctx.grading.examples import DEMO_ENV

    if mode == "auto":
        mode = "candidates"
    if workers is None:
        workers = 2 if (os.cpu_count() or 1) >= 2 else 1
    start = time.perf_counter()
    paths = s8f(download=False) if data_dir() is not None else s8f()  # a data setting that fails is said, not downloaded around
    os.environ[DEMO_ENV] = "1"  # the demo's gradings (its report kernels inherit this) are marked looks, never counted
    try:
        return _demo_into(out, mode, paths, workers, timeout, progress, start)
    finally:
        os.environ.pop(DEMO_ENV, None)


def _demo_into(out, mode, paths, workers, timeout, progress, start) -> dict:
    from microctx.contract.schemas import load_answers
    from microctx.errors import ContractError
    from microctx.reports import build as reports

    public, gold = str(paths.public), str(paths.answers)
    with reports.staged_folder(out, marker=DEMO_MANIFEST) as staging, ReportPool(workers, staging / "reports") as pool:
        # the corpus report needs only the public corpus: it runs while verify and the candidates do
        pool.submit("corpus", lambda out: reports.corpus_report(public, out, progress=progress, kernels=pool.kernels))
        verified = verify_step(paths)
        _say(f"demo: verify {verified}")
        answers = load_answers(paths.answers)
        grades: dict = {}

        def graded(name: str, path: Path) -> None:
            grades[name] = _grade(answers, name, path, staging)
            pool.submit(
                f"grade-{name}",
                lambda out: reports.grade_report(public, gold, str(path), out, progress=progress, kernels=pool.kernels),
            )

        submissions = make_submissions(mode, paths, answers, staging / "submissions", timeout=timeout, made=graded)
        if not submissions:
            raise ContractError("no candidate produced a usable submission")
        if len(submissions) >= 2:
            pool.submit(
                "compare",
                lambda out: reports.compare_report(
                    public,
                    gold,
                    [str(p) for p in submissions.values()],
                    out,
                    names=list(submissions),
                    progress=progress,
                    kernels=pool.kernels,
                ),
            )
        pool.wait()
        manifest = {
            "schema": DEMO_SCHEMA,
            "mode": mode,
            "verify": verified,
            "submissions": {n: p.relative_to(staging).as_posix() for n, p in submissions.items()},
            "grades": grades,
            "reports": {k: d.relative_to(staging).as_posix() for k, d in pool.folders.items()},
            "seconds": round(time.perf_counter() - start, 3),
        }
        atomic_write(staging / DEMO_MANIFEST, dumps(manifest))
    return manifest


def _grade(answers: dict, name: str, path: Path, staging: Path) -> dict:
    """Grade one submission into grades/<name>.json (with its fact table); its grade document."""
    from microctx.contract.facts import write_grade
    from microctx.contract.schemas import load_submission
    from microctx.contract.score import grade

    result = grade(answers, load_submission(path))
    write_grade(result, staging / "grades" / f"{name}.json")
    _say(f"demo: grade {name}: {result.summary()}")
    return result.grade
