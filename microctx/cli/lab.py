"""`microctx lab`: JupyterLab on working copies of the notebooks."""

from __future__ import annotations

from microctx.cli.common import EXIT_OK, _say
from microctx.options import bounded_int


def cmd_lab(args) -> int:
    import os
    import sys
    from pathlib import Path

    from microctx.corpus.snapshot import DATA_DIR_ENV
    from microctx.lab.server import lab_command, lab_environment, prepare_lab

    folder = Path(args.dir)
    for path in prepare_lab(folder):
        _say(f"microctx lab: created {path}")
    env = lab_environment()
    _say(f"microctx lab: {DATA_DIR_ENV}={env.get(DATA_DIR_ENV, '(unset: the cache, then a download)')}")
    command = lab_command(folder, args.port, args.no_browser, getattr(args, "jupyter_args", []))
    if args.dry_run:
        print(" ".join(command))
        return EXIT_OK
    sys.stdout.flush()
    sys.stderr.flush()
    # JupyterLab replaces this process (not a child of it): a signal to `microctx lab` (Ctrl-C, a
    # terminate from a script or a test) reaches the server itself, so none is left running.
    os.execve(command[0], command, env)


def _lab_parsers(sub) -> None:
    p = sub.add_parser(
        "lab",
        help="start JupyterLab on working copies of the notebooks (the tracked ones stay clean); "
        "options it does not know (--ServerApp.token=..., --ip ...) go to JupyterLab",
    )
    p.add_argument("--dir", default="microctx-lab", help="the lab folder, created with its parents (default microctx-lab)")
    p.add_argument("--port", type=bounded_int(0, 65535), help="the server's port")
    p.add_argument("--no-browser", action="store_true", help="do not open a browser")
    p.add_argument("--dry-run", action="store_true", help="prepare the folder and print the command, do not start it")
    p.set_defaults(func=cmd_lab)
