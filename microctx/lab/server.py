"""`microctx lab`: JupyterLab on working copies of the notebooks, with the data found as everywhere.

`prepare_lab(folder)` makes the lab folder: a copy of each packaged notebook (never overwriting
one already there: those are the user's) and `workbench.ipynb`, a starter notebook (load the
corpus, explore it, grade, chart). The tracked notebooks in the checkout are never opened, so
JupyterLab's autosave cannot dirty them. `lab_environment()` sets MICROCTX_DATA_DIR for the
server and its kernels to the folder the data layer resolves here (MICROCTX_DATA_DIR, else the
project-local `microctx.toml` setting), so a notebook finds the data the way the CLI does.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from microctx._io.atomic import atomic_write
from microctx.corpus.snapshot import DATA_DIR_ENV, data_dir
from microctx.reports.build import NOTEBOOKS, NOTEBOOKS_DIR

WORKBENCH = "workbench.ipynb"

_WORKBENCH_CELLS = [
    (
        "markdown",
        "# microctx workbench\n\nThe published s8f corpus, explored, graded and charted. "
        "Every result shows a summary when typed in a cell; charts render offline.",
    ),
    (
        "code",
        "import microctx\nfrom microctx.corpus import snapshot\n\n%load_ext microctx\n\n"
        "paths = snapshot.s8f()  # MICROCTX_DATA_DIR, microctx.toml, the cache, or a download\n"
        "corpus = microctx.load_corpus(paths.public)\ncorpus",
    ),
    (
        "code",
        "from microctx.grading.examples import planted_submission  # the answers with known faults\n\n"
        "answers = microctx.load_answers(paths.answers)\n"
        "result = microctx.grade(answers, planted_submission(answers))  # or a path to your submission\n"
        "result",
    ),
    ("code", "result.slices(corpus)  # slice statistics, weakest first; .table is the DataFrame"),
    ("code", "microctx.explore(corpus, grade=result)"),
    ("code", "microctx.charts.state_by_split(corpus.frame())  # an altair chart, rendered offline as an image"),
]


def workbench_notebook() -> dict:
    import nbformat

    book = nbformat.v4.new_notebook()
    for kind, source in _WORKBENCH_CELLS:
        book.cells.append(nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source))
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return book


def prepare_lab(folder: str | os.PathLike) -> list[Path]:
    """Create `folder` (and its parents) with copies of the notebooks; returns the notebooks created."""
    import nbformat

    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    created = []
    for name in NOTEBOOKS.values():  # never through a link: a name that exists at all (even a dangling link) is kept
        source, copy = NOTEBOOKS_DIR / name, target / name
        if source.is_file() and not os.path.lexists(copy):
            atomic_write(copy, source.read_bytes())  # a new file at this name, inside the folder
            created.append(copy)
    workbench = target / WORKBENCH
    if not os.path.lexists(workbench):
        atomic_write(workbench, nbformat.writes(workbench_notebook()).encode())
        created.append(workbench)
    return created


def lab_environment() -> dict[str, str]:
    env = dict(os.environ)
    found = data_dir()
    if found is not None:
        env[DATA_DIR_ENV] = str(found.resolve())
    return env


def lab_command(folder: Path, port: int | None, no_browser: bool, extra: Sequence[str] = ()) -> list[str]:
    """The JupyterLab command: its root folder, port and browser choice, `--allow-root` when run as
    root (JupyterLab refuses root without it), then `extra`, JupyterLab options passed through as given."""
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={folder.resolve()}"]
    if port:
        command.append(f"--ServerApp.port={port}")
    if no_browser:
        command.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in extra:
        command.append("--allow-root")
    return [*command, *extra]
