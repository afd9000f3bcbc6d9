"""Tuning sweeps: run a candidate over a grid of parameters, grade each run on the tune split, choose.

`microctx sweep SWEEP.toml --public P --devkit D --out DIR` is the honest protocol made the easy
path: configurations are compared on the devkit's tune answers only, and the sweep is never given
the answer bundle (it has no such argument), so choosing a configuration cannot look at test.

SWEEP.toml (declared as types in `microctx.tuning.config`; a bad key or value is one line naming
the file and the key, exit 2):

    [candidate]
    name = "text-only"             # optional label (default: the builtin, function or "command")
    builtin = "text-only"          # or function = "module:function" | "file.py:function" (relative to this file),
                                   # or cmd = "python mine.py {public} {submission} {params}"
                                   # or project = "mine/candidate.toml" (relative to this file; a project:
                                   # its command, folders, venv, data; microctx.candidates.project)
    version = "2"                  # optional; else microctx's version + a hash of its code (builtin), the file's SHA-256, the project's digest, or none
    timeout = 600                  # optional, seconds per run
    devkit_splits = ["train"]      # optional: what the candidate sees of the devkit (default train only)

    [grid]                         # each key a non-empty list; the sweep runs the cartesian product
    alpha = [1e-5, 1e-4]

    [search]                       # optional: random search over the grid
    method = "random"              # "grid" (default) or "random"
    budget = 8                     # configurations drawn without replacement
    seed = 0

    [select]
    metric = "f1"                  # f1, precision, recall or exact_rate (on tune)
    rule = "max"                   # or "least-cost-meeting-floor" (with floor and cost)
    floor = 0.8
    cost = "cpu_seconds"           # a cost column (wall_seconds, cpu_seconds, peak_memory_bytes, model_calls,
                                   # tool_calls, input_tokens, output_tokens, cached_tokens, cost_microdollars)
                                   # or "param:NAME"

    [sandbox]                      # optional: how each run is isolated (default: the sandbox, no network)
    isolation = "sandbox"          # or "process" (no isolation: knowingly)
    network = "record"             # "none" (default) or "record": only allow_hosts, through the logging proxy
    allow_hosts = ["127.0.0.1:8000"]
    memory = "4G"                  # also max_processes, cpu_seconds
    cache_dir = "cache"            # relative to this file; the one folder kept between runs
    pass_env = ["OPENAI_API_KEY"]  # names of variables handed to the candidate

The candidate is given a devkit holding only `devkit_splits` (default: train) and its run is
graded on the tune answers of D, which it therefore never saw (a candidate that copies the answers
it is given, as text-only does for train records, would otherwise grade itself perfectly).

Each configuration is one task: one run through `microctx.candidates.runner.run_candidate` (in its
own process and folder, with the [sandbox] settings) plus its tune grade. Its key is the SHA-256
of the candidate's identity and version (a built-in's carries a hash of its code, so changed code
never reuses a result), the parameters, the corpus, devkit and candidate-devkit digests and (when
given) the [sandbox] settings; results are
written by the caller only (never by a worker), once per key, into `DIR/runs/<key>/`, so a
re-run resumes: every key already there is skipped. Outputs: `DIR/sweep.csv` (a row per
configuration, failed ones included), `DIR/selected.json` (the frozen choice and the reason),
`DIR/candidate-devkit.json` (what the candidate saw; `microctx evaluate` reruns with it).

Tune metrics and their intervals (columns of sweep.csv): `exact_rate` (exact tune records over
tune records), `precision`, `recall`, `f1`, each with the 95% Korn-Graubard
interval from the cluster bootstrap of `microctx.grading.stats` (split components resampled,
`stats.DEFAULT_N_BOOT` replicates, seed 0; no interval below `stats.DEFAULT_MIN_COMPONENTS`
components), as slice reports do. A sandbox that cannot start is refused before any run (exit 2);
a run it refuses mid-sweep is a transient failure, which a resume runs again.

Execution: an embedded thread pool by default (`workers`, each task's work is in its own child
process), or an existing Dask distributed cluster (`scheduler="tcp://HOST:PORT"`): the inputs are
scattered to the workers as content (no shared file system needed), each task is submitted with
retries, and a worker lost mid-task has its task run elsewhere by the scheduler. The cluster's
workers must have microctx installed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from microctx.contract.canonical import dumps
from microctx.contract.costs import SWEEP_COSTS as COSTS
from microctx.contract.costs import SWEEP_MODEL_COSTS as MODEL_COSTS
from microctx.contract.digests import file_sha256, sha256_hex
from microctx.contract.schemas import RESULT_SCHEMA, SELECTED_SCHEMA, SWEEP_SCHEMA
from microctx.errors import InputError
from microctx.tuning.config import (
    MAX_CONFIGS,
    METRICS,
    RULES,
    SANDBOX_KEYS,
    SweepSpec,
    config_key,
    configurations,
    load_sandbox,
    load_sweep,
)
from microctx.tuning.run import Inputs, Task, check_sandbox, connect, run_local, run_on_dask, run_task
from microctx.tuning.select import config_digest, select, sweep_row
from microctx.tuning.tune import tune_grade, tune_metrics
from microctx.tuning.write import CANDIDATE_DEVKIT, read_result, save_result, sweep_csv, sweep_frame, write_outputs

__all__ = [
    "CANDIDATE_DEVKIT",
    "COSTS",
    "MODEL_COSTS",
    "MAX_CONFIGS",
    "METRICS",
    "RESULT_SCHEMA",
    "RULES",
    "SANDBOX_KEYS",
    "SELECTED_SCHEMA",
    "SWEEP_MARKER",
    "SweepResult",
    "SweepSpec",
    "Task",
    "check_sandbox",
    "config_digest",
    "config_key",
    "configurations",
    "connect",
    "load_sandbox",
    "load_sweep",
    "run_sweep",
    "run_task",
    "select",
    "sweep_row",
    "sweep_csv",
    "sweep_frame",
    "tune_grade",
    "tune_metrics",
    "write_outputs",
]
SWEEP_MARKER = "sweep.json"


@dataclass
class SweepResult:
    out: Path
    rows: list[dict]
    selected: dict | None
    ran: list[str] = field(default_factory=list)  # keys run now (the rest were resumed)
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return sum(r["status"] != "ok" for r in self.rows)


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise InputError(out, "exists and is not a folder")
    from microctx._io.sets import is_our_output

    if out.is_dir() and any(out.iterdir()) and not is_our_output(out / SWEEP_MARKER):
        raise InputError(
            out,
            f"exists and is not a sweep folder (no {SWEEP_MARKER} with a microctx schema id); choose another --out or empty it",
        )


def _check_inputs(public, devkit, out: Path, spec: SweepSpec) -> Inputs:
    """Check the corpus and the devkit, then create `out` and write the candidate's devkit there."""
    from microctx._io.atomic import atomic_write
    from microctx.candidates.devkit import make_devkit
    from microctx.candidates.runner import _check_devkit, _check_public
    from microctx.contract.schemas import load_answers
    from microctx.corpus.public import load_corpus

    public, devkit = Path(public), Path(devkit)
    corpus_sha256 = _check_public(public)
    _check_devkit(devkit, corpus_sha256)  # bound to this corpus, no test answer
    document = load_answers(devkit)
    if not any(a["split"] == "tune" for a in document["answers"]):
        raise InputError(devkit, "the devkit holds no tune answer: a sweep grades on tune", field="answers")
    candidate_devkit = make_devkit(document, spec.devkit_splits, corpus=load_corpus(public))
    out.mkdir(parents=True, exist_ok=True)
    cpath = out / CANDIDATE_DEVKIT
    data = dumps(candidate_devkit)
    if not cpath.is_file() or cpath.read_bytes() != data:
        atomic_write(cpath, data)
    return Inputs(public, devkit, cpath, corpus_sha256, file_sha256(devkit), sha256_hex(data))


def run_sweep(
    spec: SweepSpec | str | os.PathLike,
    public,
    devkit,
    out,
    *,
    workers: int | None = None,
    scheduler=None,
    retries: int = 3,
    connect_timeout: float = 5.0,
    progress: bool | None = None,
    runner: Callable | None = None,
) -> SweepResult:
    """Run (or resume) a sweep; write DIR/runs/*, DIR/sweep.csv and DIR/selected.json.

    `scheduler`: a Dask scheduler address (or a distributed Client); else a local pool of
    `workers` threads (default: the CPU count). `runner` replaces `run_candidate` in the local
    pool (tests wrap it to see what the candidate is given).
    """
    started = time.monotonic()
    spec = spec if isinstance(spec, SweepSpec) else load_sweep(spec)
    out = Path(out)
    _check_out(out)
    own_client = connect(scheduler, connect_timeout) if isinstance(scheduler, str) else None  # fail fast, write nothing
    try:
        return _run_sweep(
            spec,
            public,
            devkit,
            out,
            workers=workers,
            client=own_client or scheduler,
            retries=retries,
            progress=progress,
            runner=runner,
            started=started,
        )
    finally:
        if own_client is not None:
            own_client.close()


def _tasks(spec: SweepSpec, inputs: Inputs) -> list[Task]:
    candidate, cmd = spec.run_args()
    return [
        Task(
            config_key(spec, p, inputs.corpus_sha256, inputs.devkit_sha256, inputs.candidate_devkit_sha256),
            i,
            candidate,
            cmd,
            p,
            spec.timeout,
            spec.sandbox,
            spec.pass_env,
            spec.project,
        )
        for i, p in enumerate(configurations(spec))
    ]


def _resumed(out: Path, tasks: list[Task]) -> dict[str, dict]:
    """The results already in `out` (a transient failure is run again)."""
    results: dict[str, dict] = {}
    for task in tasks:
        done = read_result(out / "runs" / task.key)
        if done is not None and done.get("status") in ("ok", "failed") and not done.get("transient"):
            results[task.key] = {**done, "index": task.index}
    return results


def _write_marker(out: Path, spec: SweepSpec, inputs: Inputs, configurations: int) -> None:
    from microctx._io.atomic import atomic_write

    marker = {
        "schema": SWEEP_SCHEMA,
        "sweep": spec.path,
        "sweep_sha256": spec.sha256,
        "candidate": spec.identity,
        "sandbox": spec.sandbox_identity,
        "corpus_sha256": inputs.corpus_sha256,
        "devkit_sha256": inputs.devkit_sha256,
        "candidate_devkit_sha256": inputs.candidate_devkit_sha256,
        "configurations": configurations,
    }
    atomic_write(out / SWEEP_MARKER, dumps(marker))


def _run_sweep(
    spec: SweepSpec, public, devkit, out: Path, *, workers, client, retries, progress, runner, started: float
) -> SweepResult:
    from tqdm.auto import tqdm

    inputs = _check_inputs(public, devkit, out, spec)
    tasks = _tasks(spec, inputs)
    results = _resumed(out, tasks)
    todo = [t for t in tasks if t.key not in results]
    if todo and spec.settings.isolation == "sandbox":  # a sandbox that cannot start is one line, exit 2, not N failed rows
        check_sandbox(client)
    if todo and client is None and spec.pass_env:  # so is a variable to pass that is not set here
        from microctx.candidates.runner import _check_pass_env

        _check_pass_env(spec.pass_env)
    _write_marker(out, spec, inputs, len(tasks))
    ran: list[str] = []
    disable = None if progress is None else not progress
    bar = tqdm(total=len(tasks), initial=len(results), desc=f"sweep {spec.name}", unit="config", disable=disable)
    try:
        if todo:
            stream = (
                run_on_dask(todo, inputs, client, retries)
                if client is not None
                else run_local(todo, inputs, workers or os.cpu_count() or 1, runner)
            )
            for result in stream:
                if result["key"] in results:  # written once per key, whatever the cluster did
                    continue
                results[result["key"]] = save_result(out, result)
                ran.append(result["key"])
                bar.update(1)
    finally:
        bar.close()
    rows = [sweep_row(results[t.key], spec) for t in tasks]
    selected = select(rows, spec)
    write_outputs(out, spec, rows, selected, inputs)
    return SweepResult(out, rows, selected, ran, time.monotonic() - started)
