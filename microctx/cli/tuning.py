"""`microctx sweep`, `evaluate`, `ledger` and `report sweep`."""

from __future__ import annotations

import sys

from microctx.cli.common import EXIT_FAIL, EXIT_OK, _report_done, _say, add_inputs
from microctx.errors import InputError
from microctx.options import bounded_int, seconds


def cmd_sweep(args) -> int:
    from microctx.tuning.sweep import run_sweep

    if args.workers is not None and args.workers < 1:
        raise InputError("--workers", f"expected a positive number, got {args.workers}")
    result = run_sweep(
        args.sweep,
        args.public,
        args.devkit,
        args.out,
        workers=args.workers,
        scheduler=args.scheduler,
        connect_timeout=args.connect_timeout,
        progress=None,
    )
    resumed = len(result.rows) - len(result.ran)
    print(
        f"swept {len(result.rows)} configurations ({len(result.ran)} run now, {resumed} resumed, {result.failed} failed) "
        f"in {result.seconds:.1f} s -> {args.out}/sweep.csv"
    )
    selected = result.selected or {"row": None, "reason": ""}
    chosen = selected["row"]
    if chosen is None:
        _say(f"microctx sweep: nothing selected: {selected['reason']}")
        return EXIT_FAIL
    params = ", ".join(f"{k[6:]}={v}" for k, v in chosen.items() if k.startswith("param."))
    print(f"selected {params}: {selected['reason']} -> {args.out}/selected.json")
    return EXIT_OK


def cmd_evaluate(args) -> int:
    from microctx.tuning.evaluate import evaluate_selected

    outcome = evaluate_selected(
        args.selected, args.public, args.answers, args.out, timeout=args.timeout, allow_process=args.allow_process_isolation
    )
    if outcome["isolation_warning"]:
        _say(f"microctx evaluate: WARNING: {outcome['isolation_warning']}")
    if not outcome["run_ok"]:
        from microctx.candidates.run_files import escape_controls

        _say(
            f"microctx evaluate: FAILED run of the frozen configuration: {escape_controls(outcome['error'])} (manifest in {args.out})"
        )
        return EXIT_FAIL
    print(outcome["summary"])
    print(outcome["look_line"])
    return EXIT_OK if outcome["grade"]["quality_pass"] else EXIT_FAIL


def cmd_ledger(args) -> int:
    import orjson

    from microctx.contract.digests import file_sha256
    from microctx.grading.ledger import entries, ledger_path

    digest = None
    if args.answers:
        digest = file_sha256(args.answers) if not _is_digest(args.answers) else args.answers.lower()
    rows = entries(digest, candidate=args.candidate, config=args.config)
    print("id\tat\tanswers_sha256\tsubmission_sha256\tcandidate\tconfig_digest\tvia\tgrade\tmarked")
    from microctx.errors import InputError

    for e in rows:
        try:
            summary = orjson.loads(e["summary"])
        except orjson.JSONDecodeError:
            raise InputError(ledger_path(), "summary is not JSON", record=f"entry {e['id']}", field="summary") from None
        if not isinstance(summary, dict):
            raise InputError(ledger_path(), "summary is not a JSON object", record=f"entry {e['id']}", field="summary")
        grade = (
            f"{'PASS' if summary.get('quality_pass') else 'FAIL'} "
            f"{summary.get('exact_records')}/{summary.get('test_records')} exact"
        )
        print(
            "\t".join(
                str(x)
                for x in (
                    e["id"],
                    e["at"],
                    e["answers_sha256"],
                    e["submission_sha256"] or "",
                    e["candidate"] or "",
                    e["config_digest"] or "",
                    e["via"],
                    grade,
                    e["marked"] or "",
                )
            )
        )
    bundles = len({e["answers_sha256"] for e in rows})
    counted = sum(1 for e in rows if not e["marked"])
    marked = f", {len(rows) - counted} marked example or demo looks not counted" if counted != len(rows) else ""
    print(
        f"{counted} look{'' if counted == 1 else 's'} at held-out answers ({bundles} answer bundle{'s' if bundles != 1 else ''}"
        f"{marked}) in {ledger_path()}",
        file=sys.stderr,
    )
    return EXIT_OK


def _is_digest(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def cmd_report_sweep(args) -> int:
    from microctx.reports import build as reports

    try:
        manifest = reports.sweep_report(args.sweep_dir, args.out, figures_only=args.figures_only)
    except reports.ReportError as exc:
        _say(f"microctx report sweep: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    return _report_done(manifest, args.out)


def _tuning_parsers(sub, report_kinds) -> None:
    p = sub.add_parser(
        "sweep",
        help="tune a candidate on train/tune: run a parameter grid, grade each on tune, choose",
        description="Run every configuration of SWEEP.toml through the isolated runner (the candidate sees "
        "the devkit's train answers), grade it on the devkit's tune answers, and choose by the "
        "[select] rule. Never given the answer bundle. Writes DIR/sweep.csv and "
        "DIR/selected.json; run again to resume. Exit 0 chosen, 1 none qualifies, 2 bad input.",
    )
    p.add_argument("sweep", metavar="SWEEP.toml")
    add_inputs(p, "--public")
    p.add_argument("--devkit", required=True, help="devkit with train and tune answers (from `microctx devkit`)")
    p.add_argument("--out", required=True, metavar="DIR")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=bounded_int(1, 1024), metavar="N", help="local parallel runs (default: the CPU count)")
    where.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on an existing Dask distributed cluster")
    p.add_argument(
        "--connect-timeout",
        type=seconds,
        default=5.0,
        metavar="SECONDS",
        help="give up on an unreachable scheduler after this long (default %(default)s)",
    )
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser(
        "evaluate",
        help="run a sweep's frozen configuration once and grade it on test (one held-out look)",
        description="Exit codes as `grade`: 0 pass, 1 fail (or the run failed), 2 unusable input.",
    )
    p.add_argument("selected", metavar="DIR/selected.json")
    add_inputs(p, "--public", "--answers")
    p.add_argument("--out", required=True, metavar="DIR2")
    p.add_argument("--timeout", type=seconds, metavar="SECONDS", help="kill the candidate after this long (default: the sweep's)")
    p.add_argument(
        "--allow-process-isolation",
        action="store_true",
        help='run a configuration whose [sandbox] says isolation = "process" (refused otherwise: the candidate '
        "would be a child of the process holding the answers); the manifest and evaluation.json say so",
    )
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser(
        "ledger",
        help="list the held-out ledger: every grading against test answers",
        description="The ledger is MICROCTX_LEDGER, else ~/.local/share/microctx/ledger.sqlite.",
    )
    p.add_argument("--answers", help="only this answer bundle (a file, or its SHA-256)")
    p.add_argument("--candidate", help="only this candidate's looks (its name as the ledger has it)")
    p.add_argument("--config", metavar="DIGEST", help="only this configuration digest (or a prefix of it)")
    p.set_defaults(func=cmd_ledger)

    k = report_kinds.add_parser("sweep", help="sweep_report: tune metric against cost, the Pareto front, the chosen point")
    k.add_argument("sweep_dir", metavar="DIR", help="a sweep folder (holds sweep.csv and selected.json)")
    k.add_argument("--out", required=True, metavar="R")
    k.set_defaults(func=cmd_report_sweep)
