"""Tuning sweeps: run a candidate over a grid of parameters, grade each run on the tune split, choose.

`microctx sweep SWEEP.toml --public P --devkit D --out DIR` is the honest protocol made the easy
path: configurations are compared on the devkit's tune answers only, and the sweep is never given
the answer bundle (it has no such argument), so choosing a configuration cannot look at test.

SWEEP.toml:

    [candidate]
    name = "text-only"             # optional label (default: the builtin, function or "command")
    builtin = "text-only"          # or function = "module:function" | "file.py:function" (relative to this file),
                                   # or cmd = "python mine.py {public} {submission} {params}"
    version = "2"                  # optional; else microctx's version (builtin), the file's SHA-256, or none
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
of the candidate's identity and version, the parameters, the corpus, devkit and candidate-devkit
digests and (when given) the [sandbox] settings; results are
written by the caller only (never by a worker), once per key, into `DIR/runs/<key>/`, so a
re-run resumes: every key already there is skipped. Outputs: `DIR/sweep.csv` (a row per
configuration, failed ones included), `DIR/selected.json` (the frozen choice and the reason),
`DIR/candidate-devkit.json` (what the candidate saw; `microctx evaluate` reruns with it).

Tune metrics and their intervals (columns of sweep.csv): `exact_rate` (exact tune records over
tune records), `precision`, `recall`, `f1`, each with the cluster-bootstrap 95% percentile
interval of `microctx.grading.stats` (split components resampled,
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

import math
import os
import random
import shutil
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from microctx.candidates.registry import BUILTINS, COUNTER_KEYS
from microctx.candidates.sandbox import SandboxSettings
from microctx.contract.canonical import dumps
from microctx.contract.digests import file_sha256, sha256_hex
from microctx.errors import InputError

SELECTED_SCHEMA = "microctx-selected/1"
RESULT_SCHEMA = "microctx-sweep-result/1"
SWEEP_MARKER = "sweep.json"
MAX_CONFIGS = 4096  # a grid past this is refused (use [search] method = "random" with a budget)
METRICS = ("f1", "precision", "recall", "exact_rate")
MODEL_COSTS = ("cached_tokens", "cost_microdollars")  # model counters (llm candidates), also sweep.csv columns
COSTS = ("wall_seconds", "cpu_seconds", "peak_memory_bytes") + COUNTER_KEYS + MODEL_COSTS
RULES = ("max", "least-cost-meeting-floor")
CANDIDATE_DEVKIT = "candidate-devkit.json"
SANDBOX_KEYS: tuple[str, ...] = ("isolation", "network", "allow_hosts", "memory", "max_processes", "cpu_seconds", "cache_dir")
SANDBOX_KEYS += ("pass_env", "model_endpoint", "model_key_env", "max_model_calls", "max_tokens", "max_dollars", "model_price")
SANDBOX_KEYS += ("model_cache",)

_KEYS = {
    "candidate": {"name", "builtin", "cmd", "function", "version", "timeout", "devkit_splits"},
    "grid": None,
    "search": {"method", "budget", "seed"},
    "select": {"metric", "rule", "floor", "cost"},
    "sandbox": set(SANDBOX_KEYS),
}


# ================================================================ the sweep file


@dataclass(frozen=True)
class SweepSpec:
    path: str
    name: str
    kind: str  # builtin, function or command
    entry: str  # the builtin name, module:function, or the command template
    version: str | None
    timeout: float | None
    devkit_splits: tuple[str, ...]
    grid: dict
    method: str = "grid"
    budget: int | None = None
    seed: int = 0
    metric: str = "f1"
    rule: str = "max"
    floor: float | None = None
    cost: str | None = None
    sha256: str = ""
    sandbox: SandboxSettings | None = None  # None: the runner's default (the sandbox, no network)
    pass_env: tuple[str, ...] = ()

    @property
    def identity(self) -> dict:
        """What the configuration key says of the candidate."""
        return {"name": self.name, "kind": self.kind, "entry": self.entry, "version": self.version}

    @property
    def settings(self) -> SandboxSettings:
        return self.sandbox if self.sandbox is not None else SandboxSettings()

    @property
    def sandbox_identity(self) -> dict:
        """What the configuration key and selected.json say of the isolation (the wall timeout is `timeout`)."""
        data = {k: v for k, v in self.settings.as_dict().items() if k not in ("timeout_seconds", "schema")}
        return {**data, "pass_env": list(self.pass_env)}

    def run_args(self) -> tuple[str, str | None]:
        """(candidate, cmd) as `run_candidate` takes them."""
        return (self.name, self.entry) if self.kind == "command" else (self.entry, None)


def _type_error(path, key: str, expected: str, value: object) -> InputError:
    from microctx.errors import json_type_name

    return InputError(path, f"expected {expected}, got {json_type_name(value)} {value!r}", field=key)


def _positive_seconds(path, key: str, value: object) -> None:
    if value is not None and (
        not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value <= 0
    ):
        raise _type_error(path, key, "a positive, finite number of seconds", value)


def load_sandbox(path, table: dict) -> tuple[SandboxSettings | None, tuple[str, ...]]:
    """SWEEP.toml's [sandbox] table -> (SandboxSettings, pass_env); an InputError names the key."""
    from microctx.candidates.sandbox import parse_size

    if not table:
        return None, ()
    options: dict = {}
    for key in ("isolation", "network", "cache_dir"):
        if key in table:
            if not isinstance(table[key], str) or not table[key].strip():
                raise _type_error(path, f"sandbox.{key}", "a non-empty string", table[key])
            options[key] = table[key]
    if "cache_dir" in options and not Path(options["cache_dir"]).is_absolute():
        options["cache_dir"] = str(Path(path).resolve().parent / options["cache_dir"])  # relative to the sweep file
    for key in ("allow_hosts", "pass_env"):
        value = table.get(key, [])
        if not isinstance(value, list) or any(not isinstance(v, str) or not v.strip() for v in value):
            raise _type_error(path, f"sandbox.{key}", "a list of non-empty strings", value)
    options["allow_hosts"] = tuple(table.get("allow_hosts", []))
    pass_env = tuple(table.get("pass_env", []))
    if any(not name.replace("_", "").isalnum() for name in pass_env):
        raise InputError(path, "expected names of environment variables (never their values)", field="sandbox.pass_env")
    if "memory" in table:
        memory = table["memory"]
        if isinstance(memory, bool) or not isinstance(memory, (str, int)):
            raise _type_error(path, "sandbox.memory", 'a size like "2G" or a number of bytes', memory)
        try:
            options["memory_bytes"] = parse_size(memory)
        except InputError as exc:
            raise InputError(path, exc.message, field="sandbox.memory") from None
    for key in ("max_processes", "cpu_seconds"):
        if key in table:
            value = table[key]
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise _type_error(path, f"sandbox.{key}", "a positive integer", value)
            options[key] = value
    try:
        from microctx.candidates.settings import gateway_from_table

        options["gateway"] = gateway_from_table(table)
        settings = SandboxSettings(**options)
    except InputError as exc:  # the settings name their CLI option: say the sweep file's key instead
        where = {
            "--isolation": "isolation",
            "--network": "network",
            "--allow-host": "allow_hosts",
            "--memory": "memory",
            "--max-processes": "max_processes",
            "--cpu-seconds": "cpu_seconds",
        }.get(exc.file, str(exc.file).lstrip("-").replace("-", "_") if str(exc.file).startswith("--m") else "cache_dir")
        raise InputError(path, exc.message, field=f"sandbox.{where}") from None
    return settings, pass_env


def load_sweep(path: str | os.PathLike) -> SweepSpec:
    """Parse and check SWEEP.toml; every problem is an InputError naming the file and the key."""
    from microctx._io.jsonio import read_bytes

    data = read_bytes(path)
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not valid UTF-8: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(path, f"not valid TOML: {exc}") from None
    for table, value in doc.items():
        if table not in _KEYS:
            raise InputError(path, f"unknown table; expected {', '.join(_KEYS)}", field=table)
        if not isinstance(value, dict):
            raise _type_error(path, table, "a table", value)
        allowed = _KEYS[table]
        if allowed is None:
            continue
        for key in value:
            if key not in allowed:
                raise InputError(path, f"unknown key; expected one of {', '.join(sorted(allowed))}", field=f"{table}.{key}")
    for table in ("candidate", "grid", "select"):
        if table not in doc:
            raise InputError(path, "missing table", field=table)

    cand = doc["candidate"]
    given = [k for k in ("builtin", "function", "cmd") if k in cand]
    if len(given) != 1:
        raise InputError(path, "name exactly one of builtin, function, cmd", field="candidate")
    how = given[0]
    entry = cand[how]
    if not isinstance(entry, str) or not entry.strip():
        raise _type_error(path, f"candidate.{how}", "a non-empty string", entry)
    if how == "builtin" and entry not in BUILTINS:
        raise InputError(path, f"unknown built-in {entry!r}; known: {', '.join(BUILTINS)}", field="candidate.builtin")
    if how == "function" and ":" not in entry:
        raise InputError(path, "expected module:function or path/file.py:function", field="candidate.function")
    name = cand.get("name", entry if how != "cmd" else "command")
    if not isinstance(name, str) or not name.strip():
        raise _type_error(path, "candidate.name", "a non-empty string", name)
    version = cand.get("version")
    if version is not None and not isinstance(version, (str, int)):
        raise _type_error(path, "candidate.version", "a string", version)
    timeout = cand.get("timeout")
    _positive_seconds(path, "candidate.timeout", timeout)  # inf and nan are refused too
    splits = cand.get("devkit_splits", ["train"])
    if (
        not isinstance(splits, list)
        or not splits
        or any(s not in ("train", "tune") for s in splits)
        or len(set(splits)) != len(splits)
    ):
        raise _type_error(path, "candidate.devkit_splits", 'a non-empty list of "train" and "tune"', splits)
    kind = {"builtin": "builtin", "function": "function", "cmd": "command"}[how]
    if kind == "function" and entry.split(":")[0].endswith(".py"):
        file = Path(entry.rsplit(":", 1)[0])
        if not file.is_absolute():
            file = Path(path).resolve().parent / file  # relative to the sweep file
        if not file.is_file():
            raise InputError(path, f"candidate file {file} not found", field="candidate.function")
        entry = f"{file}:{entry.rsplit(':', 1)[1]}"
        version = version if version is not None else "sha256:" + file_sha256(file)
    if kind == "builtin" and version is None:
        from microctx._version import __version__

        version = __version__

    grid = doc["grid"]
    if not grid:
        raise InputError(path, "empty grid: give at least one parameter with a list of values", field="grid")
    size = 1
    for key, values in grid.items():
        if not isinstance(values, list):
            raise _type_error(path, f"grid.{key}", "a list of values", values)
        if not values:
            raise InputError(path, "empty list: a parameter needs at least one value", field=f"grid.{key}")
        if len({dumps(v) for v in values}) != len(values):
            raise InputError(path, "repeated value", field=f"grid.{key}")
        size *= len(values)
    if kind == "builtin":
        known = BUILTINS[entry].params
        for key in grid:
            if key not in known:
                raise InputError(path, f"not a parameter of {entry} (known: {', '.join(sorted(known))})", field=f"grid.{key}")

    search = doc.get("search", {})
    method = search.get("method", "grid")
    if method not in ("grid", "random"):
        raise InputError(path, f'expected "grid" or "random", got {method!r}', field="search.method")
    budget = search.get("budget")
    seed = search.get("seed", 0)
    if method == "random":
        if not isinstance(budget, int) or isinstance(budget, bool) or budget < 1:
            raise _type_error(path, "search.budget", "a positive integer (random search)", budget)
        if budget > MAX_CONFIGS:
            raise InputError(path, f"budget {budget} is past the limit of {MAX_CONFIGS} configurations", field="search.budget")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise _type_error(path, "search.seed", "an integer", seed)
    elif budget is not None:
        raise InputError(path, 'a budget needs method = "random"', field="search.budget")
    elif size > MAX_CONFIGS:
        raise InputError(
            path,
            f"the grid has {size} configurations, past the limit of {MAX_CONFIGS}; "
            'narrow it or use [search] method = "random" with a budget',
            field="grid",
        )

    select = doc["select"]
    metric = select.get("metric", "f1")
    if metric not in METRICS:
        raise InputError(path, f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}", field="select.metric")
    rule = select.get("rule", "max")
    if rule not in RULES:
        raise InputError(path, f"unknown rule {rule!r}; expected one of {', '.join(RULES)}", field="select.rule")
    floor, cost = select.get("floor"), select.get("cost")
    if rule == "least-cost-meeting-floor":
        if not isinstance(floor, (int, float)) or isinstance(floor, bool) or not 0 <= floor <= 1:
            raise _type_error(path, "select.floor", "a number from 0 to 1", floor)
        if not isinstance(cost, str) or not (cost in COSTS or (cost.startswith("param:") and cost[6:] in grid)):
            raise InputError(
                path, f"expected one of {', '.join(COSTS)} or param:NAME (a grid key), got {cost!r}", field="select.cost"
            )
    elif floor is not None or cost is not None:
        raise InputError(
            path,
            'floor and cost go with rule = "least-cost-meeting-floor"',
            field="select.floor" if floor is not None else "select.cost",
        )
    sandbox, pass_env = load_sandbox(path, doc.get("sandbox", {}))
    return SweepSpec(
        str(path),
        name,
        kind,
        entry,
        None if version is None else str(version),
        timeout,
        tuple(splits),
        grid,
        method,
        budget,
        seed,
        metric,
        rule,
        None if floor is None else float(floor),
        cost,
        sha256_hex(data),
        sandbox,
        pass_env,
    )


def configurations(spec: SweepSpec) -> list[dict]:
    """The parameter sets to run: the grid's product in file order, or a seeded sample of it."""
    keys = list(spec.grid)
    sizes = [len(spec.grid[k]) for k in keys]
    total = math.prod(sizes)
    if spec.method == "grid":
        indices: Iterable[int] = range(total)
    else:
        indices = sorted(random.Random(spec.seed).sample(range(total), min(spec.budget or total, total)))
    out = []
    for index in indices:
        params, rest = {}, index
        for key, n in zip(reversed(keys), reversed(sizes)):
            rest, i = divmod(rest, n)
            params[key] = spec.grid[key][i]
        out.append({k: params[k] for k in keys})
    return out


def config_key(spec: SweepSpec, params: dict, corpus_sha256: str, devkit_sha256: str, candidate_devkit_sha256: str) -> str:
    """The configuration's key: SHA-256 of candidate identity and version, parameters, the input digests and,
    when the sweep file has a [sandbox] table, the isolation it asks for."""
    document = {
        "candidate": spec.identity,
        "parameters": params,
        "corpus_sha256": corpus_sha256,
        "devkit_sha256": devkit_sha256,
        "candidate_devkit_sha256": candidate_devkit_sha256,
    }
    if spec.sandbox is not None or spec.pass_env:
        document["sandbox"] = spec.sandbox_identity
    return sha256_hex(dumps(document))


# ================================================================ one task: run + tune grade


@dataclass
class Task:
    key: str
    index: int
    candidate: str
    cmd: str | None
    params: dict
    timeout: float | None
    sandbox: SandboxSettings | None = None
    pass_env: tuple[str, ...] = ()


def _materialise(value, folder: Path, name: str) -> Path:
    """A path given as is; content (bytes) written into `folder`."""
    if isinstance(value, (bytes, bytearray)):
        target = folder / name
        target.write_bytes(value)
        return target
    return Path(value)


def run_task(task: Task, public, candidate_devkit, devkit, runner: Callable | None = None) -> dict:
    """Run one configuration and grade it on tune; returns its result (files as bytes).

    `public`, `candidate_devkit`, `devkit` are paths or contents. Runs on any worker; writes only
    in a temporary folder. A configuration the runner refuses (an unknown parameter, say) or a
    failed run is a `failed` result, not an exception.
    """
    from microctx.candidates.runner import manifest_path, run_candidate
    from microctx.candidates.sandbox import SandboxUnavailable

    runner = runner or run_candidate
    root = Path(tempfile.mkdtemp(prefix="microctx-sweep-"))
    started = time.monotonic()
    result: dict = {
        "schema": RESULT_SCHEMA,
        "key": task.key,
        "index": task.index,
        "parameters": task.params,
        "status": "failed",
        "error": "",
        "manifest": None,
        "grade": None,
        "metrics": None,
        "files": {},
    }
    try:
        public_path = _materialise(public, root, "public.json")
        cdevkit_path = _materialise(candidate_devkit, root, "candidate-devkit.json")
        devkit_path = _materialise(devkit, root, "devkit.json")
        submission = root / "out" / "submission.json"
        submission.parent.mkdir()
        try:
            manifest = runner(
                task.candidate,
                public_path,
                submission,
                devkit=cdevkit_path,
                params=task.params,
                timeout=task.timeout,
                cmd=task.cmd,
                sandbox=task.sandbox,
                pass_env=task.pass_env,
            )
        except SandboxUnavailable as exc:  # this machine's fault, not the configuration's: resume reruns it
            result.update(error=f"refused: {exc}", transient=True)
            return result
        except InputError as exc:
            result["error"] = f"refused: {exc}"
            return result
        result["manifest"] = manifest
        result["files"]["run.json"] = manifest_path(submission).read_bytes()
        if not manifest["ok"]:
            result["error"] = manifest["error"]
            return result
        result["files"]["submission.json"] = submission.read_bytes()
        grade_doc, facts_bytes, metrics = tune_grade(public_path, devkit_path, submission)
        result["files"]["tune-grade.json"] = dumps(grade_doc)
        result["files"]["tune-grade.facts.csv"] = facts_bytes
        result.update(status="ok", grade=grade_doc, metrics=metrics)
        return result
    finally:
        result["task_seconds"] = round(time.monotonic() - started, 3)
        shutil.rmtree(root, ignore_errors=True)


_COMPONENTS: dict[str, dict] = {}
_COMPONENTS_LOCK = threading.Lock()  # pool threads (and a Dask worker's threads) share the cache


def _components(public_path: Path) -> dict:
    """Record id -> split component (the split rule's unit) of a public corpus, cached by digest."""
    digest = file_sha256(public_path)
    with _COMPONENTS_LOCK:
        cached = _COMPONENTS.get(digest)
    if cached is not None:
        return cached
    from microctx.corpus.public import load_corpus
    from microctx.grading.slices import record_table

    table = record_table(load_corpus(public_path))
    components = dict(zip(table["id"], table["component"]))
    with _COMPONENTS_LOCK:
        _COMPONENTS.clear()  # one corpus at a time; a reader holds its own reference
        _COMPONENTS[digest] = components
    return components


def tune_grade(public_path, devkit_path, submission_path) -> tuple[dict, bytes, dict]:
    """The tune grade of a submission against a devkit: grade document, fact table, metrics."""
    from microctx.contract.facts import facts_csv
    from microctx.contract.schemas import load_answers, load_submission
    from microctx.contract.score import grade

    result = grade(load_answers(devkit_path), load_submission(submission_path), split="tune")
    return result.grade, facts_csv(result.facts), tune_metrics(result, _components(Path(public_path)))


def tune_metrics(
    result, components: dict, n_boot: int | None = None, seed: int | None = None, min_components: int | None = None
) -> dict:
    """Exact rate, precision, recall and F1 of a tune grade, with 95% intervals.

    Every interval is the cluster-bootstrap percentile interval of `microctx.grading.stats`, as
    slice tables make it (docs/statistics.md): split components resampled with their tp, fp, fn,
    records and exact records, `stats.DEFAULT_N_BOOT` replicates, seed `stats.DEFAULT_SEED`.
    With fewer than `stats.DEFAULT_MIN_COMPONENTS` components the metrics are not estimable and
    get no interval (NaN bounds). Replicates where a metric is undefined (no fact of its
    denominator drawn) are counted in `<metric>_undefined_draws`, never dropped silently.
    A record is exact when it has no fp and no fn (every tune record has a fact: its state).
    """
    import numpy as np

    from microctx.grading import stats

    n_boot = stats.DEFAULT_N_BOOT if n_boot is None else n_boot
    seed = stats.DEFAULT_SEED if seed is None else seed
    min_components = stats.DEFAULT_MIN_COMPONENTS if min_components is None else min_components
    by_record: dict[str, list[int]] = {}
    for row in result.facts:
        if row.outcome in ("tp", "fp", "fn"):
            by_record.setdefault(row.record_id, [0, 0, 0])[("tp", "fp", "fn").index(row.outcome)] += 1
    per: dict[str, list[int]] = {}  # component -> tp, fp, fn, records, exact records
    for record_id, (rtp, rfp, rfn) in by_record.items():
        counts = per.setdefault(components.get(record_id, record_id), [0, 0, 0, 0, 0])
        counts[0] += rtp
        counts[1] += rfp
        counts[2] += rfn
        counts[3] += 1
        counts[4] += not rfp and not rfn
    g = result.grade
    tp, fp, fn = (sum(c[i] for c in per.values()) for i in range(3))
    n, exact = g["test_records"], g["exact_records"]
    metrics: dict = {"tune_records": n, "exact_records": exact, "tp": tp, "fp": fp, "fn": fn, "tune_components": len(per)}
    metrics["exact_rate"] = exact / n if n else math.nan
    metrics["precision"] = float(stats.ratio(tp, tp + fp))
    metrics["recall"] = float(stats.ratio(tp, tp + fn))
    metrics["f1"] = float(stats.f1_score(tp, fp, fn))
    names = ("exact_rate", "precision", "recall", "f1")
    if len(per) >= min_components:
        totals = stats.bootstrap_totals(np.array(list(per.values()), dtype=np.int64), n_boot, seed)
        btp, bfp, bfn, brecords, bexact = (totals[:, i] for i in range(5))
        replicates = np.column_stack(
            [
                stats.ratio(bexact, brecords),
                stats.ratio(btp, btp + bfp),
                stats.ratio(btp, btp + bfn),
                stats.f1_score(btp, bfp, bfn),
            ]
        )
        low, high, undefined = stats.percentile_interval(replicates)
        for i, name in enumerate(names):
            metrics[f"{name}_ci_low"], metrics[f"{name}_ci_high"] = float(low[i]), float(high[i])
            metrics[f"{name}_undefined_draws"] = int(undefined[i])
    else:  # not estimable: no interval, said by NaN bounds
        for name in names:
            metrics[f"{name}_ci_low"] = metrics[f"{name}_ci_high"] = math.nan
            metrics[f"{name}_undefined_draws"] = None
    return {k: (round(v, 6) if isinstance(v, float) and not math.isnan(v) else v) for k, v in metrics.items()}


# ================================================================ executing many tasks


@dataclass
class Inputs:
    public: Path
    devkit: Path
    candidate_devkit: Path
    corpus_sha256: str
    devkit_sha256: str
    candidate_devkit_sha256: str


def _local(tasks: list[Task], inputs: Inputs, workers: int, runner) -> Iterator[dict]:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(run_task, t, inputs.public, inputs.candidate_devkit, inputs.devkit, runner) for t in tasks]
        try:
            for future in as_completed(futures):
                yield future.result()
        finally:
            for future in futures:
                future.cancel()


def connect(scheduler: str, timeout: float = 5.0):
    """A dask.distributed Client of the cluster at `scheduler`; InputError (quickly) if unreachable."""
    try:
        from distributed import Client
    except ImportError:  # pragma: no cover - a declared dependency
        raise InputError("--scheduler", "dask.distributed is not installed") from None
    import logging

    logger = logging.getLogger("distributed")
    level = logger.level
    logger.setLevel(logging.CRITICAL)  # while connecting: our one line says why it failed
    try:
        return Client(scheduler, timeout=timeout, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(
            scheduler, f"cannot reach the Dask scheduler within {timeout:g} s: {message}", field="--scheduler"
        ) from None
    finally:
        logger.setLevel(level)  # loggers are left as found


def _probe_sandbox() -> str:
    """'' when the sandbox starts here, else why not (run on every Dask worker by `check_sandbox`)."""
    from microctx.candidates.sandbox import SandboxUnavailable, check_available

    try:
        check_available()
    except SandboxUnavailable as exc:
        return exc.message
    return ""


def check_sandbox(client=None) -> None:
    """SandboxUnavailable unless the sandbox starts here (client None) or on every worker of a Dask client."""
    from microctx.candidates.sandbox import check_available

    if client is None:
        check_available()
        return
    answers = client.run(_probe_sandbox)
    broken = {worker: why for worker, why in sorted(answers.items()) if why}
    if broken:
        worker, why = next(iter(broken.items()))
        raise InputError("sandbox", f"on Dask worker {worker} ({len(broken)} of {len(answers)} workers): {why}")


def _dask(tasks: list[Task], inputs: Inputs, client, retries: int) -> Iterator[dict]:
    """Run tasks on a distributed Client (the caller owns it); yields results as they complete."""
    import uuid

    from distributed import as_completed

    contents = [inputs.public.read_bytes(), inputs.candidate_devkit.read_bytes(), inputs.devkit.read_bytes()]
    shipped = client.scatter(contents, broadcast=True, hash=True)  # every worker holds a copy
    run_id = uuid.uuid4().hex[:8]
    futures = {
        client.submit(
            run_task, t, *shipped, key=f"microctx-sweep-{run_id}-{t.index}-{t.key[:12]}", retries=retries, pure=False
        ): t
        for t in tasks
    }
    for future in as_completed(list(futures), loop=client.loop):
        try:
            yield future.result()
        except Exception as exc:  # lost too often (KilledWorker) or a bug on the worker: a failed row
            task = futures[future]
            yield {
                "schema": RESULT_SCHEMA,
                "key": task.key,
                "index": task.index,
                "parameters": task.params,
                "status": "failed",
                "error": f"task error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                "manifest": None,
                "grade": None,
                "metrics": None,
                "files": {},
                "transient": True,
            }


# ================================================================ the sweep


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


def _read_result(folder: Path) -> dict | None:
    from microctx._io.jsonio import read_json

    path = folder / "result.json"
    if not path.is_file():
        return None
    try:
        document = read_json(path)
    except InputError:
        return None
    return document if isinstance(document, dict) and document.get("schema") == RESULT_SCHEMA else None


def _save_result(out: Path, result: dict) -> dict:
    """Write one configuration's files and result.json (last, so a result means a complete folder)."""
    from microctx._io.atomic import AtomicOutputs

    folder = out / "runs" / result["key"]
    folder.mkdir(parents=True, exist_ok=True)
    files = result.pop("files", {}) or {}  # a `transient` failure (a task lost by the cluster) stays marked: resume reruns it
    with AtomicOutputs() as staged:
        for name, data in files.items():
            staged.write(folder / name, data)
        staged.write(folder / "result.json", dumps(result))
    return result


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


def _run_sweep(
    spec: SweepSpec, public, devkit, out: Path, *, workers, client, retries, progress, runner, started: float
) -> SweepResult:
    from tqdm.auto import tqdm

    inputs = _check_inputs(public, devkit, out, spec)
    candidate, cmd = spec.run_args()
    params_list = configurations(spec)
    tasks = [
        Task(
            config_key(spec, p, inputs.corpus_sha256, inputs.devkit_sha256, inputs.candidate_devkit_sha256),
            i,
            candidate,
            cmd,
            p,
            spec.timeout,
            spec.sandbox,
            spec.pass_env,
        )
        for i, p in enumerate(params_list)
    ]
    from microctx._io.atomic import atomic_write

    results: dict[str, dict] = {}
    for task in tasks:
        done = _read_result(out / "runs" / task.key)
        if done is not None and done.get("status") in ("ok", "failed") and not done.get("transient"):
            results[task.key] = {**done, "index": task.index}
    todo = [t for t in tasks if t.key not in results]
    if todo and spec.settings.isolation == "sandbox":  # a sandbox that cannot start is one line, exit 2, not N failed rows
        check_sandbox(client)
    if todo and client is None and spec.pass_env:  # so is a variable to pass that is not set here
        from microctx.candidates.runner import _check_pass_env

        _check_pass_env(spec.pass_env)
    atomic_write(
        out / SWEEP_MARKER,
        dumps(
            {
                "schema": "microctx-sweep/1",
                "sweep": spec.path,
                "sweep_sha256": spec.sha256,
                "candidate": spec.identity,
                "sandbox": spec.sandbox_identity,
                "corpus_sha256": inputs.corpus_sha256,
                "devkit_sha256": inputs.devkit_sha256,
                "candidate_devkit_sha256": inputs.candidate_devkit_sha256,
                "configurations": len(tasks),
            }
        ),
    )
    ran: list[str] = []
    bar = tqdm(
        total=len(tasks),
        initial=len(results),
        desc=f"sweep {spec.name}",
        unit="config",
        disable=None if progress is None else not progress,
    )
    try:
        if todo:
            stream = (
                _dask(todo, inputs, client, retries)
                if client is not None
                else _local(todo, inputs, workers or os.cpu_count() or 1, runner)
            )
            for result in stream:
                if result["key"] in results:  # written once per key, whatever the cluster did
                    continue
                results[result["key"]] = _save_result(out, result)
                ran.append(result["key"])
                bar.update(1)
    finally:
        bar.close()
    rows = [_row(results[t.key], spec) for t in tasks]
    selected = select(rows, spec)
    write_outputs(out, spec, rows, selected, inputs)
    return SweepResult(out, rows, selected, ran, time.monotonic() - started)


# ================================================================ rows, selection, outputs


def _row(result: dict, spec: SweepSpec) -> dict:
    row: dict = {"index": result["index"], "key": result["key"], "status": result["status"], "error": result.get("error", "")}
    for key in spec.grid:
        row[f"param.{key}"] = result["parameters"].get(key)
    metrics = result.get("metrics") or {}
    for name in ("tune_records", "exact_records", "tp", "fp", "fn"):
        row[name] = metrics.get(name)
    for name in ("exact_rate", "precision", "recall", "f1"):
        for suffix in ("", "_ci_low", "_ci_high"):
            row[name + suffix] = metrics.get(name + suffix)
    manifest = result.get("manifest") or {}
    for name in ("wall_seconds", "cpu_seconds", "peak_memory_bytes"):
        row[name] = manifest.get(name)
    for name in COUNTER_KEYS + MODEL_COSTS:
        row[name] = (manifest.get("counters") or {}).get(name)
    row["version"] = manifest.get("version")
    row["config_digest"] = config_digest(manifest) if manifest else None  # the grade/ledger digest of this run
    return row


def config_digest(manifest: dict) -> str:
    """A run's configuration digest, as the grade report and the ledger compute it (candidate, version, parameters)."""
    from microctx.grading.ledger import config_digest as digest

    return digest(manifest) or ""


def _cost(row: dict, measure: str) -> float:
    value = row.get(f"param.{measure[6:]}") if measure.startswith("param:") else row.get(measure)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and math.isnan(value)):
        return math.inf  # not reported: unknown, never the cheapest
    return float(value)


def select(rows: list[dict], spec: SweepSpec) -> dict | None:
    """The chosen row and why, or None (with the reason) when no configuration qualifies.

    max: the highest tune metric; ties go to the earlier configuration (file order).
    least-cost-meeting-floor: among configurations whose tune metric is at least the floor, the
    lowest cost; ties go to the higher metric, then to the earlier configuration.
    """
    ok = [
        r for r in rows if r["status"] == "ok" and isinstance(r.get(spec.metric), (int, float)) and not math.isnan(r[spec.metric])
    ]
    failed = len(rows) - len(ok)
    tail = f" ({failed} failed configuration{'s' if failed != 1 else ''} not considered)" if failed else ""
    if not ok:
        return {"row": None, "reason": f"no configuration ran and graded on tune{tail}"}
    if spec.rule == "max":
        best = max(ok, key=lambda r: (r[spec.metric], -r["index"]))
        return {
            "row": best,
            "reason": f"highest tune {spec.metric} ({best[spec.metric]:.4f}) of {len(ok)} "
            f"configurations; ties go to the earlier one{tail}",
        }
    assert spec.floor is not None and spec.cost is not None
    meeting = [r for r in ok if r[spec.metric] >= spec.floor]
    if not meeting:
        top = max(r[spec.metric] for r in ok)
        return {
            "row": None,
            "reason": f"no configuration meets the tune {spec.metric} floor {spec.floor:g} (best {top:.4f}){tail}",
        }
    best = min(meeting, key=lambda r: (_cost(r, spec.cost or ""), -r[spec.metric], r["index"]))
    return {
        "row": best,
        "reason": f"least {spec.cost} ({_cost(best, spec.cost):g}) of the {len(meeting)} of {len(ok)} "
        f"configurations whose tune {spec.metric} meets the floor {spec.floor:g} "
        f"(this one {best[spec.metric]:.4f}){tail}",
    }


def sweep_csv(rows: list[dict], selected_key: str | None) -> bytes:
    from microctx._io.csvout import csv_bytes

    columns = list(rows[0]) + ["selected"] if rows else ["selected"]
    return csv_bytes(columns, ([row.get(k) for k in columns[:-1]] + [row["key"] == selected_key] for row in rows))


def write_outputs(out: Path, spec: SweepSpec, rows: list[dict], selected: dict | None, inputs: Inputs) -> None:
    from microctx._io.atomic import AtomicOutputs

    row = selected["row"] if selected else None
    document = {
        "schema": SELECTED_SCHEMA,
        "ok": row is not None,
        "sweep": {
            "path": spec.path,
            "sha256": spec.sha256,
            "configurations": len(rows),
            "failed": sum(r["status"] != "ok" for r in rows),
        },
        "candidate": {**spec.identity, "timeout": spec.timeout},
        "sandbox": spec.sandbox_identity if spec.sandbox is not None or spec.pass_env else None,
        "parameters": None if row is None else _params(row, spec),
        "config_key": None if row is None else row["key"],
        "config_digest": None if row is None else row.get("config_digest"),
        "corpus_sha256": inputs.corpus_sha256,
        "devkit_sha256": inputs.devkit_sha256,
        "candidate_devkit": {
            "path": CANDIDATE_DEVKIT,
            "splits": list(spec.devkit_splits),
            "sha256": inputs.candidate_devkit_sha256,
        },
        "selection": {"metric": spec.metric, "rule": spec.rule, "floor": spec.floor, "cost": spec.cost},
        "tune": None
        if row is None
        else {
            k: v
            for k, v in row.items()
            if not k.startswith("param.") and k not in ("index", "key", "status", "error", "config_digest")
        },
        "reason": selected["reason"] if selected else "",
    }
    with AtomicOutputs() as staged:
        staged.write(out / "sweep.csv", sweep_csv(rows, None if row is None else row["key"]))
        staged.write(out / "selected.json", dumps(_json_safe(document)))


def _params(row: dict, spec: SweepSpec) -> dict:
    return {key: row[f"param.{key}"] for key in spec.grid}


def _json_safe(value):
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def sweep_frame(out: str | os.PathLike):
    """DIR/sweep.csv as a DataFrame (for the sweep report)."""
    import pandas as pd

    from microctx._io.jsonio import open_input

    path = Path(out) / "sweep.csv"
    if not path.is_file():
        raise InputError(path, "no sweep.csv: not a finished sweep folder")
    with open_input(path) as handle:
        try:
            from microctx._io.csvout import unescape_frame

            return unescape_frame(pd.read_csv(handle))
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            raise InputError(path, f"not a readable sweep table: {str(exc).splitlines()[0] if str(exc) else exc}") from None
