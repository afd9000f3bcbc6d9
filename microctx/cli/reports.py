"""`microctx slices`, `microctx report corpus|grade|compare|frontier` and `microctx demo`."""

from __future__ import annotations

import argparse
import math
import sys

from microctx.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    _check_paths,
    _report_done,
    _s8f_default,
    _say,
    _semantic_layer,
    _semantic_paths,
    _stage_semantic,
    _stats_kw,
    _stats_options,
    add_inputs,
)
from microctx.options import N_BOOT, SEED, seconds


def _semantic(args) -> str | None:
    """`--semantic`, checked before a kernel starts (microctx.semantic sits above the reports)."""
    if getattr(args, "semantic", None):
        from microctx.semantic.freeze import load_semantic

        load_semantic(args.semantic)
    return getattr(args, "semantic", None)


def cmd_report_semantic(args) -> int:
    from microctx.reports.build import ReportError
    from microctx.semantic.report import semantic_report

    _check_paths({"DIR": args.study_dir, "--semantic": args.semantic}, {}, {"--out": args.out})
    try:
        manifest = semantic_report(args.study_dir, args.semantic, args.out)
    except ReportError as exc:
        _say(f"microctx report semantic: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    return _report_done(manifest, args.out)


def cmd_slices(args) -> int:
    """Grade and write slices.csv without pandas: the record table as numpy columns, the facts
    straight from the grade, the CSV from the columns (the same bytes as `slices.slice_table` and
    `write_slices_csv`; tests/test_slices_cli.py compares them)."""
    import os

    # before numpy loads OpenBLAS: its second thread costs about 45 ms of CPU at start-up and only
    # slows the bootstrap's small products (grading.stats.one_blas_thread); a user's setting wins
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from microctx._io.jsonio import gc_paused

    semantic_in, semantic_out = _semantic_paths(args)
    _check_paths(
        {"--public": args.public, "--answers": args.answers, "--submission": args.submission, **semantic_in},
        {"--output": args.output, **semantic_out},
    )  # an --output that is an input (the gold answers) is refused
    # the inputs are trees (no cycles): without the collector walking the growing heap between
    # stages, about 1.3 s of CPU less at 100,000 records (docs/benchmarks.md, Slices)
    with gc_paused():
        return _slices(args, _stats_kw(args))


def _answers_after_corpus(public: str, answers: str) -> tuple[dict, str]:
    """The answer bundle and the digest of its bytes, read before the public corpus (whose cheaper
    reading needs its digest), its errors still named after the corpus's: a bad corpus is
    reported first, as when it was read first."""
    from microctx.contract.schemas import read_answers
    from microctx.errors import InputError

    try:
        return read_answers(answers)
    except InputError:
        from microctx.corpus.public import load_corpus

        load_corpus(public)
        raise


def _slices(args, kw: dict) -> int:
    import numpy as np

    from microctx._io.atomic import AtomicOutputs
    from microctx._io.csvout import columns_csv_bytes
    from microctx.contract.schemas import read_submission
    from microctx.contract.score import grade
    from microctx.grading.counts import FactCells, prepare_cells
    from microctx.grading.ledger import looks_line, record_graded
    from microctx.grading.records import bound_record_columns
    from microctx.grading.table import slice_columns

    answers, answers_sha256 = _answers_after_corpus(args.public, args.answers)
    records = bound_record_columns(args.public, answers)  # the derived fields read from bound answers
    submission, submission_sha256 = read_submission(args.submission)
    facts = FactCells()  # the fact rows as plain cells: no FactRow per fact
    result = grade(answers, submission, rows_to=facts)
    table = slice_columns(prepare_cells(facts.cells, records, "facts"), records, **kw)
    layer = _semantic_layer(args, answers, submission)
    # a grade on test: one look, marked as grade marks it (an example submission's is kept, not counted)
    entry = record_graded(
        args.answers,
        answers,
        submission,
        result.grade,
        via="slices",
        submission_path=args.submission,
        answers_sha256=answers_sha256,
        submission_sha256=submission_sha256,
    )
    look = looks_line(entry)
    with AtomicOutputs() as outputs:  # the slice table and the semantic layer's beside it: one set
        outputs.write(args.output, columns_csv_bytes(table))
        semantic_line = _stage_semantic(layer, args.output, outputs)
    judged = int((~np.isnan(table["p_value"])).sum())  # the slices the table judged (the method text's count)
    print(
        f"wrote {args.output}: {len(table['slice'])} slices, {int(table['weak'].sum())} weak of {judged} judged, "
        f"{int((~table['estimable']).sum())} not estimable (n_boot={kw['n_boot']}, seed={kw['seed']})"
    )
    print(look)
    if semantic_line:
        print(semantic_line)
    return EXIT_OK


def _slices_parsers(sub) -> None:
    p = sub.add_parser(
        "slices",
        help="grade a submission and write its slice table (slices.csv)",
        description="Grade SUBMISSION against ANSWERS and write the slice table: counts, cluster-"
        "bootstrap intervals, estimability and the Holm-adjusted weak-slice test per slice "
        "(docs/statistics.md). Same inputs and options, same bytes. Exit 0 written, "
        "2 unusable input.",
    )
    add_inputs(p, "--public", "--answers", "--submission")
    p.add_argument("--output", required=True, metavar="CSV", help="slice table to write (atomically)")
    p.add_argument("--semantic", metavar="semantic.json", help="also score cue and duplicate answers against adjudicated gold")
    _stats_options(p)
    p.set_defaults(func=cmd_slices)


def cmd_report(args) -> int:
    from microctx.reports import build as reports

    _s8f_default(args)
    given = getattr(args, "submission", None)
    submissions = given if isinstance(given, list) else [given]
    _check_paths(
        {
            "--public": args.public,
            "--answers": getattr(args, "answers", None),
            **{f"--submission {s}": s for s in submissions if s},
        },
        {},
        {"--out": args.out},
    )
    only = {"figures_only": args.figures_only}
    try:
        if args.report_kind == "corpus":
            manifest = reports.corpus_report(args.public, args.out, **only)
        elif args.report_kind == "grade":
            manifest = reports.grade_report(
                args.public, args.answers, args.submission, args.out, statistics=_stats_kw(args), semantic=_semantic(args), **only
            )
        else:
            manifest = reports.compare_report(
                args.public, args.answers, args.submission, args.out, names=args.name or (), statistics=_stats_kw(args), **only
            )
    except reports.ReportError as exc:
        _say(f"microctx report {args.report_kind}: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    return _report_done(manifest, args.out)


def cmd_demo(args) -> int:
    from microctx.demo import run_demo
    from microctx.reports.build import ReportError

    try:
        manifest = run_demo(args.out, mode=args.submissions, timeout=args.timeout, progress=sys.stderr.isatty())
    except ReportError as exc:
        _say(f"microctx demo: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    print(f"demo ({manifest['mode']}) -> {args.out}  [{manifest['seconds']:.0f} s]")
    print(f"verify: {manifest['verify']}")
    for name, g in manifest["grades"].items():
        verdict = "PASS" if g["quality_pass"] else "FAIL"
        print(f"grade {name}: {verdict} {g['exact_records']}/{g['test_records']} exact -> {args.out}/grades/{name}.json")
    for key, folder in manifest["reports"].items():
        print(f"report {key}: {args.out}/{folder}")
    return EXIT_OK


def _report_parsers(sub) -> None:
    p = sub.add_parser(
        "report",
        help="execute a report notebook with papermill: .ipynb, offline .html, charts",
        description="Execute a report notebook with papermill into a new folder OUT (built beside it and "
        "renamed into place when complete): the executed .ipynb, a self-contained .html, "
        "charts/*.png and *.svg, report.json; grade and compare also write slices.csv. "
        "--public/--answers default to the s8f corpus from the data layer.",
    )
    kinds = p.add_subparsers(dest="report_kind", required=True, metavar="KIND")
    kinds.add_parser = _with_figures_only(kinds.add_parser)
    k = kinds.add_parser("corpus", help="corpus_overview: classes per split, density, cue words, timeline, components")
    add_inputs(k, "--public", s8f=True)
    k.add_argument("--out", required=True, metavar="DIR")
    k.set_defaults(func=cmd_report)
    k = kinds.add_parser("grade", help="grade_report: one submission, slices worst first, errors spelled out")
    add_inputs(k, "--public", "--answers", s8f=True)
    add_inputs(k, "--submission")
    k.add_argument("--semantic", metavar="semantic.json", help="show lexical and semantic verdicts side by side")
    k.add_argument("--out", required=True, metavar="DIR")
    _stats_options(k)
    k.set_defaults(func=cmd_report)
    k = kinds.add_parser(
        "semantic", help="semantic_report: a study's agreement, annotators, lexical rules and judge against gold"
    )
    k.add_argument("study_dir", metavar="DIR", help="a study folder (microctx study init)")
    k.add_argument("--semantic", required=True, help="the semantic.json frozen from it")
    k.add_argument("--out", required=True, metavar="R")
    k.set_defaults(func=cmd_report_semantic)
    k = kinds.add_parser("compare", help="compare_candidates: submissions side by side, paired tests, run costs")
    add_inputs(k, "--public", "--answers", s8f=True)
    k.add_argument("--submission", action="append", required=True, help="repeat for each submission (two or more)")
    k.add_argument("--name", action="append", help="a name per submission, in order (default: file names)")
    k.add_argument("--out", required=True, metavar="DIR")
    _stats_options(k)
    k.set_defaults(func=cmd_report)
    _frontier_parser(kinds)

    p = sub.add_parser(
        "demo",
        help="the main job end to end on s8f: verify, run candidates, grade, all reports",
        description="Verify the s8f artifacts, make submissions (the built-in candidates, or the "
        "published answers and a planted imperfect submission), grade them, and write the "
        "corpus, grade and compare reports into OUT. Offline with MICROCTX_DATA_DIR set.",
    )
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument(
        "--submissions",
        choices=["auto", "candidates", "planted"],
        default="auto",
        help="candidates: run exact-sql and text-only; planted: oracle + planted faults; auto (default): candidates",
    )
    p.add_argument("--timeout", type=seconds, help="seconds allowed per candidate run")
    p.set_defaults(func=cmd_demo)


def cmd_report_frontier(args) -> int:
    from microctx.reports import build as reports

    _s8f_default(args)
    _check_paths(
        {"--public": args.public, "--answers": args.answers, **{f"--submission {s}": s for s in args.submission}},
        {},
        {"--out": args.out},
    )
    try:
        manifest = reports.frontier_report(
            args.public,
            args.answers,
            args.submission,
            args.out,
            names=args.name or (),
            baseline=args.baseline or "",
            cost=args.cost,
            cpu_dollars_per_hour=args.cpu_dollars_per_hour,
            n_boot=args.n_boot,
            seed=args.seed,
            figures_only=args.figures_only,
        )
    except reports.ReportError as exc:
        _say(f"microctx report frontier: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    return _report_done(manifest, args.out)


def _price(text: str) -> float:
    """A non-negative, finite number of dollars (`inf`, `nan` and negatives are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of dollars, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative, finite number of dollars, got {text!r}")
    return value


def _frontier_parser(kinds) -> None:
    from microctx.contract.costs import COST_MEASURES
    from microctx.grading.frontier import DEFAULT_CPU_DOLLARS_PER_HOUR

    k = kinds.add_parser("frontier", help="frontier_report: net-true facts against cost, Pareto front, payoff vs exact-sql")
    add_inputs(k, "--public", "--answers", s8f=True)
    k.add_argument(
        "--submission",
        action="append",
        required=True,
        help="repeat for each submission; costs come from its run manifest <S>.run.json",
    )
    k.add_argument("--name", action="append", help="a name per submission, in order (default: file names)")
    k.add_argument("--baseline", help="name of the candidate to pay off against (default: the exact-sql run, else the first)")
    k.add_argument("--cost", choices=list(COST_MEASURES), default="dollars", help="cost measure, per record (default dollars)")
    k.add_argument(
        "--cpu-dollars-per-hour",
        type=_price,
        default=DEFAULT_CPU_DOLLARS_PER_HOUR,
        help="assumed price of a CPU-hour for the compute part of dollars (default %(default)s)",
    )
    k.add_argument("--n-boot", type=N_BOOT, default=None, help="bootstrap replicates (default 10000)")
    k.add_argument("--seed", type=SEED, default=0)
    k.add_argument("--out", required=True, metavar="DIR")
    k.set_defaults(func=cmd_report_frontier)


def _with_figures_only(add_parser):
    """Every `microctx report KIND` takes --figures-only."""

    def add(*args, **kwargs):
        parser = add_parser(*args, **kwargs)
        parser.add_argument(
            "--figures-only",
            action="store_true",
            help="publish only the figures (charts/*.png, .svg, .pdf) and tables (slices.csv, .md, .tex) and report.json",
        )
        return parser

    return add
