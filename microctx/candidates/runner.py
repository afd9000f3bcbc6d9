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

Beside the submission S the runner writes `<S without .json>.run.json` (schema microctx-run/2):
candidate, kind, entry, version, parameters, corpus and devkit digests, start and end (UTC RFC
3339), `isolation`, `network` (`mode`: "none", "record", or "unrestricted" for a process run;
in record mode `requests` and `denied`), `limits` (what was applied and how it was enforced),
the cost from the kernel (wall seconds; CPU seconds and peak memory of the whole process tree,
`cost_source` saying where each figure comes from), exit status, the counters the candidate
reported (self-reported: listed under `self_reported`; see microctx.candidates.registry), `ok`,
`error` and the last 4,000 characters of its output (stdout and stderr together).
A crash, a timeout, a limit hit, a missing or invalid submission (not JSON, wrong shape, another
corpus's digest) is a failed run: the manifest says why, the submission is not written, and an
earlier file at S is removed so that it cannot be graded as this run's result, but only when it
provably is an earlier submission (`remove_stale_submission`); anything else is left and the
manifest says so.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from microctx.candidates import sandbox as sb
from microctx.candidates.registry import COUNTER_KEYS, COUNTERS_FILE, MODEL_COUNTER_KEYS, Candidate, resolve
from microctx.contract.digests import file_sha256
from microctx.errors import InputError

RUN_SCHEMA = "microctx-run/2"
_RUN_SCHEMAS = (RUN_SCHEMA, "microctx-run/1")  # manifests this runner can read (proof of an earlier run)
_COUNTERS_LIMIT = 1 << 20
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT")
_OUTPUT_TAIL = 4000


def manifest_path(submission: str | os.PathLike) -> Path:
    """Where the run manifest goes beside a submission: `<S without .json>.run.json`."""
    text = os.fspath(submission)
    return Path((text[:-5] if text.endswith(".json") else text) + ".run.json")


def read_manifest(submission: str | os.PathLike, *, strict: bool = False) -> dict | None:
    """The run manifest beside a submission (`manifest_path`), or None when there is none.

    An unreadable manifest (not JSON, not an object) raises InputError when `strict` (a report
    that shows its costs), and is taken as no manifest otherwise (the ledger: a look is recorded
    all the same, without the run's candidate and configuration)."""
    from microctx._io.jsonio import read_json

    path = manifest_path(submission)
    if not path.is_file():
        return None
    try:
        document = read_json(path)
    except InputError:
        if strict:
            raise
        return None
    if not isinstance(document, dict):
        if strict:
            raise InputError(path, "expected a JSON object (a run manifest)")
        return None
    return document


MODEL_COUNTS = ("model_calls", "input_tokens", "output_tokens", "cached_tokens")


def _count(value: object) -> int | float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def model_counts(manifest: dict) -> dict:
    """A run's model calls and tokens, the runner's own count preferred to the candidate's.

    When the runner's proxy counted the calls (`model_usage_check` with `agree` true or false),
    its `model_calls` is used, and its tokens when it read every answered call's usage
    (`tokens_seen`); otherwise the candidate's self-reported counters (None when absent).
    Also `counts_source` ("runner", "runner calls, candidate tokens" or "candidate") and
    `counts_agree` (the check's `agree`: True, False, or None when there was no check or the
    traffic was opaque, HTTPS)."""
    counters = manifest.get("counters")
    counts = {key: _count(counters.get(key)) if isinstance(counters, dict) else None for key in MODEL_COUNTS}
    found = manifest.get("model_usage_check")
    check: dict = found if isinstance(found, dict) else {}
    agree, runner = check.get("agree"), check.get("runner")
    source = "candidate"
    if isinstance(agree, bool) and isinstance(runner, dict) and _count(runner.get("model_calls")) is not None:
        counts["model_calls"] = _count(runner["model_calls"])
        source = "runner calls, candidate tokens"
        if check.get("tokens_seen") is True and all(_count(runner.get(k)) is not None for k in MODEL_COUNTS[1:]):
            counts.update({key: _count(runner[key]) for key in MODEL_COUNTS[1:]})
            source = "runner"
    return {**counts, "counts_source": source, "counts_agree": agree if isinstance(agree, bool) else None}


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _check_public(path: Path) -> str:
    """The public corpus's digest; refuse what is plainly not a public corpus (checked by its head)."""
    if path.is_dir():
        raise InputError(path, "expected a public corpus file, got a folder")
    try:
        with open(path, "rb") as handle:
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


def _redact(text: str, secrets: Sequence[str]) -> str:
    """`text` with every passed secret's value replaced (a candidate that prints its key)."""
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, "[redacted]")
    return text


def _command(candidate: Candidate, has_devkit: bool, named_files: list[Path] | None = None) -> list[str]:
    """The child's argv; paths are relative to its working directory.

    For a command, every word naming an existing file is made absolute and added to
    `named_files` (the sandbox makes those files visible, read-only)."""
    import orjson

    params = orjson.dumps(candidate.params).decode()
    if candidate.kind != "command":
        argv = [
            sys.executable,
            "-m",
            "microctx.candidates.registry",
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
        "{python}": sys.executable,
        "{devkit}": "devkit.json" if has_devkit else None,
    }
    argv = []
    for word in shlex.split(candidate.entry):
        for placeholder, value in values.items():
            if placeholder in word:
                if value is None:
                    raise InputError("--cmd", f"the template uses {placeholder} but no --devkit was given")
                word = word.replace(placeholder, value)
        if word not in values.values() and not word.startswith("-") and os.path.isfile(word):
            if _looks_like_answers(Path(word)):
                raise InputError(word, "refusing to pass an answer bundle to a candidate")
            word = os.path.abspath(word)  # the command runs elsewhere
            if named_files is not None:
                named_files.append(Path(word))
        argv.append(word)
    return argv


def _looks_like_answers(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"fak-microcontext-answers/1" in handle.read(4096)
    except OSError:
        return False


# --- the steps of a run ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Run:
    """A run, checked before anything starts."""

    spec: Candidate
    public: Path
    submission: Path
    devkit: Path | None
    corpus_sha256: str
    devkit_sha256: str | None
    settings: sb.SandboxSettings
    passed_env: list[str] = dataclasses.field(default_factory=list)  # names only; values stay in os.environ


@dataclass
class _Outcome:
    """What the kernel says about the finished run."""

    exit_status: int
    timed_out: bool
    wall: float
    usage: Any  # resource.struct_rusage of the whole tree (os.wait4)
    started: str
    ended: str


def _prepare(
    candidate: str,
    public,
    submission,
    devkit,
    params: dict | None,
    cmd: str | None,
    settings: sb.SandboxSettings,
    pass_env: Sequence[str] = (),
) -> _Run:
    """Resolve the candidate and check every input; InputError before anything runs."""
    spec = resolve(candidate, params, cmd)
    public, submission = Path(public), Path(submission)
    if not submission.parent.is_dir():
        raise InputError(submission, "output folder does not exist")
    corpus_sha256 = _check_public(public)
    devkit_path = Path(devkit) if devkit is not None else None
    devkit_sha256 = _check_devkit(devkit_path, corpus_sha256) if devkit_path is not None else None
    if spec.needs_devkit and devkit_path is None:
        raise InputError(candidate, "this candidate tunes on the devkit: pass --devkit (make one with `microctx devkit`)")
    return _Run(spec, public, submission, devkit_path, corpus_sha256, devkit_sha256, settings, _check_pass_env(pass_env))


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


def _launch_plan(run: _Run, root: Path, proxy_dir: Path | None) -> tuple[list[str], dict]:
    """The argv and environment that start the candidate (inside bwrap unless a process run)."""
    has_devkit = run.devkit is not None
    if run.settings.isolation == "process":
        home = root / "home"
        home.mkdir()
        env = clean_environment(home, run.spec.import_root if run.spec.kind == "function" else None, run.passed_env)
        if run.settings.cache_dir is not None:
            env[sb.CACHE_ENV] = str(Path(run.settings.cache_dir).resolve())
        return _command(run.spec, has_devkit), env
    bwrap = sb.check_available()
    spec, binds = _module_bind(run.spec)
    named: list[Path] = []
    argv = _command(spec, has_devkit, named)
    binds += [(path, str(path)) for path in named]
    env = clean_environment(Path(sb.HOME_DIR), spec.import_root if spec.kind == "function" else None, run.passed_env)
    env["TMPDIR"] = "/tmp"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (sb.PACKAGE_DIR, env.get("PYTHONPATH")) if p)
    cache_dir = Path(run.settings.cache_dir).resolve() if run.settings.cache_dir is not None else None
    if cache_dir is not None:
        env[sb.CACHE_ENV] = sb.CACHE_DIR
    if proxy_dir is not None:
        from microctx.candidates.network import DEFAULT_PORT, forwarder_argv

        url = f"http://127.0.0.1:{DEFAULT_PORT}"
        env.update(HTTP_PROXY=url, HTTPS_PROXY=url, http_proxy=url, https_proxy=url, ALL_PROXY=url, NO_PROXY="", no_proxy="")
        argv = forwarder_argv(sys.executable, f"{sb.PROXY_DIR}/proxy.sock", DEFAULT_PORT, argv)
    return sb.bwrap_argv(bwrap, root / "work", argv, extra=binds, proxy_dir=proxy_dir, cache_dir=cache_dir), env


def _launch(run: _Run, argv: list[str], env: dict, workdir: Path, output_path: Path, limits: sb.Limits) -> _Outcome:
    """Start the candidate, wait for it (killing it at the timeout), and clear away every process of the run."""
    timeout = run.settings.timeout_seconds
    started, start_clock = _utc_now(), time.monotonic()
    with open(output_path, "wb") as output:
        try:
            process = subprocess.Popen(
                argv,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=True,
                preexec_fn=limits.preexec,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise InputError(argv[0], f"cannot start the candidate: {getattr(exc, 'strerror', None) or exc}") from None
        try:
            exit_status, usage, timed_out = _wait(process, timeout, limits)
        finally:
            limits.kill_all()
    if run.settings.isolation == "sandbox" and 128 < exit_status < 128 + 65:
        exit_status = -(exit_status - 128)  # bwrap reports a candidate killed by signal N as 128 + N
    return _Outcome(exit_status, timed_out, time.monotonic() - start_clock, usage, started, _utc_now())


def _wait(process: subprocess.Popen, timeout: float | None, limits: sb.Limits) -> tuple[int, Any, bool]:
    """Wait for the child with os.wait4 (the rusage of its whole reaped tree); kill everything on timeout."""
    timed_out = threading.Event()

    def kill_all() -> None:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        limits.kill_all()

    def on_timeout() -> None:
        timed_out.set()
        kill_all()

    timer = threading.Timer(timeout, on_timeout) if timeout else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except BaseException:  # interrupted (Ctrl-C reaches only our group): take the candidate down too
        kill_all()
        os.waitpid(process.pid, 0)
        raise
    finally:
        if timer:
            timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    kill_all()  # leftovers: the candidate's process group, and everything in the run's cgroups
    return process.returncode, usage, timed_out.is_set()


def _read_regular(folder: Path, name: str, limit: int) -> tuple[bytes | None, str]:
    """(bytes, "") of a file the candidate controls, or (None, why not); "missing" when absent.

    Never blocks and never leaves the folder: the last component must not be a symbolic link
    (O_NOFOLLOW), it must be a regular file (a FIFO opened O_NONBLOCK is refused), and no larger
    than `limit` bytes."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        return None, f"cannot open the run folder: {exc.strerror or exc}"
    try:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except FileNotFoundError:
            return None, "missing"
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None, f"{name} is a symbolic link (refused)"
            return None, f"cannot open {name}: {exc.strerror or exc}"
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None, f"{name} is not a regular file (refused)"
            if info.st_size > limit:
                return None, f"{name} is larger than {limit} bytes (refused)"
            chunks, size = [], 0
            while size <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:
                return None, f"{name} is larger than {limit} bytes (refused)"
            return b"".join(chunks), ""
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def _read_counters(workdir: Path) -> tuple[dict, str | None, str]:
    """Counters the candidate wrote (all keys present, null when not reported), its version, a problem."""
    from microctx._io.jsonio import parse_json

    counters: dict[str, int | None] = {key: None for key in COUNTER_KEYS}
    data, why = _read_regular(workdir, COUNTERS_FILE, _COUNTERS_LIMIT)
    if data is None:
        return counters, None, "" if why == "missing" else f"ignored {COUNTERS_FILE}: {why}"
    try:
        reported = parse_json(data, COUNTERS_FILE)
    except InputError as exc:
        return counters, None, f"ignored {COUNTERS_FILE}: {exc.message}"
    if not isinstance(reported, dict):
        return counters, None, f"ignored {COUNTERS_FILE}: not a JSON object"
    problems = []
    for key in COUNTER_KEYS:
        value = reported.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            counters[key] = value
        elif value is not None:
            problems.append(f"{key} is not a non-negative integer")
    for key in MODEL_COUNTER_KEYS:  # present only when reported
        value = reported.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            counters[key] = value
        elif value is not None:
            problems.append(f"{key} is not a non-negative integer")
    version = reported.get("version")
    return counters, str(version)[:200] if version is not None else None, "; ".join(problems)


def _check_submission(workdir: Path, corpus_sha256: str, limit: int) -> tuple[bytes | None, str]:
    """(bytes, "") when the candidate's output is a usable submission for this corpus, else (None, why not)."""
    from microctx._io.jsonio import parse_json
    from microctx.contract.schemas import check_submission_document

    data, why = _read_regular(workdir, "submission.json", limit)
    if data is None:
        return None, "the candidate wrote no submission" if why == "missing" else f"invalid submission: {why}"
    try:
        document = check_submission_document(parse_json(data, "submission"), "submission")
    except InputError as exc:
        return None, f"invalid submission: {exc}"
    if document["corpus_sha256"] != corpus_sha256:
        return None, f"invalid submission: bound to corpus {document['corpus_sha256']}, the public corpus is {corpus_sha256}"
    return data, ""


def _output_tail(path: Path) -> str:
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - _OUTPUT_TAIL))
        return handle.read(_OUTPUT_TAIL).decode("utf-8", "replace")


def _failure_reason(run: _Run, outcome: _Outcome, output_tail: str, limits: sb.Limits) -> str:
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


def remove_stale_submission(submission: Path, candidate: str) -> str:
    """After a failed run, remove the file at `submission` only when it provably is an earlier
    submission: the run manifest beside it names this candidate, a good run and the file's
    SHA-256, or the file itself is a submission document (schema absent or
    fak-microcontext-submission/1, valid as a submission). Anything else (an answer bundle, a
    public corpus, a report, a file that is not JSON) is left in place. Returns what was done,
    for the manifest's `error`."""
    if _provably_submission(submission, candidate):
        submission.unlink()  # an earlier run's file must not pass for this run's result
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
        earlier = read_manifest(path)  # an unreadable manifest proves nothing
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


def _network_record(run: _Run, proxy) -> dict:
    if proxy is not None:
        return proxy.record()
    mode = "unrestricted" if run.settings.isolation == "process" else "none"
    return {"mode": mode, "allow_hosts": [], "requests": [], "denied": [], "dropped": 0}


def _manifest(
    run: _Run, outcome: _Outcome, workdir: Path, output_tail: str, limits: sb.Limits, network: dict
) -> tuple[dict, bytes | None]:
    """The run manifest, and the submission's bytes when the run succeeded."""
    from microctx._version import __version__

    counters, version, counters_problem = _read_counters(workdir)
    data = None
    if outcome.timed_out or outcome.exit_status != 0:
        error = _failure_reason(run, outcome, output_tail, limits)
    else:
        data, error = _check_submission(workdir, run.corpus_sha256, run.settings.max_file_bytes)
    tree_cpu = limits.cpu_seconds()
    peak = limits.peak_memory()
    spec = run.spec
    manifest = {
        "schema": RUN_SCHEMA,
        "candidate": spec.name,
        "kind": spec.kind,
        "entry": spec.entry,
        "version": version,
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
    return manifest, data


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


def _publish(run: _Run, manifest: dict, data: bytes | None) -> None:
    """Write the submission (only for a good run) and the manifest, together as one set; a failed
    run writes its manifest and leaves no submission of its own at S."""
    from microctx._io.atomic import AtomicOutputs
    from microctx.contract.canonical import dumps

    if data is None and run.submission.exists():
        manifest["error"] += remove_stale_submission(run.submission, run.spec.name)
    with AtomicOutputs() as out:
        if data is not None:
            out.write(run.submission, data)
        out.write(manifest_path(run.submission), dumps(manifest))


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
) -> dict:
    """Run a candidate on a public corpus in isolation; write the submission (on success) and its manifest.

    `candidate` is a built-in name, `module:function`, `file.py:function`, or with `cmd` a label.
    `sandbox` holds the isolation, network and limits (default: `SandboxSettings()`, the sandbox
    with no network); `timeout`, when given, replaces its wall timeout. `pass_env` names caller
    environment variables handed to the candidate (an API key): the manifest lists the names
    (`passed_env`), and their values are redacted from its output tail.
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
    root = Path(tempfile.mkdtemp(prefix="microctx-run-"))
    limits = None
    proxy = None
    try:
        workdir = root / "work"
        workdir.mkdir()
        shutil.copyfile(run.public, workdir / "public.json")
        if run.devkit is not None:
            shutil.copyfile(run.devkit, workdir / "devkit.json")
        proxy_dir = None
        if settings.network == "record":
            from microctx.candidates.network import RecordingProxy

            proxy_dir = root / "net"
            proxy_dir.mkdir()
            proxy = RecordingProxy(proxy_dir / "proxy.sock", settings.allow_hosts).start()
        argv, env = _launch_plan(run, root, proxy_dir)
        limits = sb.Limits(settings, root.name)
        outcome = _launch(run, argv, env, workdir, root / "output.txt", limits)
        if proxy is not None:
            proxy.close()
        output_tail = _redact(_output_tail(root / "output.txt"), [os.environ[name] for name in run.passed_env])
        manifest, data = _manifest(run, outcome, workdir, output_tail, limits, _network_record(run, proxy))
        _publish(run, manifest, data)
        return manifest
    finally:
        if proxy is not None:
            proxy.close()
        if limits is not None:
            limits.close()
        shutil.rmtree(root, ignore_errors=True)
