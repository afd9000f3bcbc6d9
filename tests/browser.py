"""A real headless Chromium for tests: the Debian package `chromium`, driven by playwright.

playwright's own browser download is never used (`executable_path` points at the system
browser). Without chromium the tests that need it fail under CI and under `make test`
(MICROCTX_REQUIRE_BROWSER=1: both install it) and are skipped elsewhere, saying what to install.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator

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
