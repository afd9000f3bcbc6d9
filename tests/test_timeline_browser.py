"""The interactive timeline in a real headless Chromium: brushing filters the label chart.

The page is the chart's self-contained HTML (what `show_interactive` embeds); the brush is made
with real mouse events on the timeline; the label chart is read back from the SVG vega draws.
"""

from __future__ import annotations

import re

import pandas as pd
import pytest
from browser import browser_page

from microctx.reports import charts

BAR = "path[aria-roledescription=bar]"
DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def frame(s8f_corpus):
    return s8f_corpus.frame()


def test_every_day_is_in_the_timeline_and_quiet_days_are_zero(frame):
    events = charts.timeline_events(frame)
    daily = charts.daily_events(events)
    days = pd.date_range(events["date"].min(), events["date"].max(), freq="D")
    assert len(daily) == 2 * len(days)  # every day, created and closed
    assert daily["issues"].sum() == len(events) and daily["issues"].dtype.kind == "i"
    created = daily[daily["event"] == "created"].set_index("day")["issues"]
    per_day = frame["created_at"].dt.tz_convert("UTC").dt.strftime("%Y-%m-%d").value_counts()
    assert created[created > 0].to_dict() == per_day.to_dict()
    assert (created == 0).sum() == len(days) - len(per_day)  # closed-only days are zero, not skipped


def test_quiet_days_are_zero_not_joined_across():
    """Planted gap: two issues a week apart; the five days between are in the series as 0."""
    ts = pd.to_datetime(["2026-01-01T10:00:00Z", "2026-01-08T09:00:00Z"], utc=True)
    frame = pd.DataFrame(
        {
            "id": ["issue-1", "issue-2"],
            "split": ["test", "test"],
            "created_at": ts,
            "closed_at": pd.Series([pd.NaT, pd.NaT], dtype="datetime64[ns, UTC]"),
            "labels": [["bug"], []],
        }
    )
    daily = charts.daily_events(charts.timeline_events(frame))
    created = daily[daily["event"] == "created"]["issues"].tolist()
    assert created == [1, 0, 0, 0, 0, 0, 0, 1]


def _bar_counts(page) -> dict[str, int]:
    labels = page.eval_on_selector_all(BAR, "els => els.map(e => e.getAttribute('aria-label'))")
    out = {}
    for text in labels:
        m = re.search(r"label: (.*); records: (\d+)", text or "")
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def _drag(page, x0: float, x1: float) -> None:
    box = page.locator("svg .mark-line").first.bounding_box()
    y = box["y"] + box["height"] / 2  # inside the timeline's plot
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x1, y, steps=6)
    page.mouse.up()
    page.wait_for_timeout(300)


@pytest.mark.slow
def test_brushing_filters_the_label_chart_in_chromium(frame, tmp_path):
    chart = charts.timeline_with_labels(charts.timeline_events(frame), frame)
    page_file = tmp_path / "timeline.html"
    page_file.write_text(charts.interactive_page(chart))
    assert "<script src=" not in page_file.read_text()  # everything inlined: no network

    daily = charts.daily_events(charts.timeline_events(frame))
    first = int(daily["date"].min()) - DAY_MS // 2  # the x domain: the first day's midnight ..
    last = int(daily["date"].max()) + DAY_MS // 2  # .. the end of the last day
    labels = frame.explode("labels").dropna(subset=["labels"])
    created_day = (
        labels["created_at"].dt.tz_convert("UTC").dt.floor("D").dt.tz_localize(None) - pd.Timestamp(0)
    ) // pd.Timedelta(milliseconds=1)
    every = labels["labels"].value_counts().to_dict()

    with browser_page() as page:
        page.goto(page_file.as_uri())
        page.wait_for_selector(BAR, state="attached")
        assert {k: v for k, v in _bar_counts(page).items() if v} == every  # nothing brushed: every record

        # the timeline's plot area (its group's background, 640 px wide) spans the x domain exactly
        frames = page.eval_on_selector_all(
            "svg g.mark-group.role-scope > g > path.background",
            "els => els.map(e => { const r = e.getBoundingClientRect(); "
            "return {x: r.x, y: r.y, width: r.width, height: r.height}; })",
        )
        box = next(f for f in frames if round(f["width"]) == 640 and round(f["height"]) == 200)

        def x_of(ms: float) -> float:
            return box["x"] + box["width"] * (ms - first) / (last - first)

        # brush across days 5..9 (from 0.4 into day 5 to 0.6 into day 9): a day counts when the
        # brush holds its noon, the middle of its step
        _drag(page, x_of(first + 5.4 * DAY_MS), x_of(first + 9.6 * DAY_MS))
        lo, hi = first + 5 * DAY_MS, first + 9 * DAY_MS
        expected = labels[(created_day >= lo) & (created_day <= hi)]["labels"].value_counts().to_dict()
        got = _bar_counts(page)
        assert expected and {k: v for k, v in got.items() if v} == expected
        assert set(got) == set(every)  # every label keeps its row (zero-length bars)

        # brush inside one day's afternoon, past its noon: no day is taken; nothing goes empty
        _drag(page, x_of(first + 10.6 * DAY_MS), x_of(first + 10.9 * DAY_MS))
        got = _bar_counts(page)
        assert set(got) == set(every) and not any(got.values()), {k: v for k, v in got.items() if v}
        assert page.locator("svg .role-axis").count() >= 4  # both charts keep their axes
        problems = [text for kind, text in page.console_messages if kind in ("warning", "error")]
        assert not problems, problems  # no "Infinite extent" warning, no error

        height = page.evaluate("document.querySelector('svg').getBoundingClientRect().height")
        page.screenshot(path=str(tmp_path / "timeline.png"), full_page=True)
    _, svg = charts.render(chart)
    assert abs(height - charts.svg_size(svg)[1]) < 30  # the iframe height comes from this size


def test_interactive_iframe_is_as_tall_as_the_chart(frame):
    chart = charts.timeline_with_labels(charts.timeline_events(frame), frame)
    image, iframe = charts.show_interactive(chart, "timeline")
    height = image.height
    assert height == round(charts.svg_size(image.svg)[1])
    assert f"height:{height + 40}px" in iframe.data and height > 700  # the old fixed 700 px clipped it
