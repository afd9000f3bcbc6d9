"""SWEEP.toml as declared types: the file's tables are msgspec Structs, checked by one conversion,
then the rules that tie keys together (one of builtin/function/cmd, a floor with its rule, a
budget with random search, the grid's size). Every problem is one InputError naming the file,
the key (`select.floor`, `grid.alpha`, `sandbox.memory`) and what was expected; see
`microctx.tuning.sweep` for what the file means.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from microctx.candidates.project import CandidateFile, Project
from microctx.candidates.registry import BUILTINS
from microctx.candidates.sandbox import SandboxSettings
from microctx.contract import declared
from microctx.contract.canonical import dumps
from microctx.contract.costs import SWEEP_COSTS
from microctx.contract.digests import file_sha256, sha256_hex
from microctx.errors import InputError

MAX_CONFIGS = 4096  # a grid past this is refused (use [search] method = "random" with a budget)
METRICS = ("f1", "precision", "recall", "exact_rate")
RULES = ("max", "least-cost-meeting-floor")
SANDBOX_KEYS: tuple[str, ...] = ("isolation", "network", "allow_hosts", "memory", "max_processes", "cpu_seconds", "cache_dir")
SANDBOX_KEYS += ("pass_env", "model_endpoint", "model_key_env", "max_model_calls", "max_tokens", "max_dollars", "model_price")
SANDBOX_KEYS += ("model_cache",)
GATEWAY_TABLE_KEYS = SANDBOX_KEYS[8:]  # the model gateway's keys (microctx.candidates.settings.gateway_from_table)
Metric = Literal["f1", "precision", "recall", "exact_rate"]
Rule = Literal["max", "least-cost-meeting-floor"]
_Text = Annotated[str, msgspec.Meta(min_length=1, pattern=r"\S")]
_Positive = Annotated[int, msgspec.Meta(gt=0)]
_CLOSED: dict[str, Any] = {"forbid_unknown_fields": True}


class CandidateTable(msgspec.Struct, **_CLOSED):
    name: _Text | None = None
    builtin: _Text | None = None
    function: _Text | None = None
    cmd: _Text | None = None
    project: _Text | None = None  # a candidate.toml (relative to the sweep file): a candidate that is a project
    version: str | int | None = None
    timeout: float | None = None
    devkit_splits: Annotated[list[Literal["train", "tune"]], msgspec.Meta(min_length=1)] = msgspec.field(
        default_factory=lambda: ["train"]
    )


class SearchTable(msgspec.Struct, **_CLOSED):
    method: Literal["grid", "random"] = "grid"
    budget: _Positive | None = None
    seed: int = 0


class SelectTable(msgspec.Struct, **_CLOSED):
    metric: Metric = "f1"
    rule: Rule = "max"
    floor: Annotated[float, msgspec.Meta(ge=0, le=1)] | None = None
    cost: str | None = None


class SandboxTable(msgspec.Struct, **_CLOSED):
    isolation: _Text | None = None
    network: _Text | None = None
    allow_hosts: list[_Text] = msgspec.field(default_factory=list)
    memory: str | int | None = None
    max_processes: _Positive | None = None
    cpu_seconds: _Positive | None = None
    cache_dir: _Text | None = None
    pass_env: list[_Text] = msgspec.field(default_factory=list)
    model_endpoint: str | None = None  # the model gateway (as `microctx run --model-endpoint` ...)
    model_key_env: str | None = None
    max_model_calls: int | None = None
    max_tokens: int | None = None
    max_dollars: float | None = None
    model_price: str | None = None  # "IN:OUT[:CACHED]" dollars per million tokens
    model_cache: str | None = None


class SweepFile(msgspec.Struct, **_CLOSED):
    candidate: CandidateTable
    grid: dict[str, Any]  # each value a list: checked by `_check_grid`, which names the key
    select: SelectTable
    search: SearchTable = msgspec.field(default_factory=SearchTable)
    sandbox: SandboxTable | None = None


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
    project: Project | None = None  # kind "project": its folders (from `project_file`)
    project_file: str | None = None  # the candidate.toml, absolute
    project_digest: str | None = None  # microctx.candidates.project.project_digest of it

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
        """(candidate, cmd) as `run_candidate` takes them (a project's command is its cmd)."""
        return (self.name, self.entry) if self.kind in ("command", "project") else (self.entry, None)

    @property
    def project_record(self) -> dict | None:
        """What selected.json says of a project candidate (microctx.contract.records.SelectedProject)."""
        if self.project is None or self.project_file is None or self.project_digest is None:
            return None
        return {"file": self.project_file, "digest": self.project_digest, **self.project.as_dict()}


def _type_error(path, key: str, expected: str, value: object) -> InputError:
    from microctx.errors import json_type_name

    return InputError(path, f"expected {expected}, got {json_type_name(value)} {value!r}", field=key)


def _beside(sweep_path, text: str) -> str:
    """A folder named in the sweep file (cache_dir, model_cache, the candidate's project file): absolute as
    given, else relative to the sweep file's folder, never the current directory."""
    return text if Path(text).is_absolute() else str(Path(sweep_path).resolve().parent / text)


def load_sandbox(path, table: SandboxTable | dict | None) -> tuple[SandboxSettings | None, tuple[str, ...]]:
    """SWEEP.toml's [sandbox] table -> (SandboxSettings, pass_env); an InputError names the key."""
    from microctx.candidates.settings import parse_size

    if isinstance(table, dict):
        table = declared.convert(table, SandboxTable, path, "the sweep file") if table else None
    if table is None:
        return None, ()
    options: dict = {key: getattr(table, key) for key in ("isolation", "network", "cache_dir", "max_processes", "cpu_seconds")}
    options = {key: value for key, value in options.items() if value is not None}
    if "cache_dir" in options:
        options["cache_dir"] = _beside(path, options["cache_dir"])
    options["allow_hosts"] = tuple(table.allow_hosts)
    pass_env = tuple(table.pass_env)
    if any(not name.replace("_", "").isalnum() for name in pass_env):
        raise InputError(path, "expected names of environment variables (never their values)", field="sandbox.pass_env")
    if table.memory is not None:
        try:
            options["memory_bytes"] = parse_size(table.memory)
        except InputError as exc:
            raise InputError(path, exc.message, field="sandbox.memory") from None
    try:
        from microctx.candidates.settings import gateway_from_table

        gateway = {key: getattr(table, key) for key in GATEWAY_TABLE_KEYS if getattr(table, key) is not None}
        if isinstance(gateway.get("model_cache"), str):
            gateway["model_cache"] = _beside(path, gateway["model_cache"])
        options["gateway"] = gateway_from_table(gateway)
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


def _candidate(path, cand: CandidateTable) -> tuple[str, str, str, str | None]:
    """(name, kind, entry, version) of the [candidate] table."""
    given = [k for k in ("builtin", "function", "cmd", "project") if getattr(cand, k) is not None]
    if len(given) != 1:
        raise InputError(path, "name exactly one of builtin, function, cmd, project", field="candidate")
    how = given[0]
    entry: str = getattr(cand, how)
    if how == "builtin" and entry not in BUILTINS:
        raise InputError(path, f"unknown built-in {entry!r}; known: {', '.join(BUILTINS)}", field="candidate.builtin")
    if how == "function" and ":" not in entry:
        raise InputError(path, "expected module:function or path/file.py:function", field="candidate.function")
    if cand.timeout is not None and (not math.isfinite(cand.timeout) or cand.timeout <= 0):
        raise _type_error(path, "candidate.timeout", "a positive, finite number of seconds", cand.timeout)
    if len(set(cand.devkit_splits)) != len(cand.devkit_splits):
        raise _type_error(path, "candidate.devkit_splits", 'a non-empty list of "train" and "tune"', cand.devkit_splits)
    name = cand.name or (entry if how != "cmd" else "command")
    kind = {"builtin": "builtin", "function": "function", "cmd": "command", "project": "project"}[how]
    version = None if cand.version is None else str(cand.version)
    if kind == "function" and entry.split(":")[0].endswith(".py"):
        file = Path(entry.rsplit(":", 1)[0])
        if not file.is_absolute():
            file = Path(path).resolve().parent / file  # relative to the sweep file
        if not file.is_file():
            raise InputError(path, f"candidate file {file} not found", field="candidate.function")
        entry = f"{file}:{entry.rsplit(':', 1)[1]}"
        version = version if version is not None else "sha256:" + file_sha256(file)
    if kind == "builtin" and version is None:
        from microctx.candidates.registry import builtin_version

        version = builtin_version(entry)  # microctx's version and a hash of the built-in's code
    return name, kind, entry, version


def _check_grid(path, grid: dict, kind: str, entry: str) -> int:
    """The grid's size; an empty grid, an empty or repeated value list, a value JSON cannot hold
    (an integer past 64 bits) or a built-in's unknown parameter is refused."""
    if not grid:
        raise InputError(path, "empty grid: give at least one parameter with a list of values", field="grid")
    size = 1
    for key, values in grid.items():
        if not isinstance(values, list):
            raise _type_error(path, f"grid.{key}", "a list of values", values)
        if not values:
            raise InputError(path, "empty list: a parameter needs at least one value", field=f"grid.{key}")
        try:
            encoded = {dumps(v) for v in values}
        except (TypeError, ValueError) as exc:  # orjson: integers past 64 bits, values nested too deeply
            raise InputError(path, f"expected values JSON can hold: {exc}", field=f"grid.{key}") from None
        odd = next((v for v in values if _not_finite(v)), None)
        if odd is not None:  # TOML's nan and inf: JSON would write null, so the key and selected.json would not say them
            raise InputError(path, f"expected values JSON can hold, got {odd!r} (not a finite number)", field=f"grid.{key}")
        if len(encoded) != len(values):
            raise InputError(path, "repeated value", field=f"grid.{key}")
        size *= len(values)
    if kind == "builtin":
        builtin = BUILTINS[entry]
        known = builtin.params
        for key, values in grid.items():
            if key not in known:
                raise InputError(path, f"not a parameter of {entry} (known: {', '.join(sorted(known))})", field=f"grid.{key}")
            for value in values:
                try:
                    builtin.check_params(entry, {key: value})
                except InputError as exc:  # the declared type (microctx.candidates.builtins.params)
                    raise InputError(path, exc.message, field=f"grid.{key}") from None
    return size


def _not_finite(value: object) -> bool:
    """A float that is nan or infinite, anywhere in a grid value (lists and tables included)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_not_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_not_finite(v) for v in value)
    return False


def _check_search(path, search: SearchTable, size: int) -> None:
    if search.method == "random":
        if search.budget is None:
            raise _type_error(path, "search.budget", "a positive integer (random search)", None)
        if search.budget > MAX_CONFIGS:
            raise InputError(
                path, f"budget {search.budget} is past the limit of {MAX_CONFIGS} configurations", field="search.budget"
            )
    elif search.budget is not None:
        raise InputError(path, 'a budget needs method = "random"', field="search.budget")
    elif size > MAX_CONFIGS:
        raise InputError(
            path,
            f"the grid has {size} configurations, past the limit of {MAX_CONFIGS}; "
            'narrow it or use [search] method = "random" with a budget',
            field="grid",
        )


def _check_select(path, select: SelectTable, grid: dict) -> None:
    floor, cost = select.floor, select.cost
    if select.rule == "least-cost-meeting-floor":
        if floor is None:
            raise _type_error(path, "select.floor", "a number from 0 to 1", floor)
        if cost is None or not (cost in SWEEP_COSTS or (cost.startswith("param:") and cost[6:] in grid)):
            raise InputError(
                path, f"expected one of {', '.join(SWEEP_COSTS)} or param:NAME (a grid key), got {cost!r}", field="select.cost"
            )
    elif floor is not None or cost is not None:
        raise InputError(
            path,
            'floor and cost go with rule = "least-cost-meeting-floor"',
            field="select.floor" if floor is not None else "select.cost",
        )


def load_sweep(path: str | os.PathLike) -> SweepSpec:
    """Parse and check SWEEP.toml; every problem is an InputError naming the file and the key."""
    sweep: SweepFile
    sweep, data = declared.load_declared(path, SweepFile, "the sweep file")
    name, kind, entry, version = _candidate(path, sweep.candidate)
    size = _check_grid(path, sweep.grid, kind, entry)
    _check_search(path, sweep.search, size)
    _check_select(path, sweep.select, sweep.grid)
    sandbox, pass_env = load_sandbox(path, sweep.sandbox)
    timeout, found, file, digest = sweep.candidate.timeout, None, None, None
    if sweep.candidate.project is not None:
        found, file, digest = _load_project(path, sweep.candidate.project)
        name, entry = sweep.candidate.name or found.name, found.command
        version = version if version is not None else f"sha256:{digest}"
        timeout = timeout if timeout is not None else found.timeout
        sandbox, pass_env = _with_project(path, sweep.sandbox, sandbox, pass_env, found)
    return SweepSpec(
        str(path),
        name,
        kind,
        entry,
        version,
        timeout,
        tuple(sweep.candidate.devkit_splits),
        sweep.grid,
        sweep.search.method,
        sweep.search.budget,
        sweep.search.seed,
        sweep.select.metric,
        sweep.select.rule,
        sweep.select.floor,
        sweep.select.cost,
        sha256_hex(data),
        sandbox,
        pass_env,
        found.project if found is not None else None,
        str(file) if file is not None else None,
        digest,
    )


def _load_project(path, text: str) -> tuple[CandidateFile, Path, str]:
    """[candidate] project: the candidate.toml (relative to the sweep file) read and checked
    (folders exist, no answers in them), its absolute path and its digest."""
    from microctx.candidates.project import load_candidate_file, project_digest

    file = Path(_beside(path, text)).resolve()
    if not file.is_file():
        raise InputError(path, f"candidate file {file} not found", field="candidate.project")
    found = load_candidate_file(file)  # its own problems name it and its key
    return found, file, project_digest(file, found.project)


_PROJECT_KEYS = {"network": "network", "allow_hosts": "allow_hosts", "memory_bytes": "memory"}
_PROJECT_KEYS |= {"max_processes": "max_processes", "cpu_seconds": "cpu_seconds"}


def _with_project(
    path, table: SandboxTable | None, settings: SandboxSettings | None, pass_env: tuple[str, ...], found: CandidateFile
) -> tuple[SandboxSettings | None, tuple[str, ...]]:
    """The sweep's settings with the candidate file's limits and network where [sandbox] leaves them
    unset (the sweep file wins; a network it sets takes its allowed hosts too), and both files'
    variables to pass."""
    import dataclasses

    def unset(key: str) -> bool:
        if table is None:
            return True
        if key == "allow_hosts":
            return not table.allow_hosts and table.network is None
        return getattr(table, _PROJECT_KEYS[key]) is None

    chosen = {key: value for key, value in found.settings.items() if unset(key)}
    if chosen:
        try:
            settings = dataclasses.replace(settings or SandboxSettings(), **chosen)
        except InputError as exc:
            raise InputError(path, exc.message, field="candidate.project") from None
    return settings, tuple(dict.fromkeys([*pass_env, *found.pass_env]))


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
    """The configuration's key: SHA-256 of candidate identity and version (a built-in's carries a
    hash of its code), parameters, the input digests and, when the sweep file has a [sandbox]
    table, the isolation it asks for."""
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
