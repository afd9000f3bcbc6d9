"""Reports made for reading: the grade report in headless Chromium shows the verdict before the
first table, `f1` as a visible column (not folded into "..."), the tiny slices folded away, no
NaN and no wrapped slice name; and the presentation helpers' numbers and plurals."""

from __future__ import annotations

import math

import pytest
from browser import browser_page

from microctx.reports import views
from microctx.reports.tables import plural


def test_numbers_at_the_precision_they_deserve():
    assert [views.significant(x) for x in (0.89914, 1e-05, 0.000123456, 12.345, 4326, 4326.0, 123456.7)] == [
        "0.899",
        "1e-05",
        "0.000123",
        "12.3",
        "4,326",
        "4,326",
        "123,457",
    ]
    assert views.significant(math.nan) == views.DASH and views.significant(None) == views.DASH
    assert (plural(1, "look"), plural(2, "look"), plural(0, "slice"), plural(1000, "record")) == (
        "1 look",
        "2 looks",
        "0 slices",
        "1,000 records",
    )


def test_table_html_escapes_and_never_shows_nan():
    import pandas as pd

    frame = pd.DataFrame({"slice": ["label: <b>x</b>"], "support": [3], "p": [math.nan], "weak": [True]})
    text = views.table_html(frame)
    assert "&lt;b&gt;x&lt;/b&gt;" in text and "<b>x" not in text and "NaN" not in text and "nan" not in text
    assert "white-space:nowrap" in text and ">yes<" in text


@pytest.mark.slow
def test_the_grade_report_reads_verdict_first_with_f1_visible(tmp_path, s8f):
    from microctx import cli
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.reports.examples import planted_submission

    submission = tmp_path / "planted.json"
    submission.write_bytes(dumps(planted_submission(load_answers(s8f.answers))))
    out = tmp_path / "report"
    argv = ["report", "grade", "--public", str(s8f.public), "--answers", str(s8f.answers)]
    assert cli.main([*argv, "--submission", str(submission), "--out", str(out), "--n-boot", "200"]) == 0
    html = (out / "grade_report.html").read_text()
    assert "NaN" not in html and str(tmp_path) not in html  # no NaN, no local path
    with browser_page(1100, 1400) as page:
        page.goto((out / "grade_report.html").as_uri())
        page.screenshot(path=str(tmp_path / "grade_report.png"))
        layout = page.evaluate(
            """() => {
            const verdict = [...document.querySelectorAll('h2')].find(h => h.textContent.startsWith('Verdict'));
            const table = document.querySelector('table');
            const headers = [...table.querySelectorAll('th')];
            const f1 = headers.find(h => h.textContent.startsWith('f1'));
            const box = f1 && f1.getBoundingClientRect();
            const folded = document.querySelector('details.microctx-fold');
            const names = [...table.querySelectorAll('tbody tr td:first-child')];
            return {
              verdictFirst: !!verdict && !!(verdict.compareDocumentPosition(table) & Node.DOCUMENT_POSITION_FOLLOWING),
              headers: headers.map(h => h.textContent),
              f1Visible: !!box && box.width > 0 && box.right <= window.innerWidth,
              foldedClosed: !!folded && !folded.open && !folded.querySelector('table').checkVisibility(),
              tallestName: Math.max(...names.map(td => td.getBoundingClientRect().height)),
              rowHeight: names[0].getBoundingClientRect().height,
            };
        }"""
        )
    assert layout["verdictFirst"], layout
    assert layout["headers"] == ["slice", "support", "f1 [95% interval]", "n_eff", "judged"] and layout["f1Visible"], layout
    assert layout["foldedClosed"], layout  # the long tail of tiny slices is folded away
    assert layout["tallestName"] <= layout["rowHeight"] * 1.2, layout  # no slice name wraps
    assert (tmp_path / "grade_report.png").stat().st_size > 20_000
