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

# Each command's group of parsers, in `microctx -h` order: a command known here builds only its
# group (start-up, issue 24); `microctx -h` and any other word build every group. `report` and the
# tuning commands share a group (tuning adds `report sweep`).
COMMAND_GROUPS = {
    "core": ("freeze", "verify", "grade", "data"),
    "candidates": ("run", "devkit"),
    "lab": ("lab",),
    "fetch": ("fetch",),
    "slices": ("slices",),
    "reports": ("report", "demo", "sweep", "evaluate", "ledger"),
    "export": ("export",),
    "service": ("serve", "submit", "leaderboard", "receipt"),
    "study": ("study",),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `command` (the command about to run, when known: only its group of parsers is
    built, and only its modules load), else of every command; the command modules load here, not
    when `microctx.cli` is imported. The candidate registry that `run`'s help lists is imported
    only for `run` and `microctx -h`."""
    parser = _Parser(prog="microctx", description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", "-V", action="version", version=f"microctx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = [group for group, commands in COMMAND_GROUPS.items() if command in commands] or list(COMMAND_GROUPS)
    for group in wanted:
        _add_group(group, sub, describe=command in (None, "run"))
    return parser


def _add_group(group: str, sub, describe: bool) -> None:
    """Add one group's parsers to `sub` (importing only that group's command module)."""
    if group in ("core", "fetch"):
        from microctx.cli.core import _core_parsers, _fetch_parsers

        (_core_parsers if group == "core" else _fetch_parsers)(sub)
    elif group == "candidates":
        from microctx.cli.run import _candidate_parsers

        _candidate_parsers(sub, describe=describe)
    elif group == "lab":
        from microctx.cli.lab import _lab_parsers

        _lab_parsers(sub)
    elif group == "slices":
        from microctx.cli.reports import _slices_parsers

        _slices_parsers(sub)
    elif group == "reports":
        from microctx.cli.reports import _report_parsers
        from microctx.cli.tuning import _tuning_parsers

        _report_parsers(sub)
        report_kinds = next(a for a in sub.choices["report"]._actions if isinstance(a, argparse._SubParsersAction))
        _tuning_parsers(sub, report_kinds)
    elif group == "export":
        from microctx.cli import export

        export.register(sub)
    elif group == "service":
        from microctx.service.cli import register_service_commands  # the grader as a service (issue 21)

        register_service_commands(sub)
    else:
        from microctx.semantic.cli import add_parsers as _study_parsers  # `microctx study` (docs/semantic.md)

        _study_parsers(sub)


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
        _say(f"microctx {args.command}: interrupted; every output is whole (as it was, or as this command finished it)")
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
