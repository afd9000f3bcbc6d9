"""Running a sweep's configurations: one task (a run through the runner plus its tune grade), and
many of them in a local thread pool or on a Dask distributed cluster (see microctx.tuning.sweep)."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from microctx.candidates.project import Project
from microctx.candidates.sandbox import SandboxSettings
from microctx.contract.canonical import dumps
from microctx.contract.schemas import RESULT_SCHEMA
from microctx.errors import InputError
from microctx.tuning.tune import tune_grade


def failed_result(task: Task, error: str, **extra) -> dict:
    """The result of a configuration that did not run to a tune grade."""
    return {
        "schema": RESULT_SCHEMA,
        "key": task.key,
        "index": task.index,
        "parameters": task.params,
        "status": "failed",
        "error": error,
        "manifest": None,
        "grade": None,
        "metrics": None,
        "files": {},
        **extra,
    }


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
    project: Project | None = None  # a project candidate's folders (its candidate.toml's), bound read-only


def _materialise(value, folder: Path, name: str) -> Path:
    """A path given as is; content (bytes) written into `folder`."""
    if isinstance(value, (bytes, bytearray)):
        target = folder / name
        target.write_bytes(value)
        return target
    return Path(value)


def _project_option(task: Task) -> dict:
    """`project=` for the runner only when there is one (a test's runner need not take it)."""
    return {"project": task.project} if task.project is not None else {}


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
    result = failed_result(task, "")
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
                **_project_option(task),
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


@dataclass
class Inputs:
    public: Path
    devkit: Path
    candidate_devkit: Path
    corpus_sha256: str
    devkit_sha256: str
    candidate_devkit_sha256: str


def run_local(tasks: list[Task], inputs: Inputs, workers: int, runner) -> Iterator[dict]:
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


def run_on_dask(tasks: list[Task], inputs: Inputs, client, retries: int) -> Iterator[dict]:
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
            error = f"task error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            yield failed_result(futures[future], error, transient=True)
