"""The demo job: the README's main flow end to end on the s8f corpus.

verify the published artifacts -> make submissions -> grade each -> corpus report, one grade
report per submission, compare report. Submissions are either the built-in candidates run by
`microctx.candidates` (`exact-sql`, and `text-only` tuned on a train/tune devkit), or the planted
pair: the published answers submitted as an oracle, and `planted_submission`, made from them
deterministically with known faults. Everything is built in a staging folder beside the
destination and renamed into place at the end (see `reports.staged_folder`).

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
from pathlib import Path

from microctx._io.atomic import atomic_write
from microctx.contract.canonical import dumps
from microctx.contract.schemas import DEMO_SCHEMA
from microctx.grading.examples import demo_submissions

DEMO_MANIFEST = "demo.json"
BUILTIN_CANDIDATES = ("exact-sql", "text-only")


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


def make_submissions(mode: str, paths, answers: dict, folder: Path, timeout: float | None = None) -> dict:
    """Write the submissions into `folder`; returns {name: path} of the usable ones.

    mode "candidates": run each built-in candidate (a failed run is reported and left out);
    mode "planted": write the oracle and the planted submission.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if mode == "planted":
        made = {}
        for name, sub in demo_submissions(answers).items():
            atomic_write(folder / f"{name}.json", dumps(sub))
            made[name] = folder / f"{name}.json"
        return made
    from microctx.candidates.devkit import make_devkit
    from microctx.candidates.runner import run_candidate

    devkit = folder.parent / "devkit.json"
    atomic_write(devkit, dumps(make_devkit(answers)))
    made = {}
    for name in BUILTIN_CANDIDATES:
        _say(f"demo: running candidate {name}")
        manifest = run_candidate(name, paths.public, folder / f"{name}.json", devkit=devkit, timeout=timeout)
        if manifest.get("ok"):
            made[name] = folder / f"{name}.json"
            _say(f"demo: {name} ok in {manifest.get('wall_seconds')} s")
        else:
            _say(f"demo: {name} failed: {manifest.get('error')}")
    return made


def run_reports(jobs: dict, folders: dict, workers: int) -> None:
    """Make the reports, `workers` at a time (each runs its own kernel process, so two cores
    make two reports at once); the first failure is raised after the running ones finish."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = {}
        for key, job in jobs.items():
            _say(f"demo: {key} report")
            futures[key] = pool.submit(job, folders[key])
        for future in futures.values():
            future.result()


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
    from microctx.contract.facts import write_grade
    from microctx.contract.schemas import load_answers, load_submission
    from microctx.contract.score import grade
    from microctx.errors import ContractError
    from microctx.reports import build as reports

    with reports.staged_folder(out, marker=DEMO_MANIFEST) as staging:
        verified = verify_step(paths)
        _say(f"demo: verify {verified}")
        answers = load_answers(paths.answers)
        submissions = make_submissions(mode, paths, answers, staging / "submissions", timeout=timeout)
        if not submissions:
            raise ContractError("no candidate produced a usable submission")
        grades = {}
        for name, path in submissions.items():
            result = grade(answers, load_submission(path))
            write_grade(result, staging / "grades" / f"{name}.json")
            grades[name] = result.grade
            _say(f"demo: grade {name}: {result.summary()}")
        public, gold = str(paths.public), str(paths.answers)
        jobs = {"corpus": lambda out: reports.corpus_report(public, out, progress=progress)}
        for name, path in submissions.items():
            jobs[f"grade-{name}"] = (lambda p: lambda out: reports.grade_report(public, gold, str(p), out, progress=progress))(
                path
            )
        if len(submissions) >= 2:
            jobs["compare"] = lambda out: reports.compare_report(
                public, gold, [str(p) for p in submissions.values()], out, names=list(submissions), progress=progress
            )
        report_dirs = {key: staging / "reports" / key for key in jobs}
        run_reports(jobs, report_dirs, workers)
        manifest = {
            "schema": DEMO_SCHEMA,
            "mode": mode,
            "verify": verified,
            "submissions": {n: p.relative_to(staging).as_posix() for n, p in submissions.items()},
            "grades": grades,
            "reports": {k: d.relative_to(staging).as_posix() for k, d in report_dirs.items()},
            "seconds": round(time.perf_counter() - start, 3),
        }
        atomic_write(staging / DEMO_MANIFEST, dumps(manifest))
    return manifest
