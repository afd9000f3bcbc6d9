"""The run manifest: what a run was, what it cost, whether it is good (schema microctx-run/2).

Beside the submission S the runner writes `<S without .json>.run.json` (`manifest_path`):
candidate, kind, entry, version, parameters, corpus and devkit digests, start and end (UTC RFC
3339), `isolation`, `network` (`mode`: "none", "record", or "unrestricted" for a process run;
in record mode `requests` and `denied`), `limits` (what was applied and how it was enforced),
the cost from the kernel (wall seconds; CPU seconds and peak memory of the whole process tree,
`cost_source` saying where each figure comes from), exit status, the counters the candidate
reported (self-reported: listed under `self_reported`; see microctx.candidates.registry), `ok`,
`error` and the last 4,000 characters of its output (stdout and stderr together). Every string
in it has each passed secret's value removed (microctx.candidates.run_files.redact_all).

The submission and its manifest are one set: the manifest names the submission's SHA-256, and
`read_manifest` takes a manifest whose digest does not match the file beside it as no manifest
(a run killed between its two renames leaves a mismatched pair; it is never read as one).

The manifest's home is `microctx.contract.records` (`RunManifest`, `read_manifest`,
`manifest_path`, `model_counts`): this module builds it and re-exports those names.
"""

from __future__ import annotations

__all__ = [
    "RUN_SCHEMA",
    "build_manifest",
    "manifest_path",
    "model_counts",
    "read_manifest",
    "read_manifest_document",
    "remove_stale_submission",
]

import dataclasses
import hashlib
import os
import signal
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from microctx.candidates import sandbox as sb
from microctx.candidates.registry import Candidate, run_version
from microctx.candidates.run_files import check_submission, read_counters, submission_limit
from microctx.contract.digests import file_sha256
from microctx.contract.records import RunManifest, manifest_path, model_counts, read_manifest, read_manifest_document
from microctx.contract.schemas import RUN_SCHEMA, RUN_SCHEMAS
from microctx.errors import InputError

if TYPE_CHECKING:
    from microctx._io.atomic import AtomicOutputs

_RUN_SCHEMAS = RUN_SCHEMAS  # manifests this runner can read (proof of an earlier run)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class RunInputs:
    """A run, checked before anything starts."""

    spec: Candidate
    public: Path
    submission: Path
    devkit: Path | None
    corpus_sha256: str
    devkit_sha256: str | None
    settings: sb.SandboxSettings
    passed_env: list[str] = dataclasses.field(default_factory=list)  # names only; values stay in os.environ
    secret_env: tuple[str, ...] = ()  # more names whose values never appear in what the runner writes (the gateway's key)
    project: Any = None  # a microctx.candidates.project.Project: code, data, venv folders

    def secret_values(self) -> list[str]:
        return [os.environ[name] for name in (*self.passed_env, *self.secret_env) if os.environ.get(name)]


@dataclass
class Outcome:
    """What the kernel says about the finished run."""

    exit_status: int
    timed_out: bool
    wall: float
    usage: Any  # resource.struct_rusage of the whole tree (os.wait4)
    started: str
    ended: str


def remove_stale_submission(submission: Path, candidate: str, into: AtomicOutputs) -> str:
    """After a failed run, remove the file at `submission` only when it provably is an earlier
    submission: the run manifest beside it names this candidate, a good run and the file's
    SHA-256, or the file itself is a submission document (schema absent or
    fak-microcontext-submission/1, valid as a submission). Anything else (an answer bundle, a
    public corpus, a report, a file that is not JSON) is left in place. The removal is a step of
    the run's set `into` (done when it is published, with the failed run's manifest: after a kill
    the earlier submission and its manifest are both there, or neither; refused if the file is
    replaced meanwhile). Returns what is done, for the manifest's `error`."""
    from microctx._io.atomic import file_identity

    try:
        identity = file_identity(submission)  # before the proof reads it: the file removed is the file proved
    except OSError:
        identity = None
    if identity is not None and _provably_submission(submission, candidate):
        into.remove(submission, same_as=identity)  # an earlier run's file must not pass for this run's result
        return f"; removed the earlier {submission.name} so it cannot be graded as this run's"
    return (
        f"; left the existing {submission.name} in place: it is not provably an earlier submission (it is not this run's result)"
    )


def _provably_submission(path: Path, candidate: str) -> bool:
    from microctx._io.jsonio import parse_json, read_bytes
    from microctx.contract.schemas import SUBMISSION_SCHEMA, check_submission_document

    if not path.is_file() or path.is_symlink():
        return False
    try:
        earlier = read_manifest_document(path)  # an unreadable manifest proves nothing
        if (
            earlier is not None
            and earlier.get("schema") in _RUN_SCHEMAS
            and earlier.get("candidate") == candidate
            and earlier.get("ok") is True
            and earlier.get("submission_sha256") == file_sha256(path)
        ):
            return True
    except (InputError, OSError):
        pass
    try:
        document = parse_json(read_bytes(path), path)
        if not isinstance(document, dict) or document.get("schema", SUBMISSION_SCHEMA) != SUBMISSION_SCHEMA:
            return False
        check_submission_document(document, path)
    except InputError:
        return False
    return True


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


def failure_reason(run: RunInputs, outcome: Outcome, output_tail: str, limits: sb.Limits) -> str:
    s = run.settings
    if outcome.timed_out:
        return f"timed out after {s.timeout_seconds:g} seconds; the candidate was killed"
    status = outcome.exit_status
    if limits.memory_exceeded():
        return f"exceeded the memory limit ({s.memory_bytes / 2**20:.0f} MiB, --memory); the kernel killed it"
    last = next((line for line in reversed(output_tail.splitlines()) if line.strip()), "")
    how = f"was killed by signal {-status} ({_signal_name(-status)})" if status < 0 else f"exited with status {status}"
    reason = f"the candidate {how}" + (f": {last.strip()}" if last else "")
    if status == -signal.SIGXCPU or (
        status == -signal.SIGKILL and s.cpu_seconds and outcome.usage.ru_utime + outcome.usage.ru_stime >= s.cpu_seconds
    ):
        reason += f" (CPU-time limit of {s.cpu_seconds} seconds per process)"
    elif status == -signal.SIGXFSZ:
        reason += f" (file-size limit of {s.max_file_bytes} bytes)"
    elif "MemoryError" in output_tail:
        reason += f" (memory limit {s.memory_bytes / 2**20:.0f} MiB, --memory)"
    refused = limits.processes_refused()
    if refused:
        reason += f" (the process limit of {s.max_processes} refused {refused} new processes, --max-processes)"
    return reason


def _cost(outcome: Outcome, limits: sb.Limits) -> dict:
    """The run's cost from the kernel, and where each figure comes from."""
    tree_cpu = limits.cpu_seconds()
    peak = limits.peak_memory()
    return {
        "wall_seconds": round(outcome.wall, 3),
        "cpu_seconds": round(tree_cpu if tree_cpu is not None else outcome.usage.ru_utime + outcome.usage.ru_stime, 3),
        "peak_memory_bytes": peak if peak is not None else outcome.usage.ru_maxrss * 1024,  # Linux reports KiB
        "cost_source": {
            "wall_seconds": "runner clock",
            "cpu_seconds": "cgroup (whole process tree)" if tree_cpu is not None else "os.wait4 (reaped process tree)",
            "peak_memory_bytes": "cgroup (whole process tree)"
            if peak is not None
            else "os.wait4 (largest process; Linux counts the runner's own size at the fork in it)",
        },
    }


def build_manifest(
    run: RunInputs, outcome: Outcome, workdir: Path, output_tail: str, limits: sb.Limits, network: dict, extra: dict
) -> tuple[dict, bytes | None]:
    """The run manifest (every passed secret removed from it), and the submission's bytes when
    the run succeeded. `extra` holds the runner's own findings: `cache_cleaned`, `gateway`,
    `runner_limit` (a bound of the runner's own work the candidate passed: the run fails)."""
    from microctx._version import __version__
    from microctx.candidates.run_files import redact_all

    secrets = run.secret_values()
    counters, version, counters_problem = read_counters(workdir, secrets)
    data = None
    if extra.get("runner_limit"):  # (the runner may have stopped the run for it: that is the reason)
        error = extra["runner_limit"]
    elif outcome.timed_out or outcome.exit_status != 0:
        error = failure_reason(run, outcome, output_tail, limits)
    else:
        data, error = check_submission(
            workdir, run.corpus_sha256, submission_limit(run.settings.memory_bytes, run.settings.max_file_bytes)
        )
    spec = run.spec
    manifest = {
        "schema": RUN_SCHEMA,
        "candidate": spec.name,
        "kind": spec.kind,
        "entry": spec.entry,
        "version": run_version(spec.version, version),
        "parameters": spec.params,
        "corpus_sha256": run.corpus_sha256,
        "devkit_sha256": run.devkit_sha256,
        "submission": str(run.submission),
        "submission_sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
        "started_at": outcome.started,
        "ended_at": outcome.ended,
        "isolation": run.settings.isolation,
        "network": network,
        "limits": limits.describe(),
        **_cost(outcome, limits),
        "exit_status": outcome.exit_status,
        "timed_out": outcome.timed_out,
        "timeout_seconds": run.settings.timeout_seconds,
        "processes_refused": limits.processes_refused(),
        "memory_exceeded": limits.memory_exceeded(),
        "counters": counters,
        "counters_problem": counters_problem,
        "self_reported": ["counters", "version"],
        "passed_env": run.passed_env,
        "cache_dir": str(Path(run.settings.cache_dir).resolve()) if run.settings.cache_dir is not None else None,
        "runner": {"microctx": __version__, "python": sys.version.split()[0]},
        "ok": not error,
        "error": error,
        "output_tail": output_tail,
    }
    base_url = spec.params.get("base_url") if isinstance(spec.params, dict) else None
    if network.get("mode") == "record" and isinstance(base_url, str):
        manifest["model_usage_check"] = _model_usage_check(network["requests"], counters, base_url)
    manifest.update({k: v for k, v in extra.items() if k != "runner_limit"})
    manifest = RunManifest(**manifest).as_dict()  # the record: a field it does not declare is a TypeError here
    return redact_all(manifest, secrets), data


def _model_usage_check(requests: list[dict], counters: dict, base_url: str) -> dict:
    """The runner's own count of chat completion calls and tokens (read by its proxy) beside the
    candidate's counters; `agree` false and `differences` listed when they differ."""
    from urllib.parse import urlsplit

    from microctx.candidates.usage import reconcile

    if urlsplit(base_url).scheme == "https":
        tunnels = sum(r.get("method") == "CONNECT" for r in requests)
        return {
            "agree": None,
            "opaque": True,
            "tunnels": tunnels,
            "note": "HTTPS goes through CONNECT tunnels: the runner sees connections, not calls or tokens",
        }
    seen = [{**r, "host": f"{r['host']}:{r['port']}"} for r in requests]
    try:
        return reconcile(seen, counters, base_url)
    except ValueError as exc:  # a base_url the runner cannot read
        return {"agree": None, "differences": [], "error": f"cannot reconcile: {exc}"}


def network_record(run: RunInputs, proxy) -> dict:
    if proxy is not None:
        return {**proxy.record(), "mode": run.settings.network}  # (a gateway alone runs the proxy in mode "none")
    mode = "unrestricted" if run.settings.isolation == "process" else "none"
    return {"mode": mode, "allow_hosts": [], "requests": [], "denied": [], "dropped": 0}
