"""The `microctx` command: a thin shell over the package's stage functions.

Exit codes: 0 success; 1 the check or the grade failed; 2 unusable input (one line naming the
file, the record and the field, never a traceback). Heavy modules (pandas, notebooks, DuckDB,
scikit-learn) are imported only by the commands that need them.
"""

from __future__ import annotations

import argparse
import sys

from .errors import ContractError, InputError

EXIT_OK, EXIT_FAIL, EXIT_INPUT = 0, 1, 2


def _say(message: str) -> None:
    print(message, file=sys.stderr)


# --- core: freeze, verify, grade, data -------------------------------------------------------

def cmd_freeze(args) -> int:
    from .export import read_export
    from .freezing import freeze, write_frozen
    from .redact import load_rules

    rules = load_rules(args.redactions) if args.redactions else []
    frozen = freeze(read_export(args.raw), args.source, rules)
    write_frozen(frozen, args.public, args.answers, args.report)
    r = frozen.report
    print(f"froze {r['records']} records (train {r['train_records']}, tune {r['tune_records']}, test {r['test_records']}); "
          f"public {frozen.public_sha256}, answers {frozen.answers_sha256}")
    return EXIT_OK


def cmd_verify(args) -> int:
    from .verifying import verify_files

    result = verify_files(args.public, args.answers, args.report)
    for problem in result.problems:
        print(f"FAIL {problem}")
    if result.ok:
        print(f"ok: {result.summary}")
        return EXIT_OK
    print(f"{len(result.problems)} problems found")
    return EXIT_FAIL


def cmd_grade(args) -> int:
    from .canonical import dumps
    from .files import AtomicOutputs
    from .grading import facts_csv, facts_path, grade
    from .loading import load_answers, load_submission

    result = grade(load_answers(args.answers), load_submission(args.submission))
    with AtomicOutputs() as out:
        out.write(args.output, dumps(result.grade))
        out.write(facts_path(args.output), facts_csv(result.facts))
    print(result.summary())
    return EXIT_OK if result.passed else EXIT_FAIL


def cmd_data(args) -> int:
    from . import data

    paths = data.s8f()
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
    p.set_defaults(func=cmd_data)


# --- candidates: run, devkit (candidates issue) ----------------------------------------------

def _candidate_parsers(sub) -> None:
    pass


# --- corpora in: fetch (real corpora issue) --------------------------------------------------

def _fetch_parsers(sub) -> None:
    pass


# --- reports: report corpus|grade|compare, demo (slice reports issue) ------------------------

def _report_parsers(sub) -> None:
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="microctx", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _core_parsers(sub)
    _candidate_parsers(sub)
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
