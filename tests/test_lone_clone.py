"""A clone on its own: no ../shared beside it, no MICROCTX_DATA_DIR, an empty HOME (so an empty
cache), and the s8f files reachable only by download (a local server standing in for the pinned
URLs, through MICROCTX_S8F_BASE_URL). The tests that read s8f through the data layer, the two
isolation tests among them, must pass there, and must not find the answers in the fresh cache.

Slow: it runs part of the suite again in a copy of the checkout.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fake_github import FileServer

from microctx.corpus import snapshot as data

ROOT = Path(__file__).resolve().parents[1]
SUITE = ["tests/test_running.py", "tests/test_data.py", "tests/test_verify.py", "tests/test_freeze_conformance.py"]


def _copy_checkout(target: Path) -> None:
    listed = (
        subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


@pytest.mark.slow
def test_the_suite_runs_on_a_lone_clone_by_download(s8f, tmp_path):
    clone, home = tmp_path / "place" / "clone", tmp_path / "home"
    clone.mkdir(parents=True)
    home.mkdir()
    _copy_checkout(clone)
    assert not (clone.parent / "shared").exists()
    published = {item.name: getattr(s8f, key).read_bytes() for key, item in data.S8F.items()}
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "CI")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env["HOME"] = str(home)
    with FileServer(published) as server:
        env[data.BASE_URL_ENV] = server.base_url
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-x", *SUITE],
            cwd=clone,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]
    skips = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("README" in line for line in skips), skips  # only the checks of the README beside ../shared
    # the files came by download into the (empty) HOME's cache, once each
    cache = home / ".cache" / "microctx"
    assert sorted(p.name for p in cache.iterdir()) == sorted(published)
    assert set(server.hits) == set(published) and all(n >= 1 for n in server.hits.values())


@pytest.mark.slow
def test_an_offline_lone_clone_says_once_what_to_set(tmp_path):
    """No data beside it, an empty cache, and the download refused (a closed local port): the run
    stops at the first test that needs s8f, with one message naming what to set, not one error per test."""
    import socket

    clone, home = tmp_path / "clone", tmp_path / "home"
    clone.mkdir()
    home.mkdir()
    _copy_checkout(clone)
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    env.update(HOME=str(home), **{data.BASE_URL_ENV: f"http://127.0.0.1:{port}"})
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUITE],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = run.stdout + run.stderr
    assert run.returncode == 2, output[-3000:]
    assert output.count(data.OFFLINE_HINT) == 1, output[-3000:]
    assert "error" not in output.lower().split("the s8f files are not reachable")[0][-200:]
    assert len(output.splitlines()) < 40, output[-3000:]
