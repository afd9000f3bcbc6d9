"""Running a candidate in isolation and recording what the run cost (the run manifest).

`run_candidate` gives the candidate only the public corpus (and, if asked, a devkit: train/tune
answers only) and never the answer bundle. By default the candidate runs in the sandbox of
`microctx.candidates.sandbox` (bubblewrap: its own user, pid, ipc, uts and network namespaces;
the system read-only; only its run folder writable; no home, caches, data folders, checkout or
host `/proc`; memory, process, CPU-time, file-size and wall-time limits; every process of the
run gone when it ends). With `SandboxSettings(network="record", allow_hosts=...)` it reaches
only the allowed hosts through the runner's proxy (`microctx.candidates.network`), and every
request is logged in the manifest. Where the sandbox cannot start, `SandboxUnavailable` (an
InputError) says why; only an explicit `isolation="process"` runs without it.

Either way:
- the candidate works in a fresh folder into which the public corpus is copied as `public.json`
  (and the devkit as `devkit.json`), so no argument names a file in the caller's folders;
- its environment is built from scratch: PATH (the interpreter's folder first), LANG/LC_*/TZ,
  HOME and TMPDIR private to the run, PYTHONPATH only when a `module:function` candidate needs
  its own folder; any value mentioning the data folder (MICROCTX_DATA_DIR) or an answer bundle
  is dropped, and so is every other variable of the caller (GITHUB_TOKEN among them);
- a devkit that holds any `test` answer, or is bound to another corpus, is refused;
- what the candidate leaves (`submission.json`, `counters.json`) is read without following a
  symbolic link, only when it is a regular file, and only up to a size limit: a FIFO, a link out
  of the folder or a huge file never blocks the runner nor reaches outside.
`isolation="process"` is process isolation only: the child runs as the same user and could read
any file it can name and reach the network; nothing hands it the answers' whereabouts.

The run manifest written beside the submission is microctx.candidates.run_record's.
A crash, a timeout, a limit hit, a missing or invalid submission (not JSON, wrong shape, another
corpus's digest) is a failed run: the manifest says why, the submission is not written, and an
earlier file at S is removed so that it cannot be graded as this run's result, but only when it
provably is an earlier submission (`remove_stale_submission`), in the set that publishes the
manifest (after a kill: the earlier submission and its manifest, or the failed run's manifest
alone); anything else is left and the manifest says so.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from microctx.candidates import sandbox as sb
from microctx.candidates.launch import launch as _launch
from microctx.candidates.limits import RUN_PREFIX, owner_is_gone, remove_stale_cgroups, run_name
from microctx.candidates.registry import Candidate, resolve
from microctx.candidates.run_files import output_tail
from microctx.candidates.run_record import (  # noqa: F401  (manifest_path, read_manifest, model_counts: this module's API too)
    RUN_SCHEMA,
    Outcome,
    RunInputs,
    build_manifest,
    manifest_path,
    model_counts,
    network_record,
    read_manifest,
    read_manifest_document,
    remove_stale_submission,
    utc_now,
)
from microctx.contract.digests import file_sha256
from microctx.errors import InputError, environment_secret_in

if TYPE_CHECKING:
    from microctx._io.atomic import AtomicOutputs

_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT")


def _check_public(path: Path) -> str:
    """The public corpus's digest; refuse what is plainly not a public corpus (checked by its head)."""
    from microctx._io.jsonio import open_input

    if path.is_dir():
        raise InputError(path, "expected a public corpus file, got a folder")
    try:
        with open_input(path) as handle:  # a regular file: a FIFO or a device is refused, never waited on
            head = handle.read(4096)
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    if b"fak-microcontext-answers/1" in head:
        raise InputError(path, "this is an answer bundle, not a public corpus; candidates never get answers")
    if b"fak-microcontext-corpus/1" not in head:
        raise InputError(path, "not a public corpus (schema fak-microcontext-corpus/1 not found at the start)", field="schema")
    return file_sha256(path)


def _check_devkit(path: Path, corpus_sha256: str) -> str:
    """Refuse a devkit that holds test answers or is bound to another corpus; return its digest."""
    from microctx.contract.schemas import load_answers

    devkit = load_answers(path)
    if devkit["corpus_sha256"] != corpus_sha256:
        raise InputError(
            path,
            f"devkit is bound to corpus {devkit['corpus_sha256']}, the public corpus is {corpus_sha256}",
            field="corpus_sha256",
        )
    for answer in devkit["answers"]:
        if answer["split"] == "test":
            raise InputError(
                path, "a devkit must not hold test answers (make one with `microctx devkit`)", record=answer["id"], field="split"
            )
    return file_sha256(path)


def _mentions_private(value: str, private: list[str]) -> bool:
    lowered = value.lower()
    return "answers" in lowered or any(p and p in value for p in private)


def clean_environment(home: Path, pythonpath: str | None = None, pass_env: Sequence[str] = ()) -> dict:
    """The child's environment: a few harmless variables, nothing pointing at data or answers,
    plus the variables named in `pass_env` (explicitly passed secrets such as an API key)."""
    private = [os.environ.get("MICROCTX_DATA_DIR", "")]
    private += [os.path.realpath(p) for p in private if p]
    env = {key: os.environ[key] for key in _KEPT_ENV if key in os.environ and key != "PATH"}
    env = {k: v for k, v in env.items() if not _mentions_private(v, private)}
    path_dirs = [d for d in os.environ.get("PATH", os.defpath).split(os.pathsep) if d and not _mentions_private(d, private)]
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable)] + path_dirs)  # PATH loses only such entries
    env.setdefault("LANG", "C.UTF-8")
    env.update(HOME=str(home), TMPDIR=str(home), PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", PYTHONNOUSERSITE="1")
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    env.update({name: os.environ[name] for name in pass_env})
    return env


def _check_pass_env(names: Sequence[str]) -> list[str]:
    """The variable names to pass (each set in the caller's environment, none a name of ours)."""
    checked = []
    for name in names:
        if not name or not name.replace("_", "").isalnum() or name[0].isdigit():
            raise InputError("--pass-env", f"expected an environment variable name, got {name!r}")
        if name in _KEPT_ENV or name in ("HOME", "TMPDIR", "PYTHONPATH", "MICROCTX_DATA_DIR"):
            raise InputError("--pass-env", f"{name} is set by the runner and cannot be passed")
        if not os.environ.get(name):
            raise InputError("--pass-env", f"environment variable {name} is not set")
        checked.append(name)
    return sorted(set(checked))


def _command(candidate: Candidate, has_devkit: bool, named_files: list[Path] | None = None, project=None) -> list[str]:
    """The child's argv; paths are relative to its working directory.

    For a command, every word naming an existing file is made absolute and added to
    `named_files` (the sandbox makes those files visible, read-only)."""
    import orjson

    params = orjson.dumps(candidate.params).decode()
    if candidate.kind != "command":
        argv = [
            sys.executable,
            "-m",
            "microctx.candidates.child",
            candidate.entry,
            "--public",
            "public.json",
            "--output",
            "submission.json",
            "--params",
            params,
        ]
        if has_devkit:
            argv += ["--devkit", "devkit.json"]
        if candidate.import_root:
            argv += ["--import-root", candidate.import_root]
        return argv
    values = {
        "{public}": "public.json",
        "{submission}": "submission.json",
        "{params}": params,
        "{python}": (project.python() if project is not None else None) or sys.executable,
        "{devkit}": "devkit.json" if has_devkit else None,
    }
    argv = []
    for word in shlex.split(candidate.entry):
        for placeholder, value in values.items():
            if placeholder in word:
                if value is None:
                    raise InputError("--cmd", f"the template uses {placeholder} but no --devkit was given")
                word = word.replace(placeholder, value)
        base = str(project.code[0]) if project is not None and project.code else ""
        if word not in values.values() and not word.startswith("-") and os.path.isfile(os.path.join(base, word)):
            word = os.path.abspath(os.path.join(base, word))  # the command runs elsewhere
            if _looks_like_answers(Path(word)):
                raise InputError(word, "refusing to pass an answer bundle to a candidate")
            if named_files is not None:
                named_files.append(Path(word))
        argv.append(word)
    return argv


def _looks_like_answers(path: Path) -> bool:
    """The file `path` reaches holds answers: a link is judged by its target, which the sandbox
    binds (the guard opens no link, so a link to the answer bundle used to pass)."""
    from microctx.candidates.answer_guard import find_answers

    return bool(find_answers([Path(os.path.realpath(path))]))


# --- the steps of a run ----------------------------------------------------------------------


def _prepare(
    candidate: str,
    public,
    submission,
    devkit,
    params: dict | None,
    cmd: str | None,
    settings: sb.SandboxSettings,
    pass_env: Sequence[str] = (),
) -> RunInputs:
    """Resolve the candidate and check every input; InputError before anything runs."""
    secret = environment_secret_in(params or {})
    if secret is not None:  # parameters go to the run manifest and a sweep's files: a key never does
        raise InputError("--param", f"a parameter holds the value of ${secret}: give the variable's name, never the key")
    spec = resolve(candidate, params, cmd)
    public, submission = Path(public), Path(submission)
    if not submission.parent.is_dir():
        raise InputError(submission, "output folder does not exist")
    corpus_sha256 = _check_public(public)
    devkit_path = Path(devkit) if devkit is not None else None
    devkit_sha256 = _check_devkit(devkit_path, corpus_sha256) if devkit_path is not None else None
    if spec.needs_devkit and devkit_path is None:
        raise InputError(candidate, "this candidate tunes on the devkit: pass --devkit (make one with `microctx devkit`)")
    passed = _check_pass_env(pass_env)
    return RunInputs(
        spec, public, submission, devkit_path, corpus_sha256, devkit_sha256, settings, passed, _gateway_key(settings, passed)
    )


def _gateway_key(settings: sb.SandboxSettings, passed: list[str]) -> tuple[str, ...]:
    """The gateway's key variable (held by the runner only, redacted everywhere), checked."""
    gateway = settings.gateway
    if gateway is None or gateway.key_env is None:
        return ()
    if gateway.key_env in passed:
        raise InputError(
            "--pass-env", f"{gateway.key_env} is the model gateway's key: the gateway adds it, the candidate never gets it"
        )
    if not os.environ.get(gateway.key_env):
        raise InputError("--model-key-env", f"environment variable {gateway.key_env} is not set")
    return (gateway.key_env,)


def _start_proxy(settings: sb.SandboxSettings, proxy_dir: Path):
    """The recording proxy of the run, with the model gateway on it when there is one."""
    from microctx.candidates.network import RecordingProxy

    gateway = None
    plain_only: tuple[tuple[str, int], ...] = ()
    if settings.gateway is not None:
        from microctx.candidates.gateway import Gateway

        key_env = settings.gateway.key_env
        gateway = Gateway(settings.gateway, os.environ.get(key_env) if key_env else None)
        plain_only = (gateway.endpoint_address(),)  # no direct connection to the model host: every call is counted
    proxy = RecordingProxy(
        proxy_dir / "proxy.sock", settings.allow_hosts, memory_bytes=settings.memory_bytes, plain_only=plain_only
    )
    proxy.gateway = gateway
    return proxy.start()


def _module_bind(spec: Candidate) -> tuple[Candidate, list[tuple[Path, str]]]:
    """For the sandbox: the candidate as seen inside it, and its own code to bind read-only."""
    import importlib.machinery

    if spec.kind != "function":
        return spec, []
    target, function = spec.entry.rsplit(":", 1)
    if target.endswith(".py"):
        inside = f"{sb.IMPORT_DIR}/{Path(target).name}"
        return dataclasses.replace(spec, entry=f"{inside}:{function}"), [(Path(target), inside)]
    if not spec.import_root:
        return spec, []  # importable from the installation, which the sandbox sees
    top = target.split(".")[0]
    found = importlib.machinery.PathFinder.find_spec(top, [spec.import_root])
    if found is None:
        raise InputError(target, "module not found (not installed, not in the current directory)")
    if found.submodule_search_locations:
        host = Path(list(found.submodule_search_locations)[0])
    elif found.origin:
        host = Path(found.origin)
    else:
        raise InputError(target, "cannot tell which file holds this module")
    return dataclasses.replace(spec, import_root=sb.IMPORT_DIR), [(host, f"{sb.IMPORT_DIR}/{host.name}")]


def _launch_plan(run: RunInputs, root: Path, proxy_dir: Path | None, cache_dir: Path | None) -> tuple[list[str], dict]:
    """The argv and environment that start the candidate (inside bwrap unless a process run)."""
    has_devkit = run.devkit is not None
    if run.settings.isolation == "process":
        home = root / "home"
        home.mkdir()
        env = clean_environment(home, run.spec.import_root if run.spec.kind == "function" else None, run.passed_env)
        _project_path(env, run.project)
        if cache_dir is not None:
            env[sb.CACHE_ENV] = str(cache_dir)
        return _command(run.spec, has_devkit, project=run.project), env
    bwrap = sb.check_available()
    spec, binds = _module_bind(run.spec)
    named: list[Path] = []
    argv = _command(spec, has_devkit, named, run.project)
    folders = run.project.folders() if run.project is not None else []
    binds += [(path, str(path)) for path in folders]
    binds += [(path, str(path)) for path in named if not any(path == f or f in path.parents for f in folders)]
    env = clean_environment(Path(sb.HOME_DIR), spec.import_root if spec.kind == "function" else None, run.passed_env)
    env["TMPDIR"] = "/tmp"
    _project_path(env, run.project)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (sb.PACKAGE_DIR, env.get("PYTHONPATH")) if p)
    if cache_dir is not None:
        env[sb.CACHE_ENV] = sb.CACHE_DIR
    if proxy_dir is not None:
        from microctx.candidates.forwarder import DEFAULT_PORT, forwarder_argv

        url = f"http://127.0.0.1:{DEFAULT_PORT}"
        env.update(HTTP_PROXY=url, HTTPS_PROXY=url, http_proxy=url, https_proxy=url, ALL_PROXY=url, NO_PROXY="", no_proxy="")
        argv = forwarder_argv(sys.executable, f"{sb.PROXY_DIR}/proxy.sock", DEFAULT_PORT, argv)
    if run.settings.gateway is not None:
        from microctx.candidates.gateway import GATEWAY_ENV, GATEWAY_URL, PLACEHOLDER_KEY

        env.update({GATEWAY_ENV: GATEWAY_URL, "OPENAI_BASE_URL": GATEWAY_URL, "OPENAI_API_KEY": PLACEHOLDER_KEY})
    stage = root / "stage" if (root / "stage").is_dir() else None
    return sb.bwrap_argv(bwrap, root / "work", argv, extra=binds, proxy_dir=proxy_dir, cache_dir=cache_dir, stage=stage), env


def _project_path(env: dict, project) -> None:
    """The project's venv first on PATH (its scripts and its python)."""
    if project is not None and project.venv is not None:
        env["PATH"] = os.pathsep.join([str(project.venv / "bin"), env["PATH"]])


def run_candidate(
    candidate: str,
    public,
    submission,
    *,
    devkit=None,
    params: dict | None = None,
    timeout: float | None = None,
    cmd: str | None = None,
    sandbox: sb.SandboxSettings | None = None,
    pass_env: Sequence[str] = (),
    note: dict | None = None,
    project=None,
    into: AtomicOutputs | None = None,
) -> dict:
    """Run a candidate on a public corpus in isolation; write the submission (on success) and its manifest.

    `candidate` is a built-in name, `module:function`, `file.py:function`, or with `cmd` a label.
    `sandbox` holds the isolation, network and limits (default: `SandboxSettings()`, the sandbox
    with no network); `timeout`, when given, replaces its wall timeout. `pass_env` names caller
    environment variables handed to the candidate (an API key): the manifest lists the names
    (`passed_env`), and their values are redacted from its output tail.
    `into`: the submission and manifest are staged in the caller's larger set (published with it,
    `evaluate`'s grade and evaluation.json; read back with `into.staged_path`) instead of published here.
    Returns the manifest dict (`ok`, `error` among its keys). Unusable input (no such corpus,
    unknown candidate, a devkit with test answers) and a sandbox that cannot start here raise
    InputError before anything runs.
    """
    settings = sandbox or sb.SandboxSettings()
    if timeout is not None:
        if timeout <= 0:
            raise InputError("--timeout", f"expected a positive number of seconds, got {timeout}")
        settings = dataclasses.replace(settings, timeout_seconds=timeout)
    run = _prepare(candidate, public, submission, devkit, params, cmd, settings, pass_env)
    if project is not None:
        run = dataclasses.replace(run, project=project)
        note = {**(note or {}), "project": project.as_dict()}
    remove_stale_runs()
    root = Path(tempfile.mkdtemp(prefix=run_name()))
    limits = None
    proxy = None
    try:
        workdir, proxy_dir, cache_dir = _make_run_folder(run, root)
        if proxy_dir is not None:
            proxy = _start_proxy(settings, proxy_dir)
            proxy.secrets = run.secret_values()  # removed from its log before any cut
        argv, env = _launch_plan(run, root, proxy_dir, cache_dir)
        limits = sb.Limits(settings, root.name)
        if proxy is not None and proxy.gateway is not None:
            proxy.gateway.stop = limits.kill_all  # a budget used up ends the run at once
        outcome = _launch(run, argv, env, workdir, root / "output.txt", limits)
        extra = {**(note or {}), **_after_run(proxy, cache_dir)}
        tail = output_tail(root / "output.txt", run.secret_values())
        manifest, data = build_manifest(run, outcome, workdir, tail, limits, network_record(run, proxy), extra)
        _publish(run, manifest, data, into)
        return manifest
    finally:
        if proxy is not None:
            proxy.close()
        if limits is not None:
            limits.close()
        _remove_run_folder(root)


def _after_run(proxy, cache_dir: Path | None) -> dict:
    """The runner's findings once the candidate is gone: the proxy's overload, the cache's cleaning."""
    extra: dict = {}
    if proxy is not None:
        proxy.close()
        extra["runner_limit"] = proxy.overload
        if proxy.gateway is not None:
            proxy.gateway.drain(30.0)  # calls the candidate left under way: their usage is still counted
            extra["gateway"] = proxy.gateway.record()
            extra["runner_limit"] = extra["runner_limit"] or proxy.gateway.over_budget
    if cache_dir is not None:
        from microctx.candidates.cachedir import clean_cache_dir

        extra["cache_cleaned"], problem = clean_cache_dir(cache_dir)
        extra["runner_limit"] = extra.get("runner_limit") or problem
    return extra


def remove_stale_runs() -> None:
    """Remove the run folders and cgroups of runners that were killed (their owner is gone)."""
    remove_stale_cgroups()
    base = Path(tempfile.gettempdir())
    try:
        names = [n for n in os.listdir(base) if n.startswith(RUN_PREFIX) and owner_is_gone(n)]
    except OSError:
        return
    for name in names:
        _remove_run_folder(base / name)


def _remove_run_folder(root: Path) -> None:
    from microctx.candidates.hostile_tree import remove_tree

    try:
        remove_tree(root)
    except OSError:
        pass  # the next run tries again (remove_stale_runs)


def _make_run_folder(run: RunInputs, root: Path) -> tuple[Path, Path | None, Path | None]:
    """The run's folder: `work` (the candidate's, owned by its host uid), `net` (the proxy's
    socket, record mode), `stage` (root's staging points); and the prepared cache folder."""
    uid = sb.host_uid()
    os.chmod(root, 0o711)  # the unprivileged candidate reaches its folders, lists nothing
    workdir = root / "work"
    workdir.mkdir()
    shutil.copyfile(run.public, workdir / "public.json")
    if run.devkit is not None:
        shutil.copyfile(run.devkit, workdir / "devkit.json")
    sandboxed = run.settings.isolation == "sandbox"
    if sandboxed and os.geteuid() == 0:
        for path in (workdir, *workdir.iterdir()):
            os.chown(path, uid, uid)
        (root / "stage").mkdir(mode=0o755)
    proxy_dir = None
    if run.settings.network == "record" or run.settings.gateway is not None:
        proxy_dir = root / "net"
        proxy_dir.mkdir(mode=0o711)
    cache_dir = None
    if run.settings.cache_dir is not None:
        from microctx.candidates.cachedir import prepare_cache_dir

        cache_dir = prepare_cache_dir(run.settings.cache_dir, uid if sandboxed else os.geteuid())
    return workdir, proxy_dir, cache_dir


def _publish(run: RunInputs, manifest: dict, data: bytes | None, into: AtomicOutputs | None = None) -> None:
    """Write the submission (only for a good run) and the manifest, together as one set (or staged
    in `into`, which the caller reads back with `staged_path`); a failed run writes its manifest
    and leaves no submission of its own at S (an earlier one it removes is removed by the set)."""
    from microctx._io.atomic import AtomicOutputs
    from microctx.contract.canonical import dumps

    if into is None:
        with AtomicOutputs() as out:
            _publish(run, manifest, data, out)
        return
    if data is None and run.submission.exists():
        manifest["error"] += remove_stale_submission(run.submission, run.spec.name, into)
    if data is not None:
        into.write(run.submission, data)
    into.write(manifest_path(run.submission), dumps(manifest))
