"""A real headless Chromium for tests: the Debian package `chromium`, driven by playwright.

playwright's own browser download is never used (`executable_path` points at the system
browser). Without chromium the tests that need it fail under CI and under `make test`
(MICROCTX_REQUIRE_BROWSER=1: both install it) and are skipped elsewhere, saying what to install.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def need_browser() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI") or os.environ.get("MICROCTX_REQUIRE_BROWSER"):
            pytest.fail("chromium is not installed (CI or `make test`): install the Debian package `chromium`")
        pytest.skip("needs the Debian package `chromium`")
    return CHROMIUM


@contextlib.contextmanager
def browser_page(width: int = 1100, height: int = 1200) -> Iterator:
    """A fresh page in headless Chromium; console messages collected in `page.console_messages`."""
    from playwright.sync_api import sync_playwright

    executable = need_browser()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            messages: list[tuple[str, str]] = []
            page.on("console", lambda m: messages.append((m.type, m.text)))
            page.console_messages = messages
            yield page
        finally:
            browser.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def jupyterlab(root: Path, scratch: Path) -> Iterator[tuple[str, str]]:
    """A JupyterLab server on 127.0.0.1 (a free port, a token) serving `root`; (base URL, token).
    Settings, workspaces and runtime files go to `scratch`, the server's output to scratch/server.log."""
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(scratch / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(scratch / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(scratch / "runtime"),
    }
    log = open(scratch / "server.log", "wb")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}",
            f"--IdentityProvider.token={token}",
            f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly",
            "--allow-root",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if server.poll() is not None:
                    raise AssertionError((scratch / "server.log").read_text()[-3000:]) from None
                time.sleep(0.5)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def run_all_cells(page, base: str, token: str, notebook: str, workspace: str = "") -> None:
    """Open `notebook` in JupyterLab, wait for its kernel, and run every cell. With `workspace`, in
    that fresh workspace (reset): no tab of an earlier notebook is restored beside it."""
    where = f"workspaces/{workspace}/tree/{notebook}?reset&" if workspace else f"tree/{notebook}?"
    page.goto(f"{base}/lab/{where}token={token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell .cm-content", timeout=90_000)
    page.get_by_text("Python 3 (ipykernel) | Idle").wait_for(timeout=90_000)  # the kernel is up
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
