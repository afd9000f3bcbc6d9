"""The sandbox, attacked: each hostile candidate of tests/candidates/hostile.py tries one way out.

Each attack must fail, be visible in the run manifest where it should be, and leave no trace on
the host: no file outside the run folder, no process after the run, the venv unchanged. The
controls run the same attacks with `--isolation process` and show they do work there.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

import pytest

from microctx.candidates import sandbox as sb
from microctx.candidates.runner import manifest_path, run_candidate
from microctx.cli import main

HERE = Path(__file__).resolve().parent
HOSTILE = HERE / "candidates" / "hostile.py"
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])


def _run(s8f, tmp_path, function, params=None, *options, name="out"):
    out = tmp_path / f"{name}.json"
    argv = ["run", f"{HOSTILE}:{function}", "--public", str(s8f.public), "--submission", str(out), *options]
    for key, value in (params or {}).items():
        argv += ["--param", f"{key}={json.dumps(value)}"]
    code = main(argv)
    manifest = json.loads(manifest_path(out).read_text())
    report = json.loads(out.read_text())["hostile"] if out.exists() else None
    return code, manifest, report


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                pass
    return found


def _tree_state(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if "__pycache__" not in p.parts
    }  # the test process itself may compile modules it imports


@pytest.fixture(scope="module")
def venv_before():
    return _tree_state(SITE_PACKAGES)


@pytest.fixture(scope="module", autouse=True)
def venv_unchanged(venv_before):
    yield
    assert _tree_state(SITE_PACKAGES) == venv_before, "the venv's site-packages changed during the sandbox tests"


class _Server:
    """A local HTTP server on 127.0.0.1 that counts the requests it answers."""

    def __init__(self):
        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hits.append(self.path)
                body = f"hello from {self.path}".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def test_the_sandbox_starts_here():
    assert sb.check_available().endswith("bwrap")


def test_proc_shows_only_the_sandbox_and_no_secret(s8f, tmp_path):
    # the runner as a user starts it: a real process whose environment holds a token and the data folder
    out = tmp_path / "proc.json"
    secret = "ghp_planted_token_" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:16]
    env = {**os.environ, "GITHUB_TOKEN": secret, "MICROCTX_DATA_DIR": str(s8f.answers.parent)}
    done = subprocess.run(
        [sys.executable, "-m", "microctx", "run", f"{HOSTILE}:proc_snoop", "--public", str(s8f.public), "--submission", str(out)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    processes = json.loads(out.read_text())["hostile"]["processes"]
    assert len(processes) <= 3  # the sandbox's init, the candidate, nothing of the host
    seen = json.dumps(processes)
    for private in (secret, "GITHUB_TOKEN", "MICROCTX_DATA_DIR", str(s8f.answers.parent), str(tmp_path)):
        assert private not in seen
    parent = processes["1"]
    assert parent["cwd"] == sb.RUN_DIR and parent["root"] == "/"  # its parent is the sandbox's own init
    assert all(p["cwd"] in (sb.RUN_DIR, "/") for p in processes.values())
    assert all(p["environ"].startswith("PATH=") or "HOME=/home/candidate" in p["environ"] for p in processes.values())


def test_named_host_paths_cannot_be_read_even_when_guessed(s8f, tmp_path, monkeypatch):
    cache = tmp_path / "home" / ".cache" / "microctx"
    cache.mkdir(parents=True)
    (cache / "s8f-github-issues-answers-2026-08-09.json").write_bytes(s8f.answers.read_bytes())
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)  # the caller's working directory holds the cache too
    paths = [
        str(s8f.answers),
        str(s8f.answers.parent),
        str(cache),
        str(cache.parent.parent),
        str(tmp_path),
        str(HERE),
        str(HERE.parent / "pyproject.toml"),
        "/root/.cache/microctx",
        "/etc/shadow",
        "/etc/ssl/private",
        "/sys/kernel",
    ]
    code, manifest, report = _run(s8f, tmp_path, "read_paths", {"paths": paths})
    assert code == 0 and manifest["isolation"] == "sandbox"
    assert report["read"] == {}
    assert sorted(report["refused"]) == sorted(paths)
    assert report["home"] == sb.HOME_DIR


def test_control_the_same_reads_work_without_the_sandbox(s8f, s8f_answers, tmp_path):
    code, manifest, report = _run(s8f, tmp_path, "read_paths", {"paths": [str(s8f.answers)]}, "--isolation", "process")
    assert code == 0 and manifest["isolation"] == "process" and manifest["network"]["mode"] == "unrestricted"
    assert report["read"] == {str(s8f.answers): hashlib.sha256(s8f.answers.read_bytes()).hexdigest()}


@pytest.mark.slow
def test_walking_the_whole_file_system_finds_no_answers(s8f, tmp_path):
    code, manifest, report = _run(s8f, tmp_path, "walk_root")
    assert code == 0, manifest["error"]
    assert report["findings"] == []
    assert report["files"] > 1000  # it did walk: the system and the Python installation are there


def test_no_network_at_all(s8f, tmp_path, server):
    targets = [["127.0.0.1", server.port], ["1.1.1.1", 80], ["::1", server.port]]
    code, manifest, report = _run(s8f, tmp_path, "network", {"targets": targets})
    assert code == 0
    assert report["connected"] == [] and len(report["failed"]) == 3 and report["dns"] is False
    assert server.hits == []
    assert manifest["network"] == {"mode": "none", "allow_hosts": [], "requests": [], "denied": [], "dropped": 0}


def test_record_mode_reaches_only_allowed_hosts_and_logs_every_request(s8f, tmp_path, server):
    other = _Server()
    try:
        allowed = f"127.0.0.1:{server.port}"
        urls = [
            f"http://{allowed}/one",
            f"http://{allowed}/two?x=1",
            f"http://127.0.0.1:{other.port}/not-allowed",
            "http://example.invalid/nope",
        ]
        code, manifest, report = _run(
            s8f,
            tmp_path,
            "through_proxy",
            {"urls": urls, "connect": allowed, "direct": ["127.0.0.1", server.port]},
            "--network",
            "record",
            "--allow-host",
            allowed,
        )
    finally:
        other.close()
    assert code == 0, manifest["error"]
    assert report["results"][urls[0]] == [200, "hello from /one"]
    assert report["results"][urls[1]] == [200, "hello from /two?x=1"]
    assert report["results"][urls[2]][0] == 403 and report["results"][urls[3]][0] == 403
    # plain HTTP inside a CONNECT tunnel would be calls the runner cannot count: the tunnel is closed at its first bytes
    assert report["tunnel"][0] == "HTTP/1.1 200 Connection established" and report["tunnel"][1:] == ["", ""]
    assert report["direct"].startswith("ConnectionRefusedError")  # no way around the proxy
    assert sorted(server.hits) == ["/one", "/two?x=1"] and other.hits == []
    network = manifest["network"]
    assert network["mode"] == "record" and network["allow_hosts"] == [allowed]
    assert [(r["method"], r["target"], r["status"]) for r in sorted(network["requests"], key=lambda r: r["target"])] == [
        ("CONNECT", allowed, 200),
        ("GET", urls[0], 200),
        ("GET", urls[1], 200),
    ]
    for request in network["requests"]:
        assert request["host"] == "127.0.0.1" and request["port"] == server.port and request["seconds"] >= 0
        if request["method"] == "GET":
            assert request["bytes_in"] > len("hello from /") and request["bytes_out"] > 20 and "cut_off" not in request
        else:
            assert request["error"] == "not TLS inside the tunnel (closed)" and request["bytes_out"] == 0
    assert sorted((d["host"], d["port"]) for d in network["denied"]) == sorted(
        [("127.0.0.1", other.port), ("127.0.0.1", server.port), ("example.invalid", 80)]
    )
    assert sorted(d["reason"].split(" (")[0].split(":")[0] for d in network["denied"]) == [
        "host not allowed",
        "host not allowed",
        "not TLS inside the tunnel",
    ]
    assert manifest["counters"]["tool_calls"] == 0  # what it claimed; the compare report counts the requests
    from microctx.reports.tables import cost_table

    costs = cost_table([str(tmp_path / "out.json")], ["hostile"]).iloc[0]
    assert (costs["network.requests"], costs["network.denied"], costs["tool_calls_with_network"]) == (3, 3, 3)


def test_the_venv_and_the_host_cannot_be_written(s8f, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    paths = [str(SITE_PACKAGES / "zz_hostile.pth"), str(outside / "planted.txt"), str(HERE / "planted.txt")]
    code, manifest, report = _run(s8f, tmp_path, "write_outside", {"paths": paths})
    assert code == 0
    assert sorted(report["refused"]) == sorted(paths)
    assert sorted(report["written"]) == ["/home/candidate/microctx-hostile-marker", "/tmp/microctx-hostile-marker"]
    assert not (SITE_PACKAGES / "zz_hostile.pth").exists() and list(outside.iterdir()) == []
    assert not Path("/tmp/microctx-hostile-marker").exists() and not (HERE / "planted.txt").exists()


@pytest.mark.parametrize("isolation", ["sandbox", "process"])
def test_a_setsid_grandchild_is_gone_with_the_run(s8f, tmp_path, isolation):
    marker = f"microctx-grandchild-{isolation}-{os.getpid()}"
    out = tmp_path / "out.json"
    targets = [str(out), str(manifest_path(out))]
    code, manifest, _ = _run(
        s8f, tmp_path, "grandchild", {"marker": marker, "targets": targets, "delay": 1.0}, "--isolation", isolation
    )
    assert code == 0, manifest["error"]
    assert _processes_with(marker) == []
    before = (out.read_bytes(), manifest_path(out).read_bytes())
    time.sleep(2.0)  # longer than the grandchild's delay: had it lived, it would have written by now
    assert (out.read_bytes(), manifest_path(out).read_bytes()) == before
    assert hashlib.sha256(before[0]).hexdigest() == manifest["submission_sha256"]


@pytest.mark.parametrize(
    "function, expected",
    [
        ("fifo_counters", "ignored counters.json: counters.json is not a regular file (refused)"),
        ("huge_counters", "ignored counters.json: counters.json is larger than 1048576 bytes (refused)"),
    ],
)
def test_candidate_files_never_block_the_runner(s8f, tmp_path, function, expected):
    code, manifest, _ = _run(s8f, tmp_path, function)
    assert code == 0 and manifest["counters_problem"] == expected
    assert manifest["counters"] == {"model_calls": None, "tool_calls": None, "input_tokens": None, "output_tokens": None}


def test_symlinks_out_of_the_run_folder_are_refused(s8f, tmp_path):
    elsewhere = tmp_path / "good.json"  # a valid submission on the host the candidate points at
    elsewhere.write_text(json.dumps({"corpus_sha256": hashlib.sha256(s8f.public.read_bytes()).hexdigest(), "answers": []}))
    code, manifest, _ = _run(
        s8f, tmp_path, "symlinks", {"submission_target": str(elsewhere), "counters_target": str(s8f.answers)}
    )
    assert code == 1 and not (tmp_path / "out.json").exists()
    assert manifest["error"] == "invalid submission: submission.json is a symbolic link (refused)"
    assert manifest["counters_problem"] == "ignored counters.json: counters.json is a symbolic link (refused)"


def test_memory_past_the_limit_is_a_failed_run(s8f, tmp_path):
    code, manifest, _ = _run(s8f, tmp_path, "allocate", None, "--memory", "256M")
    assert code == 1 and not (tmp_path / "out.json").exists()
    assert manifest["exit_status"] == -9  # the kernel's OOM killer
    assert manifest["limits"]["memory_bytes"] == 256 << 20
    assert "memory limit" in manifest["error"] and "256 MiB" in manifest["error"]
    if manifest["limits"]["enforced_by"]["memory"] == "cgroup":
        assert manifest["memory_exceeded"] is True and manifest["peak_memory_bytes"] <= (256 << 20) + (1 << 20)


def test_a_fork_bomb_meets_the_process_limit(s8f, tmp_path):
    code, manifest, _ = _run(s8f, tmp_path, "fork_bomb", None, "--max-processes", "24", "--timeout", "60")
    assert code == 1 and manifest["timed_out"] is False
    assert "fork refused after" in manifest["error"]
    children = int(manifest["error"].split("fork refused after ")[1].split()[0])
    assert 10 < children < 24  # the limit counts the whole tree (init, candidate, its threads)
    assert manifest["limits"]["max_processes"] == 24
    if manifest["limits"]["enforced_by"]["processes"] == "cgroup":
        assert manifest["processes_refused"] >= 1 and "--max-processes" in manifest["error"]


def test_cpu_time_past_the_limit_is_a_failed_run(s8f, tmp_path):
    code, manifest, _ = _run(s8f, tmp_path, "spin", None, "--cpu-seconds", "1", "--timeout", "60")
    assert code == 1 and manifest["timed_out"] is False
    assert manifest["exit_status"] == -24  # SIGXCPU at the soft limit
    assert "was killed by signal 24 (SIGXCPU)" in manifest["error"] and "CPU-time limit of 1 seconds" in manifest["error"]
    assert 0.9 <= manifest["cpu_seconds"] < 10  # the kernel stopped it at about 1 s


def test_builtins_pass_in_the_sandbox(s8f, tmp_path):
    manifest = run_candidate("exact-sql", s8f.public, tmp_path / "sql.json")
    assert manifest["ok"] and manifest["isolation"] == "sandbox" and manifest["network"]["mode"] == "none"
    from microctx import grade, load_answers

    assert grade(load_answers(s8f.answers), json.loads((tmp_path / "sql.json").read_text())).passed


def test_sandbox_unavailable_exits_2_with_one_line(s8f, tmp_path, monkeypatch, capsys):
    import tempfile

    fake = Path(tempfile.mkdtemp(prefix="fake-bwrap-"))  # a folder the unprivileged uid can reach (tmp_path's parents are 0700)
    fake.chmod(0o755)
    monkeypatch.setattr(sb, "_PROBED", {})
    (fake / "bwrap").write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the "
        "kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    (fake / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "x.json"
    assert main(["run", "exact-sql", "--public", str(s8f.public), "--submission", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cannot start the sandbox: bwrap: No permissions to create new namespace" in err
    assert "--isolation process" in err and "apt-get install bubblewrap" in err
    assert not out.exists() and not manifest_path(out).exists()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["run", "exact-sql", "--public", str(s8f.public), "--submission", str(out)]) == 2
    assert "bubblewrap (bwrap) is not installed" in capsys.readouterr().err
    import shutil

    shutil.rmtree(fake)


def test_settings_are_checked(s8f, tmp_path, capsys):
    out = str(tmp_path / "x.json")
    base = ["run", "exact-sql", "--public", str(s8f.public), "--submission", out]
    for extra in (
        ["--memory", "lots"],
        ["--memory", "1M"],
        ["--max-processes", "1"],
        ["--allow-host", "example.com"],
        ["--network", "record", "--isolation", "process"],
        ["--network", "record", "--allow-host", "a.com:99999"],
        ["--cpu-seconds", "0"],
    ):
        assert main(base + extra) == 2, extra
    # upper bounds: a typo past any sane range is one line naming the option, exit 2 (not a crash in setrlimit)
    for option, value in (("--max-processes", "9" * 30), ("--max-processes", "65537"), ("--cpu-seconds", "9" * 30)):
        capsys.readouterr()
        assert main([*base, option, value]) == 2, option
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and option in err and "expected" in err, err
    assert sb.parse_size("2G") == 2 << 30 and sb.parse_size("512M") == 512 << 20 and sb.parse_size("1.5GiB") == 3 << 29
    assert not list(tmp_path.iterdir())


def test_proxy_refuses_what_is_not_a_proxy_request(tmp_path):
    from microctx.candidates.network import RecordingProxy, parse_allowed_host

    assert str(parse_allowed_host("API.example.com")) == "api.example.com"
    assert parse_allowed_host("[::1]:8080").port == 8080 and parse_allowed_host("h:443").admits("H", 443)
    assert not parse_allowed_host("h").admits("h", 8080) and parse_allowed_host("h").admits("h", 80)
    import socket

    with RecordingProxy(tmp_path / "p.sock", ["127.0.0.1:1"]) as proxy:
        replies = []
        host = b"Host: 127.0.0.1:1\r\n"
        for request in (
            b"GET /relative HTTP/1.1\r\n" + host + b"\r\n",
            b"GET https://127.0.0.1:1/ HTTP/1.1\r\n" + host + b"\r\n",
            b"nonsense\r\n\r\n",
        ):
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(tmp_path / "p.sock"))
                client.sendall(request)
                replies.append(client.recv(4096).split(b"\r\n")[0])
    assert replies == [b"HTTP/1.1 400 Bad Request"] * 3
    record = proxy.record()
    assert record["requests"] == [] and len(record["denied"]) == 3
    assert [d["reason"].split(" ")[0] for d in record["denied"]] == ["only", "only", "not"]


def test_a_command_file_under_tmp_stays_visible_beside_the_private_tmp(s8f, tmp_path):
    script = tmp_path / "snoop.py"  # tmp_path is under /tmp, which the sandbox replaces with its own
    script.write_bytes((HERE / "candidates" / "snoop.py").read_bytes())
    (tmp_path / "neighbour.txt").write_text("not named by the command, so not visible")
    out = tmp_path / "snoop.json"
    assert (
        main(
            [
                "run",
                "snoop",
                "--public",
                str(s8f.public),
                "--submission",
                str(out),
                "--cmd",
                f"python {script} {{public}} {{submission}}",
            ]
        )
        == 0
    )
    assert json.loads(out.read_text())["snoop"]["findings"] == []
    code, _, report = _run(s8f, tmp_path, "read_paths", {"paths": [str(tmp_path / "neighbour.txt"), str(script)]})
    assert code == 0 and report["read"] == {}  # a function candidate is not given the command's files


def test_without_cgroups_rlimits_hold_and_root_is_refused_a_sandbox(s8f, tmp_path, monkeypatch, capsys):
    # as on a machine where no cgroup can be made: the limits fall back to setrlimit, really applied
    from microctx.candidates import limits

    monkeypatch.setattr(limits, "_cgroup_mounts", lambda: {})
    code, manifest, _ = _run(s8f, tmp_path, "allocate", None, "--memory", "256M", "--isolation", "process")
    assert code == 1 and manifest["limits"]["enforced_by"]["memory"] == "rlimit RLIMIT_AS (per process)"
    assert "MemoryError" in manifest["error"] and "(memory limit 256 MiB, --memory)" in manifest["error"]
    assert manifest["cost_source"]["cpu_seconds"].startswith("os.wait4")
    assert manifest["cost_source"]["peak_memory_bytes"].startswith("os.wait4")  # Linux counts the runner's size at fork in it
    if os.geteuid() == 0:  # RLIMIT_NPROC does not bind root: no sandboxed run without a pids cgroup
        assert manifest["limits"]["enforced_by"]["processes"].startswith("none")
        assert main(["run", "exact-sql", "--public", str(s8f.public), "--submission", str(tmp_path / "x.json")]) == 2
        assert "the process limit cannot be enforced" in capsys.readouterr().err
