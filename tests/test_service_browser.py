"""The leaderboard page in headless Chromium: names with markup stay text, no script runs or loads,
and teams the paired test cannot separate share a rank group."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser import browser_page, need_browser
from service_support import ServiceProcess, add_team, body, post, private_answers, submission

SHOTS = os.environ.get("MICROCTX_SCREENSHOTS")
MARKUP = "<img src=x onerror=alert(1)><script>alert(2)</script>"


@pytest.mark.slow
def test_the_leaderboard_page(tmp_path, s8f, s8f_answers):
    need_browser()
    state = f"sqlite:///{tmp_path / 'state.db'}"
    ids = [a["id"] for a in s8f_answers["answers"] if a["split"] == "test"]
    planted = {"exact": set(), MARKUP: set(ids[:1]), "sloppy": set(ids[::2])}  # the first two cannot be told apart
    with ServiceProcess(
        private_answers(s8f.answers, tmp_path / "private"), s8f.public, state, log=tmp_path / "serve.log"
    ) as running:
        for name, wrong in planted.items():
            assert post(running.url, add_team(state, name), body(submission(s8f_answers, wrong))).status_code == 201
        with browser_page(width=1000, height=700) as page:
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(running.url + "/")
            page.screenshot(path=str(tmp_path / "leaderboard.png"), full_page=True)
            if SHOTS:
                Path(SHOTS).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(SHOTS) / "leaderboard.png"), full_page=True)
            names = page.locator("td.team").all_inner_texts()
            groups = page.locator("tbody tr td:first-child").all_inner_texts()
            assert page.locator("script").count() == 0 and page.locator("img").count() == 0
            assert page.title() == "microctx leaderboard (public)"
            dialogs = page.console_messages
    assert names[2] == "sloppy" and set(names[:2]) == {"exact", MARKUP}
    assert groups == ["1", "1", "2"]
    assert requests == [running.url + "/"]  # nothing else fetched: no CDN, no script
    assert not dialogs
    assert (tmp_path / "leaderboard.png").stat().st_size > 5000
