"""Running a candidate in isolation and recording what the run cost (the run manifest).

`run_candidate` gives the candidate only the public corpus (and, if asked, a devkit: train/tune
answers only) and never the answer bundle:
- it runs in its own process, in a fresh empty temporary directory into which the public corpus
  is copied as `public.json` (and the devkit as `devkit.json`), so no argument names a file in
  the caller's folders: the candidate cannot find the shared data folder from a path;
- its environment is built from scratch: PATH (the interpreter's folder first), LANG/LC_*/TZ,
  HOME and TMPDIR inside the run's temporary folder, PYTHONPATH only when a `module:function`
  candidate needs its own folder; any value mentioning the data folder (MICROCTX_DATA_DIR) or
  an answer bundle is dropped, and so is every other variable of the caller;
- a devkit that holds any `test` answer, or is bound to another corpus, is refused.
This is process isolation, not a sandbox: the child runs as the same user and could read any
file it can name; the point is that nothing hands it the answers' whereabouts. Network access
is not blocked; a candidate that uses it must count it as tool calls.

Beside the submission S the runner writes `<S without .json>.run.json` (schema microctx-run/1):
candidate, kind, entry, version, parameters, corpus and devkit digests, start and end (UTC RFC
3339), wall and CPU seconds and peak memory of the candidate's process (os.wait4's rusage),
exit status, the counters the candidate reported (see microctx.candidates.registry), `ok`, `error` and
the last 4,000 characters of its output (stdout and stderr together).
A crash, a timeout, a missing or invalid submission (not JSON, wrong shape, another corpus's
digest) is a failed run: the manifest says why, the submission is not written, and an earlier
file at S is removed so that it cannot be graded as this run's result.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from microctx.candidates.registry import COUNTER_KEYS, COUNTERS_FILE, MODEL_COUNTER_KEYS, Candidate, resolve
from microctx.contract.digests import file_sha256
from microctx.errors import InputError

RUN_SCHEMA = "microctx-run/1"
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT")
_OUTPUT_TAIL = 4000


def manifest_path(submission: str | os.PathLike) -> Path:
    """Where the run manifest goes beside a submission: `<S without .json>.run.json`."""
    text = os.fspath(submission)
    return Path((text[:-5] if text.endswith(".json") else text) + ".run.json")


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
        raise InputError(path, f"devkit is bound to corpus {devkit['corpus_sha256']}, the public corpus is {corpus_sha256}",
                         field="corpus_sha256")
    for answer in devkit["answers"]:
        if answer["split"] == "test":
            raise InputError(path, "a devkit must not hold test answers (make one with `microctx devkit`)",
                             record=answer["id"], field="split")
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
    env.update(HOME=str(home), TMPDIR=str(home), PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1",
               PYTHONNOUSERSITE="1")
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


def _command(candidate: Candidate, has_devkit: bool) -> list[str]:
    """The child's argv; paths are relative to its working directory."""
    import orjson

    params = orjson.dumps(candidate.params).decode()
    if candidate.kind != "command":
        argv = [sys.executable, "-m", "microctx.candidates.registry", candidate.entry,
                "--public", "public.json", "--output", "submission.json", "--params", params]
        if has_devkit:
            argv += ["--devkit", "devkit.json"]
        if candidate.import_root:
            argv += ["--import-root", candidate.import_root]
        return argv
    values = {"{public}": "public.json", "{submission}": "submission.json", "{params}": params,
              "{python}": sys.executable, "{devkit}": "devkit.json" if has_devkit else None}
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
        argv.append(word)
    return argv


def _looks_like_answers(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return b"fak-microcontext-answers/1" in handle.read(4096)
    except OSError:
        return False


def _wait(process: subprocess.Popen, timeout: float | None) -> tuple[int, Any, bool]:
    """Wait for the child with os.wait4 (its own rusage); kill its process group on timeout."""
    timed_out = threading.Event()

    def kill_group():
        timed_out.set()
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill_group) if timeout else None
    if timer:
        timer.daemon = True
        timer.start()
    try:
        _, status, usage = os.wait4(process.pid, 0)
    except BaseException:  # interrupted (Ctrl-C reaches only our group): take the candidate down too
        kill_group()
        os.waitpid(process.pid, 0)
        raise
    finally:
        if timer:
            timer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)
    try:  # leftovers of the candidate's own process group (its children) go with it
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return process.returncode, usage, timed_out.is_set()


def _read_counters(workdir: Path) -> tuple[dict, str | None, str]:
    """Counters the candidate wrote (all keys present, null when not reported), its version, a problem."""
    from microctx.files import read_json

    counters: dict[str, int | None] = {key: None for key in COUNTER_KEYS}
    path = workdir / COUNTERS_FILE
    if not path.exists():
        return counters, None, ""
    try:
        reported = read_json(path)
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
    return counters, str(version) if version is not None else None, "; ".join(problems)


def _check_submission(path: Path, corpus_sha256: str) -> str:
    """'' when the candidate's output is a usable submission for this corpus, else why not."""
    from microctx.contract.schemas import check_submission_document
    from microctx.files import parse_json

    if not path.is_file():
        return "the candidate wrote no submission"
    try:
        document = check_submission_document(parse_json(path.read_bytes(), "submission"), "submission")
    except InputError as exc:
        return f"invalid submission: {exc}"
    if document["corpus_sha256"] != corpus_sha256:
        return f"invalid submission: bound to corpus {document['corpus_sha256']}, the public corpus is {corpus_sha256}"
    return ""


def _failure_reason(exit_status: int, timed_out: bool, timeout: float | None, output_tail: str) -> str:
    if timed_out:
        return f"timed out after {timeout:g} seconds; the candidate was killed"
    last = next((line for line in reversed(output_tail.splitlines()) if line.strip()), "")
    how = f"killed by signal {-exit_status}" if exit_status < 0 else f"exited with status {exit_status}"
    return f"the candidate {how}" + (f": {last.strip()}" if last else "")


def run_candidate(candidate: str, public, submission, *, devkit=None, params: dict | None = None,
                  timeout: float | None = None, cmd: str | None = None, pass_env: Sequence[str] = ()) -> dict:
    """Run a candidate on a public corpus in isolation; write the submission (on success) and its manifest.

    `candidate` is a built-in name, `module:function`, `file.py:function`, or with `cmd` a label.
    `pass_env` names caller environment variables handed to the candidate (an API key): the
    manifest lists the names (`passed_env`), and their values are redacted from its output tail.
    Returns the manifest dict (`ok`, `error` among its keys). Unusable input (no such corpus,
    unknown candidate, a devkit with test answers) raises InputError before anything runs.
    """
    from microctx._version import __version__
    from microctx.contract.canonical import dumps
    from microctx.files import atomic_write

    spec = resolve(candidate, params, cmd)
    public, submission = Path(public), Path(submission)
    if not submission.parent.is_dir():
        raise InputError(submission, "output folder does not exist")
    corpus_sha256 = _check_public(public)
    devkit_sha256 = _check_devkit(Path(devkit), corpus_sha256) if devkit is not None else None
    if spec.needs_devkit and devkit is None:
        raise InputError(candidate, "this candidate tunes on the devkit: pass --devkit (make one with `microctx devkit`)")
    if timeout is not None and timeout <= 0:
        raise InputError("--timeout", f"expected a positive number of seconds, got {timeout}")
    argv = _command(spec, devkit is not None)
    passed = _check_pass_env(pass_env)

    root = Path(tempfile.mkdtemp(prefix="microctx-run-"))
    try:
        workdir, home = root / "work", root / "home"
        workdir.mkdir()
        home.mkdir()
        shutil.copyfile(public, workdir / "public.json")
        if devkit is not None:
            shutil.copyfile(devkit, workdir / "devkit.json")
        output_path = root / "output.txt"
        env = clean_environment(home, spec.import_root if spec.kind == "function" else None, passed)
        started, start_clock = _utc_now(), time.monotonic()
        with open(output_path, "wb") as output_log:
            try:
                process = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                           stdout=output_log, stderr=output_log, start_new_session=True)
            except OSError as exc:
                raise InputError(argv[0], f"cannot start the candidate: {exc.strerror or exc}") from None
            exit_status, usage, timed_out = _wait(process, timeout)
        wall = time.monotonic() - start_clock
        ended = _utc_now()
        output_tail = _redact(output_path.read_bytes()[-_OUTPUT_TAIL:].decode("utf-8", "replace"),
                              [os.environ[name] for name in passed])
        counters, version, counters_problem = _read_counters(workdir)
        output = workdir / "submission.json"
        if timed_out or exit_status != 0:
            error = _failure_reason(exit_status, timed_out, timeout, output_tail)
        else:
            error = _check_submission(output, corpus_sha256)
        manifest = {
            "schema": RUN_SCHEMA,
            "candidate": spec.name,
            "kind": spec.kind,
            "entry": spec.entry,
            "version": version,
            "parameters": spec.params,
            "corpus_sha256": corpus_sha256,
            "devkit_sha256": devkit_sha256,
            "submission": str(submission),
            "submission_sha256": None,
            "started_at": started,
            "ended_at": ended,
            "wall_seconds": round(wall, 3),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 3),
            "peak_memory_bytes": usage.ru_maxrss * 1024,  # Linux reports KiB
            "exit_status": exit_status,
            "timed_out": timed_out,
            "timeout_seconds": timeout,
            "counters": counters,
            "counters_problem": counters_problem,
            "passed_env": passed,
            "runner": {"microctx": __version__, "python": sys.version.split()[0]},
            "ok": not error,
            "error": error,
            "output_tail": output_tail,
        }
        if not error:
            data = output.read_bytes()
            manifest["submission_sha256"] = hashlib.sha256(data).hexdigest()
            atomic_write(submission, data)
        elif submission.exists():
            submission.unlink()  # an earlier run's file must not pass for this run's result
            manifest["error"] += f"; removed the earlier {submission.name} so it cannot be graded as this run's"
        atomic_write(manifest_path(submission), dumps(manifest))
        return manifest
    finally:
        shutil.rmtree(root, ignore_errors=True)
