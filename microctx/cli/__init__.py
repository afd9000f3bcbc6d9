"""The `microctx` command: a thin shell over the package's stage functions.

Exit codes: 0 success; 1 the check or the grade failed; 2 unusable input (one line naming the
file, the record and the field, never a traceback). Heavy modules (pandas, notebooks, DuckDB,
scikit-learn) are imported only by the commands that need them.
"""

from __future__ import annotations

import argparse
import os
import sys

from microctx._version import __version__
from microctx.cli.common import EXIT_FAIL, EXIT_INPUT, EXIT_INTERNAL, EXIT_OK, _Parser, _say
from microctx.errors import ContractError, InputError


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; the command modules load here, not when `microctx.cli` is imported.

    `command`: the command about to run, when known; the candidate registry that `run`'s help
    lists is then imported only for `run` (start-up of every other command, issue 24)."""
    from microctx.cli import export
    from microctx.cli.core import _core_parsers, _fetch_parsers
    from microctx.cli.lab import _lab_parsers
    from microctx.cli.reports import _report_parsers, _slices_parsers
    from microctx.cli.run import _candidate_parsers
    from microctx.cli.tuning import _tuning_parsers

    parser = _Parser(prog="microctx", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", "-V", action="version", version=f"microctx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _core_parsers(sub)
    _candidate_parsers(sub, describe=command in (None, "run"))
    _lab_parsers(sub)
    _fetch_parsers(sub)
    _slices_parsers(sub)
    _report_parsers(sub)
    report_kinds = next(a for a in sub.choices["report"]._actions if isinstance(a, argparse._SubParsersAction))
    _tuning_parsers(sub, report_kinds)
    export.register(sub)
    from microctx.service.cli import register_service_commands  # the grader as a service (issue 21)

    register_service_commands(sub)
    from microctx.semantic.cli import add_parsers as _study_parsers  # `microctx study` (docs/semantic.md)

    _study_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if given in (["--version"], ["-V"]):  # answered before the parser (and the registry it lists) is built
        print(f"microctx {__version__}")
        return EXIT_OK
    parser = build_parser(given[0] if given else None)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "lab":  # only `microctx lab` passes options on (to JupyterLab)
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    args.jupyter_args = extra
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
        _say(
            f"microctx {args.command}: internal error ({type(exc).__name__}: {exc}); "
            "this is a bug in microctx: rerun with MICROCTX_DEBUG=1 for the traceback"
        )
        return EXIT_INTERNAL
