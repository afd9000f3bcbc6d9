"""Reports: papermill-executed notebooks exported to self-contained HTML, with their charts.

How a report is made (`corpus_report`, `grade_report`, `compare_report`): check the inputs,
execute the notebook with papermill in a staging folder beside the destination, export the HTML
(no script from the network), check it, list the outputs in `report.json`, and only then rename
the staging folder to the destination. A failed run leaves the destination as it was (absent, or
the previous complete report). What the notebooks compute is in `tables`.

A report folder holds `<notebook>.ipynb` (executed), `<notebook>.html`, `charts/<name>.png` and
`.svg` for every chart (plus `<name>.html` for interactive ones), `report.json`, and for grade
and compare reports `slices.csv` (grade: also `grade.json` and `grade.facts.csv`; compare: also
`paired.csv` and one `grades/<candidate>.json` with its fact table per candidate).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from microctx._io import atomic
from microctx._io.paths import safe_name
from microctx.contract.canonical import dumps
from microctx.contract.digests import file_sha256
from microctx.contract.schemas import REPORT_MANIFEST_SCHEMA
from microctx.errors import InputError
from microctx.reports.kernels import (  # noqa: F401  (QUIET_KERNEL: for callers of build)
    KERNEL_NAME,
    QUIET_KERNEL,
    KernelError,
    SharedKernels,
)
from microctx.reports.rerun import keep_figures_only, relocate_inputs
from microctx.reports.tables import candidate_names


def _notebooks_dir() -> Path:
    """The report notebooks: shipped inside the package (a built wheel), else the checkout's
    top-level `notebooks/` (an editable install)."""
    shipped = Path(__file__).resolve().parent / "notebooks"
    return shipped if shipped.is_dir() else Path(__file__).resolve().parents[2] / "notebooks"


NOTEBOOKS_DIR = _notebooks_dir()
NOTEBOOKS = {
    "corpus": "corpus_overview.ipynb",
    "grade": "grade_report.ipynb",
    "compare": "compare_candidates.ipynb",
    "sweep": "sweep_report.ipynb",
}
NOTEBOOKS["frontier"] = "frontier_report.ipynb"  # the net-true decision boundary (microctx.grading.frontier)
NOTEBOOKS["semantic"] = "semantic_report.ipynb"  # a semantic study's agreement (microctx.semantic, docs/semantic.md)
# what a notebook's functions import on first use (beside the notebook's own imports), loaded as
# its kernel starts (`kernels.SharedKernels.start`); tests/test_report_imports.py checks that the
# notebook's run imports each of them
LATER_IMPORTS = {
    "grade": ("microctx.contract.score", "microctx.grading.slices", "microctx.grading.ledger", "scipy.special"),
    "compare": ("microctx.contract.score", "microctx.grading.slices", "microctx.grading.ledger", "scipy.special"),
}
MANIFEST = "report.json"
MANIFEST_SCHEMA = REPORT_MANIFEST_SCHEMA
CHARTS = "charts"
_REMOTE_SCRIPT = re.compile(rb"<script[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//", re.IGNORECASE)


class ReportError(Exception):
    """A report could not be made (a notebook cell failed, the kernel is wrong, the export is not
    self-contained). Nothing was written to the destination."""


# ================================================================ how a report is made


def staged_folder(destination: str | os.PathLike, marker: str = MANIFEST):
    """Build a folder beside `destination` and rename it into place on success.

    An existing destination is replaced only if it is empty or holds `marker` (a previous
    report); anything else is refused, so a typo cannot wipe an unrelated folder. On failure
    the staging folder is removed and the destination is untouched (see `microctx._io.atomic.staged_folder`:
    the swap is locked against concurrent reports, and every OSError is one line).
    """
    return atomic.staged_folder(destination, marker)


_OFFLINE_TEMPLATE = (
    "{%- extends 'index.html.j2' -%}\n"
    "{%- block html_head_js_requirejs -%}{%- endblock html_head_js_requirejs -%}\n"
    "{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}\n"
    "{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}\n"
)


_exporters = threading.local()  # one HTMLExporter per thread: its compiled templates are kept


def _html(book) -> bytes:
    """A notebook node as the report's HTML (`html_export`), unchecked. The exporter is made once
    per thread and kept: a new one compiles the lab templates again (50 ms, issue 24)."""
    exporter = getattr(_exporters, "html", None)
    if exporter is None:
        from jinja2 import DictLoader
        from nbconvert import HTMLExporter

        exporter = _exporters.html = HTMLExporter(
            template_name="lab",
            extra_loaders=[DictLoader({"microctx_offline.html.j2": _OFFLINE_TEMPLATE})],
            template_file="microctx_offline.html.j2",
            exclude_input=True,
            exclude_input_prompt=True,
            exclude_output_prompt=True,
        )
    body, _ = exporter.from_notebook_node(book)
    return body.encode()


def html_export(notebook_path: Path) -> bytes:
    """The executed notebook as self-contained HTML: lab template, code cells hidden, and no
    RequireJS, MathJax or Mermaid script from a CDN (the charts are inlined images)."""
    import nbformat

    data = _html(nbformat.read(notebook_path, as_version=4))
    if _REMOTE_SCRIPT.search(data):
        raise ReportError(f"{notebook_path.name}: the HTML export loads a script from the network")
    return data


def ready_export() -> None:
    """Export a small notebook once per thread (markdown, HTML, an SVG and a PNG), so nbconvert's
    modules, filters and this thread's exporter with its compiled templates are ready while a
    report's kernel boots, not after it ran."""
    if getattr(_exporters, "ready", False):
        return
    import nbformat.v4 as nbf

    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"></svg>'
    output = nbf.new_output("display_data", data={"text/html": "<p>x</p>", "image/svg+xml": svg, "image/png": png})
    book = nbf.new_notebook(cells=[nbf.new_markdown_cell("# x\n\n`x`"), nbf.new_code_cell("x", outputs=[output])])
    _html(book)
    _exporters.ready = True


def failed_folder(destination: str | os.PathLike) -> Path:
    """Where a failed report keeps its executed notebook: `<destination>.failed/` beside it."""
    return Path(os.fspath(destination).rstrip("/\\") + ".failed")


def _keep_failed(executed: Path, keep: Path | None) -> str:
    """Copy the executed notebook (with the failing cell's traceback) into `keep`; what to say of it."""
    if keep is None or not executed.is_file():
        return ""
    try:
        keep.mkdir(parents=True, exist_ok=True)
        atomic.atomic_write(keep / executed.name, executed.read_bytes())
    except OSError as exc:
        return f"; the executed notebook could not be kept in {keep}: {exc.strerror or exc}"
    return f"; the executed notebook with the failing cell: {keep / executed.name}"


def execute(
    kind: str,
    parameters: dict,
    staging: Path,
    *,
    progress: bool = True,
    keep_failed: Path | None = None,
    kernels: SharedKernels,
) -> Path:
    """Execute the `kind` notebook with papermill into `staging`; returns the executed notebook.

    `output_dir` is added to the parameters (the notebook writes its tables and charts there).
    A cell error raises ReportError naming the cell and the exception; the executed notebook,
    with that cell's traceback, is kept in `keep_failed` (papermill's habit) and the message says
    where. `kernels`: the notebook runs in this thread's kernel of that `SharedKernels` (started
    ahead by `make_report`).
    """
    import papermill as pm

    source = NOTEBOOKS_DIR / NOTEBOOKS[kind]
    if not source.is_file():
        raise ReportError(f"notebook {source} is missing (install microctx from its source tree)")
    executed = staging / NOTEBOOKS[kind]
    try:
        kernel = kernels.kernel()
    except KernelError as exc:
        raise ReportError(str(exc)) from None
    try:
        pm.execute_notebook(
            source,
            executed,
            parameters={**parameters, "output_dir": str(staging)},
            kernel_name=KERNEL_NAME,
            progress_bar=progress,
            log_output=False,
            request_save_on_cell_execute=False,
            km=kernel,
        )
        # written once at the end (and on a cell error), not before and after every cell: each
        # save serialises and validates the whole notebook, charts included (issue 24)
        # no `cwd=`: papermill would os.chdir the whole process, which breaks reports made in
        # parallel threads (demo); the notebooks use only the absolute paths they are given
    except pm.PapermillExecutionError as exc:
        kept = _keep_failed(executed, keep_failed)
        raise ReportError(f"{NOTEBOOKS[kind]}: cell {exc.exec_count} failed: {exc.ename}: {exc.evalue}{kept}") from None
    return executed


def _file_entry(path: Path, root: Path) -> dict:
    return {"path": path.relative_to(root).as_posix(), "bytes": path.stat().st_size, "sha256": file_sha256(path)}


def make_report(
    kind: str,
    parameters: dict,
    destination: str | os.PathLike,
    *,
    progress: bool | None = None,
    statistics: dict | None = None,
    figures_only: bool = False,
    kernels: SharedKernels | None = None,
) -> dict:
    """Execute, export and publish one report; returns its manifest (also written as report.json).
    `progress`: papermill's bar (default: when stderr is a terminal). `figures_only`: publish only
    the figures and tables (charts/, slices.*, paired.csv, frontier.csv) and report.json. `kernels`:
    reuse this thread's kernel (`SharedKernels`); without it, the report's own kernel is started
    first, so it boots while this process prepares (issue 24)."""
    start = time.perf_counter()
    progress = sys.stderr.isatty() if progress is None else progress
    own = kernels is None
    kernels = SharedKernels() if kernels is None else kernels
    try:
        kernels.start(
            NOTEBOOKS_DIR / NOTEBOOKS[kind], LATER_IMPORTS.get(kind, ())
        )  # it boots and imports while this process prepares
    except KernelError as exc:
        raise ReportError(str(exc)) from None
    try:
        inputs = input_digests(parameters)  # of the files as given (the folder keeps copies of them)
        with staged_folder(destination) as staging:
            ready_export()
            executed = execute(
                kind, parameters, staging, progress=progress, keep_failed=failed_folder(destination), kernels=kernels
            )
            if own:
                kernels.kill()  # done with it: its CPU goes to the export; `close` below reaps it
            return _publish(kind, executed, staging, parameters, inputs, start, statistics, figures_only)
    finally:
        if own:
            kernels.close()


def _publish(kind, executed, staging, parameters, inputs, start, statistics, figures_only) -> dict:
    """Export the executed notebook, list the outputs and write report.json into `staging`."""
    import msgspec

    from microctx.contract.records import ReportFile, ReportManifest

    parameters = relocate_inputs(executed, parameters, staging)  # reruns from its folder; no local path
    html_path = executed.with_suffix(".html")
    html_path.write_bytes(html_export(executed))
    charts = sorted((staging / CHARTS).glob("*.png")) if (staging / CHARTS).is_dir() else []
    missing_svg = [p.name for p in charts if not p.with_suffix(".svg").is_file()]
    if missing_svg:
        raise ReportError(f"charts without an SVG: {', '.join(missing_svg)}")
    if figures_only:
        keep_figures_only(staging)
    files = sorted(p for p in staging.rglob("*") if p.is_file())
    record = ReportManifest(
        schema=MANIFEST_SCHEMA,
        kind=kind,
        notebook=NOTEBOOKS[kind],
        parameters=parameters,
        inputs=inputs,
        charts=[p.stem for p in charts],
        seconds=round(time.perf_counter() - start, 3),
        files=msgspec.convert([_file_entry(p, staging) for p in files], list[ReportFile]),
    )
    if statistics is not None:
        record.statistics = statistics
    manifest = record.as_dict()
    (staging / MANIFEST).write_bytes(dumps(manifest))
    return manifest


def input_digests(parameters: dict) -> dict:
    """The SHA-256 of every input file a report's parameters name: a file's digest, a list's
    digests, a folder's files (name -> digest); parameters that name no file are left out."""

    def digest(value):
        path = Path(value)
        if path.is_file():
            return file_sha256(path)
        if path.is_dir():
            return {p.name: file_sha256(p) for p in sorted(path.iterdir()) if p.is_file()}
        return None

    found: dict = {}
    for key, value in parameters.items():
        if isinstance(value, str) and value:
            digests = digest(value)
        elif isinstance(value, list) and value and all(isinstance(v, str) and Path(v).is_file() for v in value):
            digests = [digest(v) for v in value]
        else:
            continue
        if digests is not None:
            found[key] = digests
    return found


def _checked_inputs(public: str, answers: str = "", submissions: Sequence[str] = ()) -> None:
    """Load every input once before starting a kernel, so bad input fails fast as an InputError.
    Standard input (`-`) is refused: the notebook reads each input again by its path."""
    from microctx.contract.schemas import load_answers, load_submission
    from microctx.corpus.public import load_corpus

    for path in (public, answers, *submissions):
        if os.fspath(path) == "-":
            raise InputError(path, "a report's notebook reads its inputs by path: give a file, not standard input")
    corpus = load_corpus(public)
    if not answers:
        return
    digest = load_answers(answers)["corpus_sha256"]
    if corpus.sha256 != digest:
        raise InputError(
            answers,
            f"the answers belong to corpus {digest}, not to {public} (SHA-256 {corpus.sha256}): the digests differ",
            field="corpus_sha256",
        )
    for path in submissions:
        bound = load_submission(path)["corpus_sha256"]
        if bound != digest:
            raise InputError(
                path,
                f"the submission is bound to corpus {bound}, the answers to {digest}: the digests differ; nothing to report",
                field="corpus_sha256",
            )


def corpus_report(public: str, out: str | os.PathLike, **kw) -> dict:
    """corpus_overview.ipynb on `public` into `out`."""
    _checked_inputs(public)
    return make_report("corpus", {"public": str(public)}, out, **kw)


def _statistics(statistics: dict | None) -> dict:
    """The full statistics settings (seed, n_boot, every threshold), checked before a kernel starts."""
    from microctx.grading.table import settings  # not slices: keeps pandas out of the report parent

    return settings(**(statistics or {}))


def _names(submissions: Sequence[str], names: Sequence[str]) -> list[str]:
    """The candidates' names, one per submission and distinct: those given (`--name`, checked as
    safe, since they reach Markdown and file names), else derived from the submissions."""
    found = [safe_name(name) for name in names] or candidate_names(submissions)
    if len(found) != len(submissions) or len(set(found)) != len(found):
        raise InputError("--name", f"expected {len(submissions)} distinct names (one per --submission), got {found}")
    return found


def _stat_params(full: dict) -> dict:
    """The four statistics settings a report notebook takes as parameters."""
    return {k: full[k] for k in ("seed", "n_boot", "min_support", "min_components")}


def grade_report(
    public: str,
    answers: str,
    submission: str,
    out: str | os.PathLike,
    statistics: dict | None = None,
    semantic: str | None = None,
    **kw,
) -> dict:
    """grade_report.ipynb on one submission into `out` (with slices.csv, grade.json, facts).
    `statistics`: seed, n_boot, min_support, min_components (defaults from the package); all the
    settings are recorded in report.json under "statistics". `semantic`: a study's semantic.json,
    whose lexical and semantic verdicts the report shows side by side (grade.semantic.csv)."""
    full = _statistics(statistics)
    _checked_inputs(public, answers, [submission])
    params = {"public": str(public), "answers": str(answers), "submission": str(submission), **_stat_params(full)}
    if semantic:  # checked by the caller (microctx.semantic sits above the reports)
        params["semantic"] = str(Path(semantic).resolve())
    return make_report("grade", params, out, statistics=full, **kw)


def compare_report(
    public: str,
    answers: str,
    submissions: Sequence[str],
    out: str | os.PathLike,
    names: Sequence[str] = (),
    statistics: dict | None = None,
    **kw,
) -> dict:
    """compare_candidates.ipynb on two or more submissions into `out` (slices.csv, paired.csv)."""
    if len(submissions) < 2:
        raise InputError("--submission", f"compare needs at least two submissions, got {len(submissions)}")
    names = _names(submissions, names)
    full = _statistics(statistics)
    _checked_inputs(public, answers, submissions)
    params = {
        "public": str(public),
        "answers": str(answers),
        "submissions": [str(s) for s in submissions],
        "names": names,
        **_stat_params(full),
    }
    return make_report("compare", params, out, statistics=full, **kw)


def sweep_report(sweep_dir: str | os.PathLike, out: str | os.PathLike, *, cost: str = "", **kw) -> dict:
    """sweep_report.ipynb on a sweep folder (sweep.csv, selected.json) into `out`: tune metric
    against cost, the Pareto front, the chosen configuration."""
    from microctx.reports.tables import load_sweep

    load_sweep(sweep_dir)  # bad input fails here, before a kernel starts
    return make_report("sweep", {"sweep_dir": str(Path(sweep_dir).resolve()), "cost": cost}, out, **kw)


def frontier_report(
    public: str,
    answers: str,
    submissions: Sequence[str],
    out: str | os.PathLike,
    names: Sequence[str] = (),
    *,
    baseline: str = "",
    cost: str = "dollars",
    cpu_dollars_per_hour: float | None = None,
    n_boot: int | None = None,
    seed: int = 0,
    **kw,
) -> dict:
    """frontier_report.ipynb on one or more submissions (with their run manifests) into `out`
    (frontier.csv, charts): net-true facts, cost per record, Pareto front, payoff against `baseline`.
    `n_boot` defaults to the package's (microctx.grading.stats.DEFAULT_N_BOOT)."""
    import math

    from microctx.contract.costs import COST_MEASURES
    from microctx.grading.frontier import DEFAULT_CPU_DOLLARS_PER_HOUR
    from microctx.grading.stats import DEFAULT_N_BOOT

    if not submissions:
        raise InputError("--submission", "the frontier needs at least one submission")
    names = _names(submissions, names)
    n_boot = DEFAULT_N_BOOT if n_boot is None else n_boot
    if baseline and baseline not in names:
        raise InputError("--baseline", f"{baseline!r} is not one of the candidates ({', '.join(names)})")
    if cost not in COST_MEASURES:
        raise InputError("--cost", f"expected one of {', '.join(COST_MEASURES)}, got {cost!r}")
    price = DEFAULT_CPU_DOLLARS_PER_HOUR if cpu_dollars_per_hour is None else float(cpu_dollars_per_hour)
    if not math.isfinite(price) or price < 0 or n_boot < 0:
        raise InputError("--n-boot" if n_boot < 0 else "--cpu-dollars-per-hour", "expected a non-negative, finite number")
    _checked_inputs(public, answers, submissions)
    params = {
        "public": str(public),
        "answers": str(answers),
        "submissions": [str(s) for s in submissions],
        "names": names,
        "baseline": baseline,
        "cost": cost,
        "cpu_dollars_per_hour": price,
        "n_boot": int(n_boot),
        "seed": int(seed),
    }
    return make_report("frontier", params, out, **kw)
