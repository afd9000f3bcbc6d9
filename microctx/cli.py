"""The `microctx` command: a thin shell over the package's stage functions.

Exit codes: 0 success; 1 the check or the grade failed; 2 unusable input (one line naming the
file, the record and the field, never a traceback). Heavy modules (pandas, notebooks, DuckDB,
scikit-learn) are imported only by the commands that need them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys

from microctx._version import __version__
from microctx.errors import ContractError, InputError

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2
EXIT_INTERNAL = 70  # a bug in microctx (EX_SOFTWARE): one line, the traceback with MICROCTX_DEBUG=1


def _say(message: str) -> None:
    """One line on stderr, whatever the message holds (a file name or a parser's message with a
    newline in it would otherwise break the one-line promise)."""
    print(" ".join(str(message).split()), file=sys.stderr)


# --- the one-line promise: argument errors, paths, numbers (hardening issue) -----------------

class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong and where to look), exit 2."""

    def error(self, message: str):
        _say(f"{self.prog}: {message} (see `{self.prog} -h`)")
        sys.exit(EXIT_INPUT)


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (`inf`, `nan`, 0 and negatives are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive, finite number of seconds, got {text!r}")
    return value


def _check_paths(inputs: dict, outputs: dict | None = None, folders: dict | None = None) -> None:
    from microctx.files import check_paths

    check_paths(inputs, outputs or {}, folders)


# --- core: freeze, verify, grade, data -------------------------------------------------------

def cmd_freeze(args) -> int:
    from microctx.corpus.export import read_export
    from microctx.corpus.freeze import freeze, write_frozen
    from microctx.corpus.redact import load_rules

    _check_paths({"RAW": args.raw, "--redactions": args.redactions},
                 {"--public": args.public, "--answers": args.answers, "--report": args.report})
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
    from microctx.grading.facts import facts_path, write_grade
    from microctx.grading.score import grade

    gold = args.devkit if args.split == "tune" else args.answers
    _check_paths({"--devkit" if args.split == "tune" else "--answers": gold, "--submission": args.submission},
                 {"--output": args.output, "the fact table": facts_path(args.output)})
    if args.split == "tune":  # tuning: against a devkit's tune answers, not a look at the held-out test
        if not args.devkit or args.answers:
            raise InputError("--devkit", "--split tune grades against a devkit: give --devkit (not --answers)")
        result = grade(load_answers(args.devkit), load_submission(args.submission), split="tune")
        write_grade(result, args.output)
        print(result.summary())
        return EXIT_OK if result.passed else EXIT_FAIL
    if not args.answers or args.devkit:
        raise InputError("--answers", "the test grade needs the answer bundle: give --answers (a devkit has no test answers)")
    answers, submission = load_answers(args.answers), load_submission(args.submission)
    result = grade(answers, submission)
    layer = _semantic_layer(args, answers, submission)
    look = _held_out_look(args.answers, result.grade, "grade", args.submission)
    write_grade(result, args.output)
    print(result.summary())
    print(look)
    _write_semantic_layer(layer, args.output)
    return EXIT_OK if result.passed else EXIT_FAIL


def _semantic_layer(args, answers: dict, submission: dict) -> tuple[bytes, str] | None:
    """With --semantic: the submission's cue and duplicate answers against the adjudicated gold."""
    if not args.semantic:
        return None
    from microctx.semantic.grade import grade_semantic

    return grade_semantic(args.semantic, args.answers, answers, submission)


def _write_semantic_layer(layer: tuple[bytes, str] | None, output: str) -> None:
    """Write `<output>.semantic.csv` beside a grade or slice table and print its summary line."""
    if layer:
        from microctx.files import atomic_write
        from microctx.semantic.grade import semantic_path

        atomic_write(semantic_path(output), layer[0])
        print(layer[1])


def _held_out_look(answers: str, grade: dict, via: str, submission: str, config: str | None = None) -> str:
    """Append a look at the test answers to the held-out ledger (before any grade is written); its line."""
    from microctx.candidates.runner import read_manifest
    from microctx.grading.ledger import looks_line, record_grade

    return looks_line(record_grade(answers, grade, via=via, submission_path=submission, config=config,
                                   manifest=read_manifest(submission)))


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
    p.add_argument("--answers", help="answer bundle (the test grade; recorded in the held-out ledger)")
    p.add_argument("--submission", required=True)
    p.add_argument("--split", choices=["test", "tune"], default="test",
                   help="test (default): the contract's grade; tune: against --devkit's tune answers, for tuning")
    p.add_argument("--devkit", help="devkit (from `microctx devkit`) to grade --split tune against")
    p.add_argument("--output", required=True, help="grade JSON to write; the fact table goes beside it")
    p.add_argument("--semantic", metavar="semantic.json",
                   help="also score cue and duplicate answers against a study's adjudicated gold (<grade>.semantic.csv)")
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


def _sandbox_settings(args):
    """The run's SandboxSettings from `microctx run`'s options (sandboxed candidates issue)."""
    from microctx.candidates.sandbox import SandboxSettings, parse_size

    options: dict = {"isolation": args.isolation, "network": args.network, "allow_hosts": tuple(args.allow_host or ())}
    if args.memory is not None:
        options["memory_bytes"] = parse_size(args.memory)
    if args.max_processes is not None:
        options["max_processes"] = args.max_processes
    if args.cpu_seconds is not None:
        options["cpu_seconds"] = args.cpu_seconds
    if args.cache_dir is not None:
        options["cache_dir"] = args.cache_dir
    return SandboxSettings(**options)


def cmd_run(args) -> int:
    from microctx.candidates.runner import manifest_path, run_candidate

    _check_paths({"--public": args.public, "--devkit": args.devkit},
                 {"--submission": args.submission, "the run manifest": manifest_path(args.submission)})
    if args.cmd is not None:
        import shlex

        try:
            shlex.split(args.cmd)
        except ValueError as exc:
            raise InputError("--cmd", f"cannot split the command into words: {exc}") from None
    manifest = run_candidate(args.candidate, args.public, args.submission, devkit=args.devkit,
                             params=_parse_params(args.param), timeout=args.timeout, cmd=args.cmd,
                             sandbox=_sandbox_settings(args), pass_env=args.pass_env or ())
    counters = ", ".join(f"{k} {v}" for k, v in manifest["counters"].items() if v is not None) or "no counters reported"
    cost = (f"{manifest['isolation']}; {manifest['wall_seconds']:.2f} s wall, {manifest['cpu_seconds']:.2f} s CPU, "
            f"{manifest['peak_memory_bytes'] / 2**20:.0f} MiB peak; {counters}")
    if manifest["network"]["mode"] == "record":
        cost += f"; {len(manifest['network']['requests'])} network requests, {len(manifest['network']['denied'])} denied"
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

    _check_paths({"--answers": args.answers, "--public": args.public}, {"--output": args.output})
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
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="kill the candidate after this many seconds (default 3600)")
    p.add_argument("--cmd", metavar="TEMPLATE",
                   help="run a command instead: placeholders {public} {submission} {devkit} {params} {python}")
    # sandboxed candidates issue: isolation, network and limits
    p.add_argument("--isolation", choices=["sandbox", "process"], default="sandbox",
                   help="sandbox (default; bubblewrap namespaces, see README) or process (no sandbox: choose it knowingly)")
    p.add_argument("--network", choices=["none", "record"], default="none",
                   help="none (default): no network; record: only --allow-host targets, through the runner's logging proxy")
    p.add_argument("--allow-host", action="append", metavar="HOST[:PORT]",
                   help="with --network record: a host the candidate may reach (HOST alone: ports 80 and 443; repeatable)")
    p.add_argument("--memory", metavar="SIZE", help="memory limit of the whole run, e.g. 2G or 512M (default 4G)")
    p.add_argument("--max-processes", type=int, metavar="N", help="processes and threads at once (default 512)")
    p.add_argument("--cpu-seconds", type=int, metavar="SECONDS", help="CPU-time limit of each process (default 3600)")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="a folder the candidate keeps between runs, read-write (e.g. the llm candidate's response "
                        "cache); it must not hold an answer bundle or the data folder")
    p.add_argument("--pass-env", action="append", metavar="NAME",
                   help="pass this environment variable (an API key) to the candidate; the manifest names it, "
                        "never its value (repeatable)")
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
    result = fetch_issues(args.repo, state=args.state, limit=args.limit, api_url=args.api_url, token=token,
                          policy=RetryPolicy(deadline_seconds=args.deadline))
    write_export(result.rows, args.output)
    print(f"fetched {len(result.rows)} issues from {result.pages} pages ({result.pull_requests_skipped} pull "
          f"requests skipped) -> {args.output}")
    print(f"source string for freeze: {source_string(args.repo, args.state, args.limit, args.api_url)}")
    return EXIT_OK


DEFAULT_FETCH_DEADLINE = 4 * 3600.0  # GitHub's rate limit resets within the hour; three waits and the pages


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
    p.add_argument("--deadline", type=_seconds, default=DEFAULT_FETCH_DEADLINE, metavar="SECONDS",
                   help="give up (exit 2) when the whole fetch, rate-limit waits included, takes longer; "
                        "default %(default)g")
    p.set_defaults(func=cmd_fetch)


# --- slices: the slice table from the command line (honest slice statistics issue) -----------

def _stats_options(p) -> None:
    """The statistics options shared by `slices` and `report grade|compare`."""
    p.add_argument("--seed", type=int, default=None, metavar="N", help="bootstrap seed (default 0)")
    p.add_argument("--n-boot", type=int, default=None, metavar="N", help="bootstrap resamples (default 10000)")
    p.add_argument("--min-support", type=int, default=None, metavar="N",
                   help="gold facts a slice needs to be judged (default 20)")
    p.add_argument("--min-components", type=int, default=None, metavar="N",
                   help="split components a slice needs for an interval (default 10)")


def _stats_kw(args) -> dict:
    """The statistics options given on the command line, defaults filled in from the package."""
    from microctx.grading import stats

    chosen = {"seed": args.seed, "n_boot": args.n_boot, "min_support": args.min_support,
              "min_components": args.min_components}
    defaults = {"seed": stats.DEFAULT_SEED, "n_boot": stats.DEFAULT_N_BOOT, "min_support": stats.DEFAULT_MIN_SUPPORT,
                "min_components": stats.DEFAULT_MIN_COMPONENTS}
    return {k: defaults[k] if v is None else v for k, v in chosen.items()}


def cmd_slices(args) -> int:
    from microctx.contract.schemas import load_answers, load_submission
    from microctx.corpus.public import load_corpus
    from microctx.grading import slices
    from microctx.grading.score import grade

    _check_paths({"--public": args.public, "--answers": args.answers, "--submission": args.submission},
                 {"--output": args.output})  # an --output that is an input (the gold answers) is refused
    kw = _stats_kw(args)
    corpus = load_corpus(args.public)
    answers, submission = load_answers(args.answers), load_submission(args.submission)
    result = grade(answers, submission)
    table = slices.slice_table(slices.facts_frame(result.facts), corpus, **kw)
    layer = _semantic_layer(args, answers, submission)
    look = _held_out_look(args.answers, result.grade, "slices", args.submission)  # a grade on test: one look
    slices.write_slices_csv(table, args.output)
    judged = int((table["estimable"] & ~table["too_small"] & (table["slice_kind"] != "overall")).sum())
    print(f"wrote {args.output}: {len(table)} slices, {int(table['weak'].sum())} weak of {judged} judged, "
          f"{int((~table['estimable']).sum())} not estimable (n_boot={kw['n_boot']}, seed={kw['seed']})")
    print(look)
    _write_semantic_layer(layer, args.output)
    return EXIT_OK


def _slices_parsers(sub) -> None:
    p = sub.add_parser("slices", help="grade a submission and write its slice table (slices.csv)",
                       description="Grade SUBMISSION against ANSWERS and write the slice table: counts, cluster-"
                                   "bootstrap intervals, estimability and the Holm-adjusted weak-slice test per slice "
                                   "(docs/statistics.md). Same inputs and options, same bytes. Exit 0 written, "
                                   "2 unusable input.")
    p.add_argument("--public", required=True, help="public corpus the answers are bound to")
    p.add_argument("--answers", required=True, help="answer bundle (a grade on test: recorded in the held-out ledger)")
    p.add_argument("--submission", required=True, help="submission to grade and slice")
    p.add_argument("--output", required=True, metavar="CSV", help="slice table to write (atomically)")
    p.add_argument("--semantic", metavar="semantic.json",
                   help="also score cue and duplicate answers against a study's adjudicated gold (<output>.semantic.csv)")
    _stats_options(p)
    p.set_defaults(func=cmd_slices)


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
    given = getattr(args, "submission", None)
    submissions = given if isinstance(given, list) else [given]
    _check_paths({"--public": args.public, "--answers": getattr(args, "answers", None),
                  **{f"--submission {s}": s for s in submissions if s}}, {}, {"--out": args.out})
    try:
        if args.report_kind == "corpus":
            manifest = reports.corpus_report(args.public, args.out)
        elif args.report_kind == "grade":
            manifest = reports.grade_report(args.public, args.answers, args.submission, args.out,
                                            statistics=_stats_kw(args), semantic=args.semantic)
        else:
            manifest = reports.compare_report(args.public, args.answers, args.submission, args.out, names=args.name or (),
                                              statistics=_stats_kw(args))
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
    k.add_argument("--semantic", metavar="semantic.json", help="show lexical and semantic verdicts side by side")
    k.add_argument("--out", required=True, metavar="DIR")
    _stats_options(k)
    k.set_defaults(func=cmd_report)
    k = kinds.add_parser("compare", help="compare_candidates: submissions side by side, paired tests, run costs")
    k.add_argument("--public", help="public corpus (default: s8f)")
    k.add_argument("--answers", help="answer bundle (default: s8f)")
    k.add_argument("--submission", action="append", required=True, help="repeat for each submission (two or more)")
    k.add_argument("--name", action="append", help="a name per submission, in order (default: file names)")
    k.add_argument("--out", required=True, metavar="DIR")
    _stats_options(k)
    k.set_defaults(func=cmd_report)
    _frontier_parser(kinds)

    p = sub.add_parser("demo", help="the main job end to end on s8f: verify, run candidates, grade, all reports",
                       description="Verify the s8f artifacts, make submissions (the built-in candidates, or the "
                                   "published answers and a planted imperfect submission), grade them, and write the "
                                   "corpus, grade and compare reports into OUT. Offline with MICROCTX_DATA_DIR set.")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--submissions", choices=["auto", "candidates", "planted"], default="auto",
                   help="candidates: run exact-sql and text-only; planted: oracle + planted faults; "
                        "auto (default): candidates")
    p.add_argument("--timeout", type=_seconds, help="seconds allowed per candidate run")
    p.set_defaults(func=cmd_demo)


# --- tuning: sweep, evaluate, ledger (tuning sweeps issue) ----------------------------------

def cmd_sweep(args) -> int:
    from microctx.candidates.tuning.sweep import run_sweep

    if args.workers is not None and args.workers < 1:
        raise InputError("--workers", f"expected a positive number, got {args.workers}")
    result = run_sweep(args.sweep, args.public, args.devkit, args.out, workers=args.workers, scheduler=args.scheduler,
                       connect_timeout=args.connect_timeout, progress=None)
    resumed = len(result.rows) - len(result.ran)
    print(f"swept {len(result.rows)} configurations ({len(result.ran)} run now, {resumed} resumed, {result.failed} failed) "
          f"in {result.seconds:.1f} s -> {args.out}/sweep.csv")
    selected = result.selected or {"row": None, "reason": ""}
    chosen = selected["row"]
    if chosen is None:
        _say(f"microctx sweep: nothing selected: {selected['reason']}")
        return EXIT_FAIL
    params = ", ".join(f"{k[6:]}={v}" for k, v in chosen.items() if k.startswith("param."))
    print(f"selected {params}: {selected['reason']} -> {args.out}/selected.json")
    return EXIT_OK


def cmd_evaluate(args) -> int:
    from microctx.candidates.tuning.evaluate import evaluate_selected

    outcome = evaluate_selected(args.selected, args.public, args.answers, args.out, timeout=args.timeout)
    if not outcome["run_ok"]:
        _say(f"microctx evaluate: FAILED run of the frozen configuration: {outcome['error']} (manifest in {args.out})")
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
    rows = entries(digest)
    print("id\tat\tanswers_sha256\tsubmission_sha256\tcandidate\tconfig_digest\tvia\tgrade")
    for e in rows:
        summary = orjson.loads(e["summary"])
        grade = (f"{'PASS' if summary.get('quality_pass') else 'FAIL'} "
                 f"{summary.get('exact_records')}/{summary.get('test_records')} exact")
        print("\t".join(str(x) for x in (e["id"], e["at"], e["answers_sha256"], e["submission_sha256"] or "",
                                          e["candidate"] or "", e["config_digest"] or "", e["via"], grade)))
    bundles = len({e["answers_sha256"] for e in rows})
    print(f"{len(rows)} looks at held-out answers ({bundles} answer bundle{'s' if bundles != 1 else ''}) in {ledger_path()}",
          file=sys.stderr)
    return EXIT_OK


def _is_digest(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdefABCDEF" for c in text)


def cmd_report_sweep(args) -> int:
    from microctx.reports import build as reports

    try:
        manifest = reports.sweep_report(args.sweep_dir, args.out)
    except reports.ReportError as exc:
        _say(f"microctx report sweep: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    return _report_done(manifest, args.out)


# --- the net-true decision boundary: report frontier (model candidates issue) -----------------

def cmd_report_frontier(args) -> int:
    from microctx.reports import build as reports

    _s8f_default(args)
    _check_paths({"--public": args.public, "--answers": args.answers,
                  **{f"--submission {s}": s for s in args.submission}}, {}, {"--out": args.out})
    try:
        manifest = reports.frontier_report(args.public, args.answers, args.submission, args.out, names=args.name or (),
                                           baseline=args.baseline or "", cost=args.cost,
                                           cpu_dollars_per_hour=args.cpu_dollars_per_hour, n_boot=args.n_boot, seed=args.seed)
    except reports.ReportError as exc:
        _say(f"microctx report frontier: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    return _report_done(manifest, args.out)


def _tuning_parsers(sub, report_kinds) -> None:
    p = sub.add_parser("sweep", help="tune a candidate on train/tune: run a parameter grid, grade each on tune, choose",
                       description="Run every configuration of SWEEP.toml through the isolated runner (the candidate sees "
                                   "the devkit's train answers), grade it on the devkit's tune answers, and choose by the "
                                   "[select] rule. Never given the answer bundle. Writes DIR/sweep.csv and "
                                   "DIR/selected.json; run again to resume. Exit 0 chosen, 1 none qualifies, 2 bad input.")
    p.add_argument("sweep", metavar="SWEEP.toml")
    p.add_argument("--public", required=True, help="public corpus")
    p.add_argument("--devkit", required=True, help="devkit with train and tune answers (from `microctx devkit`)")
    p.add_argument("--out", required=True, metavar="DIR")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, metavar="N", help="local parallel runs (default: the CPU count)")
    where.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on an existing Dask distributed cluster")
    p.add_argument("--connect-timeout", type=_seconds, default=5.0, metavar="SECONDS",
                   help="give up on an unreachable scheduler after this long (default %(default)s)")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("evaluate", help="run a sweep's frozen configuration once and grade it on test (one held-out look)",
                       description="Exit codes as `grade`: 0 pass, 1 fail (or the run failed), 2 unusable input.")
    p.add_argument("selected", metavar="DIR/selected.json")
    p.add_argument("--public", required=True)
    p.add_argument("--answers", required=True)
    p.add_argument("--out", required=True, metavar="DIR2")
    p.add_argument("--timeout", type=_seconds, metavar="SECONDS", help="kill the candidate after this long (default: the sweep's)")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("ledger", help="list the held-out ledger: every grading against test answers",
                       description="The ledger is MICROCTX_LEDGER, else ~/.local/share/microctx/ledger.sqlite.")
    p.add_argument("--answers", help="only this answer bundle (a file, or its SHA-256)")
    p.set_defaults(func=cmd_ledger)

    k = report_kinds.add_parser("sweep", help="sweep_report: tune metric against cost, the Pareto front, the chosen point")
    k.add_argument("sweep_dir", metavar="DIR", help="a sweep folder (holds sweep.csv and selected.json)")
    k.add_argument("--out", required=True, metavar="R")
    k.set_defaults(func=cmd_report_sweep)


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
    from microctx.reports.frontier import COST_MEASURES, DEFAULT_CPU_DOLLARS_PER_HOUR

    k = kinds.add_parser("frontier", help="frontier_report: net-true facts against cost, Pareto front, payoff vs exact-sql")
    k.add_argument("--public", help="public corpus (default: s8f)")
    k.add_argument("--answers", help="answer bundle (default: s8f)")
    k.add_argument("--submission", action="append", required=True,
                   help="repeat for each submission; costs come from its run manifest <S>.run.json")
    k.add_argument("--name", action="append", help="a name per submission, in order (default: file names)")
    k.add_argument("--baseline", help="name of the candidate to pay off against (default: the exact-sql run, else the first)")
    k.add_argument("--cost", choices=list(COST_MEASURES), default="dollars", help="cost measure, per record (default dollars)")
    k.add_argument("--cpu-dollars-per-hour", type=_price, default=DEFAULT_CPU_DOLLARS_PER_HOUR,
                   help="assumed price of a CPU-hour for the compute part of dollars (default %(default)s)")
    k.add_argument("--n-boot", type=int, default=None, help="bootstrap replicates (default 10000)")
    k.add_argument("--seed", type=int, default=0)
    k.add_argument("--out", required=True, metavar="DIR")
    k.set_defaults(func=cmd_report_frontier)


def cmd_report_semantic(args) -> int:
    from microctx.reports import build as reports

    _check_paths({"DIR": args.study_dir, "--semantic": args.semantic}, {}, {"--out": args.out})
    try:
        manifest = reports.semantic_report(args.study_dir, args.semantic, args.out)
    except reports.ReportError as exc:
        _say(f"microctx report semantic: {exc}; nothing was written to {args.out}")
        return EXIT_FAIL
    return _report_done(manifest, args.out)


def _semantic_report_parser(kinds) -> None:
    k = kinds.add_parser("semantic", help="semantic_report: a study's agreement, annotators, lexical rules and judge against gold")
    k.add_argument("study_dir", metavar="DIR", help="a study folder (microctx study init)")
    k.add_argument("--semantic", required=True, help="the semantic.json frozen from it")
    k.add_argument("--out", required=True, metavar="R")
    k.set_defaults(func=cmd_report_semantic)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="microctx", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"microctx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _core_parsers(sub)
    _candidate_parsers(sub)
    _lab_parsers(sub)
    _fetch_parsers(sub)
    _slices_parsers(sub)
    _report_parsers(sub)
    report_kinds = next(a for a in sub.choices["report"]._actions if isinstance(a, argparse._SubParsersAction))
    _tuning_parsers(sub, report_kinds)
    from microctx.semantic.cli import add_parsers as _study_parsers  # `microctx study` (docs/semantic.md)

    _study_parsers(sub)
    _semantic_report_parser(report_kinds)
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
    except OSError as exc:  # an input or output path the system refused: one line, like any bad input
        where = f"{exc.filename}: " if exc.filename else ""
        _say(f"microctx {args.command}: {where}{exc.strerror or exc}")
        return EXIT_INPUT
    except Exception as exc:  # a bug: still one line; the traceback only when asked for
        if os.environ.get("MICROCTX_DEBUG"):
            raise
        _say(f"microctx {args.command}: internal error ({type(exc).__name__}: {exc}); "
             "this is a bug in microctx: rerun with MICROCTX_DEBUG=1 for the traceback")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
