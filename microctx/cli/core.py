"""`microctx freeze`, `verify`, `grade`, `data` and `fetch`."""

from __future__ import annotations

from microctx.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    _check_paths,
    _held_out_look,
    _say,
    _semantic_layer,
    _semantic_paths,
    _stage_semantic,
    add_inputs,
)
from microctx.errors import InputError
from microctx.options import POSITIVE, seconds


def cmd_freeze(args) -> int:
    from microctx.corpus.freeze import freeze_export
    from microctx.corpus.redact import load_rules

    _check_paths(
        {"RAW": args.raw, "--redactions": args.redactions},
        {"--public": args.public, "--answers": args.answers, "--report": args.report},
    )
    rules = load_rules(args.redactions) if args.redactions else []
    paths = (args.public, args.answers, args.report)
    # the export is read record by record (a large one in two halves, on two cores) and the
    # documents written as they are made (freeze_export)
    frozen = freeze_export(args.raw, args.source, paths, rules, args.isolate_hubs)
    for line in frozen.hub_warnings():
        _say(line)
    r = frozen.report
    print(
        f"froze {r['records']} records (train {r['train_records']}, tune {r['tune_records']}, test {r['test_records']}); "
        f"public {frozen.public_sha256}, answers {frozen.answers_sha256}"
    )
    return EXIT_OK


def cmd_verify(args) -> int:
    from microctx.corpus.verify import verify_files

    given = [args.public, args.answers, args.report]
    if not any(given):  # no arguments: the published s8f, found as `microctx data s8f` finds it
        from microctx.corpus import snapshot

        paths = snapshot.s8f()
        given = [paths.public, paths.answers, paths.report]
    elif not all(given):
        raise InputError("--public", "give all three of --public, --answers and --report, or none (the s8f files `data` finds)")
    result = verify_files(*given)
    for problem in result.problems:
        print(f"FAIL {problem}")
    if result.ok:
        print(f"ok: {result.summary}")
        return EXIT_OK
    print(f"{len(result.problems)} problems found")
    return EXIT_FAIL


def cmd_grade(args) -> int:
    from microctx.contract.facts import facts_path, write_grade

    gold = args.devkit if args.split == "tune" else args.answers
    semantic_in, semantic_out = _semantic_paths(args)
    _check_paths(
        {"--devkit" if args.split == "tune" else "--answers": gold, "--submission": args.submission, **semantic_in},
        {"--output": args.output, "the fact table": facts_path(args.output), **semantic_out},
    )
    if args.split == "tune":  # tuning: against a devkit's tune answers, not a look at the held-out test
        if not args.devkit or args.answers:
            raise InputError("--devkit", "--split tune grades against a devkit: give --devkit (not --answers)")
        from microctx.contract.schemas import load_answers, load_submission
        from microctx.contract.score import grade

        result = grade(load_answers(args.devkit), load_submission(args.submission), split="tune")
        write_grade(result, args.output)
        print(result.summary())
        return EXIT_OK if result.passed else EXIT_FAIL
    if not args.answers or args.devkit:
        raise InputError("--answers", "the test grade needs the answer bundle: give --answers (a devkit has no test answers)")
    if not args.semantic:  # standard input (`-`) is read whole: the stream refuses it before reading
        from microctx._io.jsonscan import IrregularJSON

        try:
            return _grade_streamed(args)
        except IrregularJSON:
            pass  # a layout the streaming reader cannot take (nothing was written): the bundle is read whole
    return _grade_whole(args)


def _grade_streamed(args) -> int:
    """The test grade with the answer bundle read record by record (`schemas.AnswerStream`): memory
    holds each gold id's split and the submission's answers as JSON bytes (`CompactSubmission`), not
    the bundle nor parsed answers (issue 24). Raises IrregularJSON
    (before anything is written or looked at) when the bundle's layout needs a whole parse."""
    from microctx._io.jsonio import gc_paused
    from microctx._io.jsonscan import IrregularJSON
    from microctx.contract.facts import StreamedFacts
    from microctx.contract.records import read_manifest
    from microctx.contract.schemas import AnswerStream, read_submission_compact
    from microctx.contract.score import score_stream
    from microctx.grading.examples import LookMark

    with AnswerStream(args.answers) as stream:  # its schema and digest are checked before the submission
        submission = read_submission_compact(args.submission)  # each answer held as its JSON bytes
        manifest = read_manifest(args.submission, sha256=submission.sha256)
        mark = LookMark(submission.top, submission.encoded, stream.corpus_sha256, manifest)
        with StreamedFacts(args.output) as table, gc_paused():  # the fact rows are written as they are made
            gold = mark.feed(stream.answers())
            result = score_stream(stream.corpus_sha256, gold, stream.aggregates, submission, rows_to=table)
            marked = mark.finish(stream.aggregates())
            if stream.sha256 is None or submission.sha256 is None:  # the bundle changed size as it was read
                raise IrregularJSON  # nothing is written nor looked at: read whole
            digests = (stream.sha256, submission.sha256)
            look = _held_out_look(
                args.answers, result.grade, "grade", args.submission, digests=digests, manifest=manifest, marked=marked
            )
            table.grade = result.grade
    print(result.summary())
    print(look)
    return EXIT_OK if result.passed else EXIT_FAIL


def _grade_whole(args) -> int:
    """The test grade with both documents parsed whole (`--semantic` needs them; or a bundle the
    streaming reader cannot take)."""
    from microctx.contract.facts import StreamedFacts
    from microctx.contract.schemas import read_answers, read_submission
    from microctx.contract.score import grade
    from microctx.grading.ledger import looks_line, record_graded

    (answers, answers_sha256), (submission, submission_sha256) = read_answers(args.answers), read_submission(args.submission)
    with StreamedFacts(args.output) as table:  # the fact rows are written as they are made
        result = grade(answers, submission, rows_to=table)
        layer = _semantic_layer(args, answers, submission)
        entry = record_graded(
            args.answers,
            answers,
            submission,
            result.grade,
            via="grade",
            submission_path=args.submission,
            answers_sha256=answers_sha256,
            submission_sha256=submission_sha256,
        )
        look = looks_line(entry)
        semantic_line = _stage_semantic(layer, args.output, table.outputs)  # published with the grade, old or new
        table.grade = result.grade
    print(result.summary())
    print(look)
    if semantic_line:
        print(semantic_line)
    return EXIT_OK if result.passed else EXIT_FAIL


def cmd_data(args) -> int:
    from microctx.corpus import snapshot as data

    paths = data.s8f(download=not args.offline)
    if args.env:  # shell assignments, written whole or not at all: `... --env F && source F` stops on a failure
        import shlex

        _check_paths({"PUBLIC": paths.public, "ANSWERS": paths.answers, "REPORT": paths.report}, {"--env": args.env})

        from microctx._io.atomic import atomic_write

        lines = [f"{key.upper()}={shlex.quote(str(getattr(paths, key)))}\n" for key in ("public", "answers", "report")]
        atomic_write(args.env, "".join(lines).encode())
        _say(f"microctx data: wrote {args.env} (PUBLIC, ANSWERS, REPORT)")
    print(f"public\t{paths.public}\nanswers\t{paths.answers}\nreport\t{paths.report}")
    return EXIT_OK


def _core_parsers(sub) -> None:
    p = sub.add_parser("freeze", help="freeze a raw issue export into public corpus, answers and report")
    p.add_argument("raw", help="raw export: `gh issue list --json ...` output or GitHub REST API issues")
    p.add_argument("--public", required=True, help="public corpus to write")
    p.add_argument("--answers", required=True, help="answer bundle to write")
    p.add_argument("--report", required=True, help="corpus report to write")
    p.add_argument("--source", required=True, help="provenance string recorded in the public corpus")
    p.add_argument("--redactions", help="TOML redaction map ([[rule]] pattern/replacement); none by default")
    p.add_argument(
        "--isolate-hubs",
        action="store_true",
        help="a record referencing more than 50 in-corpus issues keeps them as facts but does not merge their split "
        "components (off by default: published corpora stay byte-identical)",
    )
    p.set_defaults(func=cmd_freeze)

    p = sub.add_parser(
        "verify",
        help="check three artifacts against the contract and recompute every derived value "
        "(no arguments: the published s8f, found as `microctx data s8f` finds it)",
    )
    add_inputs(p, "--public", "--answers", required=False)  # all three or none
    p.add_argument("--report", help="corpus report")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("grade", help="grade a submission; writes the grade and <grade>.facts.csv")
    add_inputs(p, "--answers", required=False)
    add_inputs(p, "--submission")
    p.add_argument(
        "--split",
        choices=["test", "tune"],
        default="test",
        help="test (default): the contract's grade; tune: against --devkit's tune answers, for tuning",
    )
    p.add_argument("--devkit", help="devkit (from `microctx devkit`) to grade --split tune against")
    p.add_argument("--output", required=True, help="grade JSON to write; the fact table goes beside it")
    p.add_argument(
        "--semantic",
        metavar="semantic.json",
        help="also score cue and duplicate answers against a study's adjudicated gold (<grade>.semantic.csv)",
    )
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("data", help="locate published artifacts, checked against their pinned SHA-256")
    p.add_argument("name", choices=["s8f"])
    p.add_argument(
        "--offline",
        action="store_true",
        help="never download: use only MICROCTX_DATA_DIR (or microctx.toml's data_dir) and the cache (MICROCTX_CACHE_DIR)",
    )
    p.add_argument("--env", metavar="FILE", help="also write PUBLIC=, ANSWERS=, REPORT= lines to FILE, for `source FILE`")
    p.set_defaults(func=cmd_data)


def cmd_fetch(args) -> int:
    from microctx.corpus.fetch import (
        RetryPolicy,
        check_output_folder,
        check_request,
        fetch_issues,
        source_string,
        token_from_env,
        write_export,
    )

    check_output_folder(args.output)
    check_request(args.repo, args.state, args.limit, args.api_url)  # before saying anything else
    token = token_from_env()
    if token is None:
        _say("microctx fetch: no GITHUB_TOKEN or GH_TOKEN set; unauthenticated requests are limited to 60 an hour")
    try:
        result = fetch_issues(
            args.repo,
            state=args.state,
            limit=args.limit,
            api_url=args.api_url,
            token=token,
            policy=RetryPolicy(deadline_seconds=args.deadline),
        )
    except InputError as exc:
        raise exc if token is None else token.scrub_error(exc) from None
    write_export(result.rows, args.output)
    print(
        f"fetched {len(result.rows)} issues from {result.pages} pages ({result.pull_requests_skipped} pull "
        f"requests skipped) -> {args.output}"
    )
    print(f"source string for freeze: {source_string(args.repo, args.state, args.limit, args.api_url)}")
    return EXIT_OK


DEFAULT_FETCH_DEADLINE = 4 * 3600.0  # GitHub's rate limit resets within the hour; three waits and the pages


def _fetch_parsers(sub) -> None:
    p = sub.add_parser(
        "fetch",
        help="fetch a repository's issues from the GitHub REST API as a raw export for freeze",
        description="Fetch issues (pull requests skipped) through the GitHub REST API into a "
        "`gh issue list --json` shaped export. Token: GITHUB_TOKEN or GH_TOKEN (optional).",
    )
    p.add_argument("repo", metavar="OWNER/REPO")
    p.add_argument("--output", required=True, metavar="RAW", help="export JSON to write (atomically)")
    p.add_argument("--state", choices=["all", "open", "closed"], default="all")
    p.add_argument("--limit", type=POSITIVE, metavar="N", help="at most N issues (pull requests do not count)")
    p.add_argument(
        "--api-url",
        default="https://api.github.com",
        help="API root (GitHub Enterprise: https://HOST/api/v3); default %(default)s",
    )
    p.add_argument(
        "--deadline",
        type=seconds,
        default=DEFAULT_FETCH_DEADLINE,
        metavar="SECONDS",
        help="give up (exit 2) when the whole fetch, rate-limit waits included, takes longer; default %(default)g",
    )
    p.set_defaults(func=cmd_fetch)
