"""Executed reports that rerun from their folder.

papermill executes a report notebook with absolute paths (the inputs where they are, the staging
folder as `output_dir`). Those paths die with the staging folder and name the user's machine. After
execution, `relocate_inputs` copies every input the parameters name into the report's `inputs/`
folder (a file with its run manifest beside it; a folder's top-level files), and rewrites the
notebook's injected parameter cell to point at those copies by relative path, with
`output_dir = "."`. Opened in JupyterLab (whose kernels start in the notebook's folder) and run
again, the notebook finds everything inside its own folder, and the report names no local path.
The folder then holds its inputs, the answer bundle included: share it where the answers may go.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

INPUTS = "inputs"
INJECTED_TAG = "injected-parameters"


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)  # same file system: no second copy of a large corpus
    except OSError:
        shutil.copyfile(source, target)


def _relocated(key: str, value: str, root: Path, index: int | None) -> str:
    """The report-relative path of the copy of `value` (a file or a folder); "" stays ""."""
    if not value:
        return value
    source = Path(value)
    where = Path(INPUTS) / (key if index is None else f"{key}-{index + 1}")
    if source.is_dir():
        for item in sorted(p for p in source.iterdir() if p.is_file()):
            _copy(item, root / where / item.name)
        return where.as_posix()
    if not source.is_file():
        return value
    from microctx.candidates.runner import manifest_path

    _copy(source, root / where / source.name)
    beside = manifest_path(source)
    if beside.is_file():  # cost tables read the run manifest beside a submission
        _copy(beside, root / where / beside.name)
    return (where / source.name).as_posix()


def relocate_inputs(executed: Path, parameters: dict, root: Path) -> dict:
    """Copy the inputs `parameters` name into `root/inputs/` and point the executed notebook's
    parameter cell at them (relative paths, `output_dir = "."`); returns the new parameters."""
    import nbformat
    from papermill.translators import PythonTranslator

    moved: dict = {}
    for key, value in parameters.items():
        if isinstance(value, str):
            moved[key] = _relocated(key, value, root, None)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            moved[key] = [_relocated(key, v, root, i) for i, v in enumerate(value)]
        else:
            moved[key] = value
    moved["output_dir"] = "."
    notebook = nbformat.read(executed, as_version=4)
    for cell in notebook.cells:
        if INJECTED_TAG in cell.get("metadata", {}).get("tags", []):
            cell.source = PythonTranslator.codify(moved, "Parameters (the inputs are copies in this folder's inputs/)")
    record = notebook.metadata.get("papermill")
    if record is not None:  # papermill's own record names the staging folder and the originals
        record.update(parameters=moved, input_path=executed.name, output_path=executed.name)
    nbformat.write(notebook, executed)
    return moved


FIGURE_FILES = ("charts", "slices.csv", "slices.md", "slices.tex", "paired.csv", "frontier.csv")


def keep_figures_only(staging: Path) -> None:
    """`microctx report ... --figures-only`: remove everything but the figures and tables."""
    for item in staging.iterdir():
        if item.name in FIGURE_FILES:
            continue
        if item.is_dir():
            shutil.rmtree(item)
        else:
            item.unlink()
