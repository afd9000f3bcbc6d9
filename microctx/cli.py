"""The `microctx` command: a thin shell over the package's stage functions.

Exit codes: 0 success; 1 the check or the grade failed; 2 unusable input (one line naming the
file, the record and the field, never a traceback). Heavy modules (pandas, notebooks, DuckDB,
scikit-learn) are imported only by the commands that need them.
"""

from __future__ import annotations

import argparse
import sys

from microctx._version import __version__
from microctx.errors import ContractError, InputError

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


def _say(message: str) -> None:
    print(message, file=sys.stderr)


# --- core: freeze, verify, grade, data -------------------------------------------------------

def cmd_freeze(args) -> int:
    from microctx.corpus.export import read_export
    from microctx.corpus.freeze import freeze, write_frozen
    from microctx.corpus.redact import load_rules

    rules = load_rules(args.redactions) if args.redactions else []
    frozen = freeze(read_export(args.raw), args.source, rules)
    write_frozen(frozen, args.public, args.answers, args.report)
    r = frozen.report
    print(f"froze {r['records']} records (train {r['train_records']}, tune {r['tune_records']}, test {r['test_records']}); "
          f"public {frozen.public_sha256}, answers {frozen.answers_sha256}")
    return EXIT_OK


def cmd_verify(args) -> int:
    from microctx.corpus.verify import verify_files

    result = verify_files(args.public, args.answers, args.report)
    for problem in result.problems:
        print(f"FAIL {problem}")
    if result.ok:
        print(f"ok: {result.summary}")
        return EXIT_OK
    print(f"{len(result.problems)} problems found")
    return EXIT_FAIL


def cmd_grade(args) -> int:
    from microctx.contract.schemas import load_answers, load_submission
    from microctx.grading.facts import write_grade
    from microctx.grading.score import grade

    result = grade(load_answers(args.answers), load_submission(args.submission))
    write_grade(result, args.output)
    print(result.summary())
    return EXIT_OK if result.passed else EXIT_FAIL


def cmd_data(args) -> int:
    from microctx.corpus import snapshot as data

    paths = data.s8f(download=not args.offline)
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
    p.set_defaults(func=cmd_freeze)

    p = sub.add_parser("verify", help="check three artifacts against the contract and recompute every derived value")
    p.add_argument("--public", required=True)
    p.add_argument("--answers", required=True)
    p.add_argument("--report", required=True)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("grade", help="grade a submission; writes the grade and <grade>.facts.csv")
    p.add_argument("--answers", required=True)
    p.add_argument("--submission", required=True)
    p.add_argument("--output", required=True, help="grade JSON to write; the fact table goes beside it")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("data", help="locate published artifacts, checked against their pinned SHA-256")
    p.add_argument("name", choices=["s8f"])
    p.add_argument("--offline", action="store_true",
                   help="never download: use only MICROCTX_DATA_DIR and the cache (MICROCTX_CACHE_DIR)")
    p.set_defaults(func=cmd_data)


# --- lab: JupyterLab on working copies of the notebooks -----------------------------------------

def cmd_lab(args) -> int:
    import subprocess
    from pathlib import Path

    from microctx.corpus.snapshot import DATA_DIR_ENV
    from microctx.lab import lab_command, lab_environment, prepare_lab

    folder = Path(args.dir)
    for path in prepare_lab(folder):
        _say(f"microctx lab: created {path}")
    env = lab_environment()
    _say(f"microctx lab: {DATA_DIR_ENV}={env.get(DATA_DIR_ENV, '(unset: the cache, then a download)')}")
    command = lab_command(folder, args.port, args.no_browser)
    if args.dry_run:
        print(" ".join(command))
        return EXIT_OK
    return subprocess.call(command, env=env)


def _lab_parsers(sub) -> None:
    p = sub.add_parser("lab", help="start JupyterLab on working copies of the notebooks (the tracked ones stay clean)")
    p.add_argument("--dir", default="microctx-lab", help="the lab folder, created with its parents (default microctx-lab)")
    p.add_argument("--port", type=int, help="the server's port")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--dry-run", action="store_true", help="prepare the folder and print the command, do not start it")
    p.set_defaults(func=cmd_lab)


# --- candidates: run, devkit (candidates issue) ----------------------------------------------

def _parse_params(pairs: list[str]) -> dict:
    """`KEY=VALUE` pairs; a value that parses as JSON (1, 0.5, true, "x") is taken as such, else as text."""
    import orjson

    params = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError("--param", f"expected KEY=VALUE, got {pair!r}")
        try:
            params[key] = orjson.loads(value)
        except orjson.JSONDecodeError:
            params[key] = value
    return params


def cmd_run(args) -> int:
    from microctx.candidates.runner import manifest_path, run_candidate

    manifest = run_candidate(args.candidate, args.public, args.submission, devkit=args.devkit,
                             params=_parse_params(args.param), timeout=args.timeout, cmd=args.cmd)
    counters = ", ".join(f"{k} {v}" for k, v in manifest["counters"].items() if v is not None) or "no counters reported"
    cost = (f"{manifest['wall_seconds']:.2f} s wall, {manifest['cpu_seconds']:.2f} s CPU, "
            f"{manifest['peak_memory_bytes'] / 2**20:.0f} MiB peak; {counters}")
    if not manifest["ok"]:
        _say(f"microctx run: FAILED run of {manifest['candidate']}: {manifest['error']} "
             f"(manifest {manifest_path(args.submission)}; no submission written)")
        return EXIT_FAIL
    print(f"ran {manifest['candidate']}: wrote {args.submission} and {manifest_path(args.submission)} ({cost})")
    return EXIT_OK


def cmd_devkit(args) -> int:
    from microctx.candidates.devkit import make_devkit
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.files import atomic_write

    corpus = None
    if args.public:
        from microctx.corpus.public import load_corpus

        corpus = load_corpus(args.public)
    splits = [s.strip() for s in args.splits.split(",") if s.strip()]
    devkit = make_devkit(load_answers(args.answers), splits, corpus=corpus)
    atomic_write(args.output, dumps(devkit))
    print(f"wrote {args.output}: {len(devkit['answers'])} answers of {', '.join(devkit['devkit']['splits'])} "
          f"(no test answers); {devkit['devkit']['aggregates']}")
    return EXIT_OK


def _candidate_parsers(sub) -> None:
    from microctx.candidates.registry import BUILTINS

    names = "; ".join(f"{name}: {b.description}" for name, b in BUILTINS.items())
    p = sub.add_parser("run", help="run a candidate in isolation on a public corpus; writes S and <S>.run.json",
                       description=f"Built-in candidates: {names}. Exit 0 a valid submission, 1 a failed run "
                                   "(crash, timeout, invalid submission; the manifest says why), 2 unusable input.")
    p.add_argument("candidate", metavar="NAME", help="built-in name, module:function, file.py:function, or a label with --cmd")
    p.add_argument("--public", required=True, help="public corpus (the only data the candidate gets)")
    p.add_argument("--submission", required=True, help="submission to write; the run manifest goes beside it")
    p.add_argument("--devkit", help="train/tune answers for tuning (from `microctx devkit`); test answers are refused")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="candidate parameter (repeatable; JSON values)")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="kill the candidate after this many seconds")
    p.add_argument("--cmd", metavar="TEMPLATE",
                   help="run a command instead: placeholders {public} {submission} {devkit} {params} {python}")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("devkit", help="write an answer file for tuning: the train/tune answers only, never test")
    p.add_argument("--answers", required=True, help="answer bundle")
    p.add_argument("--splits", default="train,tune", help="comma-separated, from train and tune (default both)")
    p.add_argument("--output", required=True, help="devkit to write")
    p.add_argument("--public", help="public corpus, to recompute the top-10 id lists over the devkit's records")
    p.set_defaults(func=cmd_devkit)


# --- corpora in: fetch (real corpora issue) --------------------------------------------------

def cmd_fetch(args) -> int:
    from microctx.corpus.fetch import (
        check_output_folder,
        fetch_issues,
        source_string,
        token_from_env,
        write_export,
    )

    check_output_folder(args.output)
    token = token_from_env()
    if token is None:
        _say("microctx fetch: no GITHUB_TOKEN or GH_TOKEN set; unauthenticated requests are limited to 60 an hour")
    result = fetch_issues(args.repo, state=args.state, limit=args.limit, api_url=args.api_url, token=token)
    write_export(result.rows, args.output)
    print(f"fetched {len(result.rows)} issues from {result.pages} pages ({result.pull_requests_skipped} pull "
          f"requests skipped) -> {args.output}")
    print(f"source string for freeze: {source_string(args.repo, args.state, args.limit, args.api_url)}")
    return EXIT_OK


def _fetch_parsers(sub) -> None:
    p = sub.add_parser("fetch", help="fetch a repository's issues from the GitHub REST API as a raw export for freeze",
                       description="Fetch issues (pull requests skipped) through the GitHub REST API into a "
                                   "`gh issue list --json` shaped export. Token: GITHUB_TOKEN or GH_TOKEN (optional).")
    p.add_argument("repo", metavar="OWNER/REPO")
    p.add_argument("--output", required=True, metavar="RAW", help="export JSON to write (atomically)")
    p.add_argument("--state", choices=["all", "open", "closed"], default="all")
    p.add_argument("--limit", type=int, metavar="N", help="at most N issues (pull requests do not count)")
    p.add_argument("--api-url", default="https://api.github.com",
                   help="API root (GitHub Enterprise: https://HOST/api/v3); default %(default)s")
    p.set_defaults(func=cmd_fetch)


# --- reports: report corpus|grade|compare, demo (slice reports issue) ------------------------

def _s8f_default(args) -> None:
    """Fill --public/--answers left out from the data layer (the s8f corpus)."""
    if not args.public or (hasattr(args, "answers") and not args.answers):
        from microctx.corpus import snapshot as data

        paths = data.s8f()
        args.public = args.public or str(paths.public)
        if hasattr(args, "answers"):
            args.answers = args.answers or str(paths.answers)


def _report_done(manifest: dict, out: str) -> int:
    print(f"{manifest['kind']} report -> {out}/{manifest['notebook'].replace('.ipynb', '.html')} "
          f"({len(manifest['charts'])} charts, {manifest['seconds']:.1f} s)")
    return EXIT_OK


def cmd_report(args) -> int:
    from microctx.reports import build as reports

    _s8f_default(args)
    try:
        if args.report_kind == "corpus":
            manifest = reports.corpus_report(args.public, args.out)
        elif args.report_kind == "grade":
            manifest = reports.grade_report(args.public, args.answers, args.submission, args.out)
        else:
            manifest = reports.compare_report(args.public, args.answers, args.submission, args.out, names=args.name or ())
    except reports.ReportError as exc:
        _say(f"microctx report {args.report_kind}: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    return _report_done(manifest, args.out)


def cmd_demo(args) -> int:
    from microctx.demo import run_demo
    from microctx.reports.build import ReportError

    try:
        manifest = run_demo(args.out, mode=args.submissions, timeout=args.timeout)
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
    p = sub.add_parser("report", help="execute a report notebook with papermill: .ipynb, offline .html, charts",
                       description="Execute a report notebook with papermill into a new folder OUT (built beside it and "
                                   "renamed into place when complete): the executed .ipynb, a self-contained .html, "
                                   "charts/*.png and *.svg, report.json; grade and compare also write slices.csv. "
                                   "--public/--answers default to the s8f corpus from the data layer.")
    kinds = p.add_subparsers(dest="report_kind", required=True, metavar="KIND")
    k = kinds.add_parser("corpus", help="corpus_overview: classes per split, density, cue words, timeline, components")
    k.add_argument("--public", help="public corpus (default: s8f)")
    k.add_argument("--out", required=True, metavar="DIR")
    k.set_defaults(func=cmd_report)
    k = kinds.add_parser("grade", help="grade_report: one submission, slices worst first, errors spelled out")
    k.add_argument("--public", help="public corpus (default: s8f)")
    k.add_argument("--answers", help="answer bundle (default: s8f)")
    k.add_argument("--submission", required=True)
    k.add_argument("--out", required=True, metavar="DIR")
    k.set_defaults(func=cmd_report)
    k = kinds.add_parser("compare", help="compare_candidates: submissions side by side, paired tests, run costs")
    k.add_argument("--public", help="public corpus (default: s8f)")
    k.add_argument("--answers", help="answer bundle (default: s8f)")
    k.add_argument("--submission", action="append", required=True, help="repeat for each submission (two or more)")
    k.add_argument("--name", action="append", help="a name per submission, in order (default: file names)")
    k.add_argument("--out", required=True, metavar="DIR")
    k.set_defaults(func=cmd_report)

    p = sub.add_parser("demo", help="the main job end to end on s8f: verify, run candidates, grade, all reports",
                       description="Verify the s8f artifacts, make submissions (the built-in candidates, or the "
                                   "published answers and a planted imperfect submission), grade them, and write the "
                                   "corpus, grade and compare reports into OUT. Offline with MICROCTX_DATA_DIR set.")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--submissions", choices=["auto", "candidates", "planted"], default="auto",
                   help="candidates: run exact-sql and text-only; planted: oracle + planted faults; "
                        "auto (default): candidates")
    p.add_argument("--timeout", type=float, help="seconds allowed per candidate run")
    p.set_defaults(func=cmd_demo)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="microctx", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"microctx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _core_parsers(sub)
    _candidate_parsers(sub)
    _lab_parsers(sub)
    _fetch_parsers(sub)
    _report_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        _say(f"microctx {args.command}: {exc}")
        return EXIT_INPUT
    except ContractError as exc:
        _say(f"microctx {args.command}: {exc}")
        return EXIT_FAIL
    except KeyboardInterrupt:
        _say(f"microctx {args.command}: interrupted; no output was written")
        return 130


if __name__ == "__main__":
    sys.exit(main())
