"""Starting a candidate and waiting for it: the timeout, the kill of every process of the run.

`launch` starts the argv (bwrap, or the candidate itself for a process run) in the run's limits,
waits for it with os.wait4 (the rusage of its whole reaped tree), kills everything at the
timeout, and clears away every process of the run (its process group and its cgroups).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from microctx.candidates import sandbox as sb
from microctx.candidates.run_record import Outcome, RunInputs, utc_now
from microctx.errors import InputError


def launch(run: RunInputs, argv: list[str], env: dict, workdir: Path, output_path: Path, limits: sb.Limits) -> Outcome:
    """Start the candidate, wait for it (killing it at the timeout), and clear away every process of the run."""
    timeout = run.settings.timeout_seconds
    started, start_clock = utc_now(), time.monotonic()
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
    return Outcome(exit_status, timed_out, time.monotonic() - start_clock, usage, started, utc_now())


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
