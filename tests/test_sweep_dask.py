"""Sweeps on a real Dask distributed cluster: a scheduler and two workers started by the test as
subprocesses on 127.0.0.1 (`python -m distributed.cli.dask_scheduler` / `dask_worker`, no nanny,
so a killed worker stays dead). A worker is killed (SIGKILL) while it runs a configuration; the
sweep must still finish, every configuration once, with the results of a sequential run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from microctx.cli import main
from microctx.tuning.sweep import run_sweep

PLANTED = Path(__file__).parent / "candidates" / "planted_sweep.py"
pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", *args], stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from distributed import Client

    logs = tmp_path_factory.mktemp("dask-logs")
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    processes = {
        "scheduler": _start(
            ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            logs / "scheduler.log",
        )
    }
    for name in ("w0", "w1"):
        processes[name] = _start(
            [
                "distributed.cli.dask_worker",
                address,
                "--name",
                name,
                "--nthreads",
                "1",
                "--no-nanny",
                "--no-dashboard",
                "--memory-limit",
                "0",
                "--host",
                "127.0.0.1",
            ],
            logs / f"{name}.log",
        )
    client = None
    try:
        client = Client(address, timeout=60, set_as_default=False)
        client.wait_for_workers(2, timeout=120)
        yield address, client, processes
    finally:
        if client is not None:
            client.close()
        for process in processes.values():  # only what this fixture started, by its own pid
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def sweep_file(folder: Path) -> Path:
    path = folder / "dask.toml"
    path.write_text(
        f'[candidate]\nname = "planted"\nfunction = "{PLANTED}:run"\n[grid]\nmiss = [0, 3]\ncalls = [1, 2]\n'
        'sleep = [1.5]\n[select]\nmetric = "f1"\nrule = "max"\n'
    )
    return path


def comparable(rows):
    return [{k: v for k, v in r.items() if k not in ("wall_seconds", "cpu_seconds", "peak_memory_bytes")} for r in rows]


def test_a_sweep_survives_a_killed_worker_and_equals_a_sequential_run(cluster, tmp_path, s8f, devkit):
    address, client, processes = cluster
    spec = sweep_file(tmp_path)
    out = tmp_path / "dask-out"
    outcome: dict = {}

    def sweep():
        try:
            outcome["result"] = run_sweep(spec, s8f.public, devkit, out, scheduler=address, progress=False)
        except BaseException as exc:  # reported by the assertion below
            outcome["error"] = exc

    thread = threading.Thread(target=sweep)
    thread.start()
    killed = None
    names = {}
    while thread.is_alive() and killed is None:  # wait for the first finished configuration
        if list(out.glob("runs/*/result.json")):
            workers = client.scheduler_info()["workers"]
            names = {info["name"]: addr for addr, info in workers.items()}
            busy = {addr: keys for addr, keys in client.processing().items() if keys}
            victim = next((n for n in ("w0", "w1") if names.get(n) in busy), None)
            if victim is not None:
                os.killpg(processes[victim].pid, signal.SIGKILL)  # mid-task: it holds a running configuration
                processes[victim].wait()
                killed = (victim, busy[names[victim]])
        time.sleep(0.05)
    thread.join()
    assert "error" not in outcome, outcome.get("error")
    assert killed is not None, "no worker was busy after the first result: the test did not kill mid-sweep"
    result = outcome["result"]
    assert len(result.rows) == 4 and result.failed == 0 and all(r["status"] == "ok" for r in result.rows)
    assert len(result.ran) == 4 == len(set(result.ran)) and len(list((out / "runs").iterdir())) == 4
    sequential = run_sweep(spec, s8f.public, devkit, tmp_path / "local-out", workers=1, progress=False)
    assert comparable(result.rows) == comparable(sequential.rows)
    assert (out / "selected.json").read_bytes() != b"" and result.selected["row"]["key"] == sequential.selected["row"]["key"]
    # run again on the cluster: everything is resumed, nothing is submitted
    again = run_sweep(spec, s8f.public, devkit, out, scheduler=address, progress=False)
    assert again.ran == [] and comparable(again.rows) == comparable(result.rows)


def test_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path, s8f, devkit, capsys):
    port = free_port()  # nothing listens there
    code = main(
        [
            "sweep",
            str(sweep_file(tmp_path)),
            "--public",
            str(s8f.public),
            "--devkit",
            str(devkit),
            "--out",
            str(tmp_path / "out"),
            "--scheduler",
            f"tcp://127.0.0.1:{port}",
            "--connect-timeout",
            "1",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "cannot reach the Dask scheduler" in err[0] and str(port) in err[0]
    assert not (tmp_path / "out").exists()  # nothing written: the connection is tried first
