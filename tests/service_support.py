"""Helpers for the grading-service tests: a real `microctx serve` on a free loopback port.

`ServiceProcess` starts the CLI in a subprocess (the same code path as a user's), waits until
it answers, and stops it (terminate, or `kill()` for the crash tests). Submissions are made
from the real s8f answers: `perfect`, or with the state of chosen test records flipped.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
from postgres import free_port

ROOT = Path(__file__).resolve().parents[1]


def private_answers(source: Path, folder: Path) -> Path:
    """A copy of the answer bundle only its owner can read (the service refuses any other)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "answers.json"
    shutil.copyfile(source, target)
    target.chmod(0o600)
    return target


def submission(answers: dict, wrong_ids: set[str] | frozenset[str] = frozenset()) -> dict:
    """A submission of the gold answers, with the state of the records in `wrong_ids` flipped."""
    rows = []
    for gold in answers["answers"]:
        row = {k: v for k, v in gold.items() if k != "split"}
        if gold["id"] in wrong_ids:
            row["state"] = "OPEN" if gold["state"] == "CLOSED" else "CLOSED"
        rows.append(row)
    return {
        "schema": "fak-microcontext-submission/1",
        "corpus_sha256": answers["corpus_sha256"],
        "answers": rows,
        "aggregates": answers["aggregates"],
    }


def body(document: dict) -> bytes:
    return orjson.dumps(document)


def cli(*args: str, env: dict | None = None, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "microctx", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        timeout=120,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"microctx {' '.join(args)} exited {done.returncode}: {done.stderr}")
    return done


def add_team(state: str, name: str) -> str:
    return cli("serve", "admin", "add-team", name, "--state", state).stdout.strip().splitlines()[-1]


class ServiceProcess:
    """`microctx serve` in a subprocess on a free port; `.url`, `.stop()`, `.kill()`."""

    def __init__(
        self,
        answers: Path,
        public: Path,
        state: str,
        *options: str,
        log: Path,
        prefix: tuple[str, ...] = (),
        python: str = sys.executable,
        env: dict | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log
        self._log = open(log, "wb")
        argv = [
            *prefix,
            python,
            "-m",
            "microctx",
            "serve",
            "--answers",
            str(answers),
            "--public",
            str(public),
            "--state",
            state,
            "--port",
            str(self.port),
            *options,
        ]
        self._argv, self._env = argv, {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=self._env)
        self._wait()

    def restart(self) -> None:
        """Start the same command again (same port, same state) after `stop()` or `kill()`."""
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self._argv, stdout=self._log, stderr=subprocess.STDOUT, env=self._env)
        self._wait()

    def _wait(self) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"the service exited {self.process.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                httpx.get(self.url + "/v1/public-key", timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.2)
        self.kill()
        raise AssertionError(f"the service did not answer within 60 s: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self._log.closed:
            return
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(20)
        self._log.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(20)
        self._log.close()

    def __enter__(self) -> ServiceProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def post(url: str, token: str | None, content: bytes, **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(url + "/v1/submissions", content=content, headers={**auth, **headers}, timeout=120)


def get(url: str, path: str, token: str | None = None) -> httpx.Response:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url + path, headers=auth, timeout=60)


class InProcessService:
    """The same app and protocol as `microctx serve`, in a thread of the test process (for planted
    faults that need the test to reach inside: a scorer that fails, a shorter deadline)."""

    def __init__(self, service) -> None:
        import threading

        import uvicorn

        from microctx.service import app as service_app
        from microctx.service.server import KEEP_ALIVE, DeadlineH11Protocol

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            service_app.create_app(service),
            host="127.0.0.1",
            port=self.port,
            http=DeadlineH11Protocol,
            timeout_keep_alive=KEEP_ALIVE,
            log_level="warning",
            lifespan="off",
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> InProcessService:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("the in-process service did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)
