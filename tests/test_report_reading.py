"""Reports made for reading: the grade report in headless Chromium shows the verdict before the
first table, `f1` as a visible column (not folded into "..."), the tiny slices folded away, no
NaN and no wrapped slice name; and the presentation helpers' numbers and plurals."""

from __future__ import annotations

import math
import re

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
    from microctx.grading.examples import planted_submission

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
        hidden = page.evaluate(READING_LAYOUT)["hiddenHeaders"]  # every header and cell of every shown table in view
    assert hidden == [], hidden
    assert layout["verdictFirst"], layout
    assert layout["headers"] == ["slice", "support", "f1 [95% interval]", "n_eff", "judged"] and layout["f1Visible"], layout
    assert layout["foldedClosed"], layout  # the long tail of tiny slices is folded away
    assert layout["tallestName"] <= layout["rowHeight"] * 1.2, layout  # no slice name wraps
    assert (tmp_path / "grade_report.png").stat().st_size > 20_000


@pytest.mark.slow
def test_an_executed_report_reruns_from_its_folder(tmp_path, synthetic):
    """The executed notebook's parameters point at copies inside the report folder (relative), so
    it runs again from there, moved elsewhere, after its inputs' originals are gone; the folder
    is readable like its files, names no local path, and every chart has its PNG, SVG and PDF."""
    import json
    import shutil
    import stat

    import nbformat
    from nbclient import NotebookClient

    from microctx import cli
    from microctx.reports.build import KERNEL_NAME

    inputs = tmp_path / "given"
    inputs.mkdir()
    for key in ("public", "answers"):
        shutil.copyfile(getattr(synthetic, key), inputs / f"{key}.json")
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.grading.examples import planted_submission

    (inputs / "sub.json").write_bytes(dumps(planted_submission(load_answers(synthetic.answers))))
    out = tmp_path / "report"
    argv = ["report", "grade", "--public", str(inputs / "public.json"), "--answers", str(inputs / "answers.json")]
    assert cli.main([*argv, "--submission", str(inputs / "sub.json"), "--out", str(out), "--n-boot", "50"]) == 0
    assert stat.S_IMODE(out.stat().st_mode) & 0o055 == 0o055  # group and others may read and enter, as with its files
    manifest = json.loads((out / "report.json").read_text())
    assert manifest["parameters"]["submission"] == "inputs/submission/sub.json" and manifest["parameters"]["output_dir"] == "."
    for name in manifest["charts"]:
        pdf = (out / "charts" / f"{name}.pdf").read_bytes()
        box = re.search(rb"/MediaBox\s*\[\s*0 0 ([0-9.]+)", pdf)
        assert pdf.startswith(b"%PDF") and box and float(box.group(1)) <= 468.01, name  # at most a text column wide
    for suffix in ("md", "tex"):
        assert (out / f"slices.{suffix}").is_file()
    for text in ((out / "grade_report.html").read_text(), (out / "grade_report.ipynb").read_text()):
        assert str(tmp_path) not in text
    moved = tmp_path / "elsewhere"
    shutil.move(out, moved)
    shutil.rmtree(inputs)
    notebook = nbformat.read(moved / "grade_report.ipynb", as_version=4)
    NotebookClient(notebook, kernel_name=KERNEL_NAME, timeout=600, resources={"metadata": {"path": str(moved)}}).execute()
    assert (moved / "slices.csv").is_file() and (moved / "charts" / "slice_f1.pdf").is_file()


@pytest.mark.slow
def test_figures_only_publishes_the_figures_and_tables(tmp_path, synthetic, capfd):
    from microctx import cli

    out = tmp_path / "figures"
    argv = ["report", "corpus", "--public", str(synthetic.public), "--out", str(out), "--figures-only"]
    assert cli.main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == ["charts", "report.json"]
    names = {p.stem for p in (out / "charts").iterdir() if p.suffix == ".pdf"}
    assert names and all((out / "charts" / f"{n}.svg").is_file() for n in names)
    err = capfd.readouterr().err
    assert "WARNING" not in err and "Executing" not in err, err  # quiet stderr: no kernel warning, no bar


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sweep_report.ipynb", "grade_report.ipynb"])
def test_a_notebook_runs_by_hand_with_its_defaults(name, tmp_path, s8f):
    """Opened and run as it is (no parameter injected, output_dir ""): the s8f corpus, the planted
    submission, the example sweep shipped with the package."""
    import nbformat
    from nbclient import NotebookClient

    from microctx.reports.build import KERNEL_NAME, NOTEBOOKS_DIR, QUIET_KERNEL

    notebook = nbformat.read(NOTEBOOKS_DIR / name, as_version=4)
    client = NotebookClient(notebook, kernel_name=KERNEL_NAME, timeout=600, resources={"metadata": {"path": str(tmp_path)}})
    client.extra_arguments = QUIET_KERNEL
    client.execute()
    errors = [o for c in notebook.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors and list(tmp_path.iterdir()) == []  # display only: nothing written


READING_LAYOUT = """() => {
    const verdict = [...document.querySelectorAll('h2')].find(h => h.textContent.startsWith('Verdict'));
    const tables = [...document.querySelectorAll('table')].filter(t => t.checkVisibility());
    const hidden = [];
    for (const t of tables) {
      for (const td of t.querySelectorAll('td')) {  // a cell cut off by the page (or a scrolled box) is hidden too
        const box = td.getBoundingClientRect();
        if (box.width > 0 && box.right > window.innerWidth) hidden.push('cell: ' + td.textContent);
      }
      for (const th of t.querySelectorAll('th')) {
        const box = th.getBoundingClientRect();
        if (!(box.width > 0 && box.left >= 0 && box.right <= window.innerWidth)) hidden.push(th.textContent);
      }
    }
    const folds = [...document.querySelectorAll('details.microctx-fold')];
    return {
      verdictFirst: !!verdict && tables.length > 0 && !!(verdict.compareDocumentPosition(tables[0]) & Node.DOCUMENT_POSITION_FOLLOWING),
      hiddenHeaders: hidden,
      firstHeaders: tables.map(t => [...t.querySelectorAll('th')].map(th => th.textContent)),
      foldsClosed: folds.every(f => !f.open),
      text: document.body.innerText,
    };
}"""


def read_report(html_path, screenshot) -> dict:
    with browser_page(1100, 1400) as page:
        page.goto(html_path.as_uri())
        page.screenshot(path=str(screenshot))
        return page.evaluate(READING_LAYOUT)


def compare_oracle_and_planted(tmp_path, data) -> tuple[dict, str]:
    """`microctx report compare` of the answers (as an oracle) and the planted submission on `data`
    (public and answers paths), n_boot 200: (its reading layout, its HTML)."""
    from microctx import cli
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.grading.examples import planted_submission

    (tmp_path / "planted.json").write_bytes(dumps(planted_submission(load_answers(data.answers))))
    (tmp_path / "oracle.json").write_bytes(data.answers.read_bytes())
    out = tmp_path / "report"
    argv = ["report", "compare", "--public", str(data.public), "--answers", str(data.answers), "--n-boot", "200"]
    subs = ["--submission", str(tmp_path / "oracle.json"), "--submission", str(tmp_path / "planted.json")]
    assert cli.main([*argv, *subs, "--out", str(out)]) == 0
    html = (out / "compare_candidates.html").read_text()
    return read_report(out / "compare_candidates.html", tmp_path / "compare.png"), html


@pytest.mark.slow
def test_the_compare_report_reads_verdict_first_with_every_column_visible(tmp_path, synthetic):
    layout, html = compare_oracle_and_planted(tmp_path, synthetic)
    assert str(tmp_path) not in html  # no local path
    assert layout["verdictFirst"], layout["firstHeaders"]
    assert "Verdict: oracle has the highest F1, significantly above every other candidate" in layout["text"]
    assert layout["hiddenHeaders"] == [] and layout["foldsClosed"], layout
    assert layout["firstHeaders"][0] == [
        "candidate", "contract", "f1 [95% interval]", "exact records", "false facts", "missed facts", "weak slices", "not judged"
    ]  # fmt: skip
    assert ["slice", "pair", "support", "f1_diff [95% interval]", "p_equal_f1_adjusted", "b10", "b01", "outcome"] in layout[
        "firstHeaders"
    ]
    assert "NaN" not in layout["text"] and " 1 slices" not in layout["text"] and "1 looks" not in layout["text"]


@pytest.mark.slow
def test_the_corpus_report_reads_verdict_first_and_names_the_hub_records(tmp_path):
    """A corpus frozen with a hub record (one issue listing every other, frozen with
    --isolate-hubs): the report's verdict counts it and its table names it, every column visible."""
    from test_bounded import _hub_export

    from microctx import cli

    raw, hub = _hub_export(tmp_path)
    public = tmp_path / "p.json"
    freeze = [
        "freeze",
        str(raw),
        "--public",
        str(public),
        "--answers",
        str(tmp_path / "a.json"),
        "--report",
        str(tmp_path / "r.json"),
    ]
    assert cli.main([*freeze, "--source", "synthetic", "--isolate-hubs"]) == 0
    out = tmp_path / "report"
    assert cli.main(["report", "corpus", "--public", str(public), "--out", str(out)]) == 0
    assert str(tmp_path) not in (out / "corpus_overview.html").read_text()
    layout = read_report(out / "corpus_overview.html", tmp_path / "corpus.png")
    assert layout["verdictFirst"], layout["firstHeaders"]
    assert "1 hub record (more than 50 in-corpus references), named below" in layout["text"]
    assert layout["firstHeaders"][0] == ["issue", "split", "in-corpus references", "component size", "title"]
    assert f"#{hub}\t" in layout["text"] and "\t59\t" in layout["text"]  # the hub, with its in-corpus references
    assert layout["hiddenHeaders"] == [] and layout["foldsClosed"], layout
    assert "NaN" not in layout["text"] and "1 records" not in layout["text"]


def _compared(estimable: bool, significant: bool):
    """A two-candidate comparison as `tables.CompareOutputs` holds it (only what the verdict reads)."""
    from types import SimpleNamespace

    import pandas as pd

    def graded(f1):
        overall = {"slice_kind": "overall", "slice": "all", "f1": f1, "ci_low": f1 - 0.05, "ci_high": f1 + 0.05,
                   "estimable": estimable, "n_components": 40, "no_interval_reason": "" if estimable else "n_eff 3.0 below 10"}  # fmt: skip
        grade = {"exact_records": 1, "test_records": 2, "quality_pass": False}
        return SimpleNamespace(slices=pd.DataFrame([overall]), result=SimpleNamespace(grade=grade))

    paired = pd.DataFrame([{"slice_kind": "overall", "a": "a", "b": "b", "f1_diff": -0.1, "f1_diff_ci_low": -0.15,
                            "f1_diff_ci_high": -0.05, "estimable": estimable, "significant": significant, "n_eff": 12.0,
                            "p_equal_f1_adjusted": 0.001 if significant else 0.4, "no_interval_reason": ""}])  # fmt: skip
    return SimpleNamespace(grades={"a": graded(0.8), "b": graded(0.9)}, paired=paired)


def test_the_compare_verdict_says_what_the_paired_test_allows():
    from microctx.reports import verdicts

    text = verdicts.compare_verdict(_compared(True, True))
    assert text.startswith("## Verdict: **b** has the highest F1, significantly above every other candidate")
    assert "a − b: F1 difference -0.100 [-0.150, -0.050]" in text and "b higher" in text and "1 of 2 test records" in text
    assert "no clear winner: **b** has the highest F1, but not significantly above a" in verdicts.compare_verdict(
        _compared(True, False)
    )
    unjudged = verdicts.compare_verdict(_compared(False, False))
    assert "whether it stays ahead beyond them is not judged" in unjudged and "(no interval: n_eff 3.0 below 10)" in unjudged


def test_compare_costs_and_long_tails_read():
    import pandas as pd

    from microctx.reports import verdicts

    costs = pd.DataFrame(
        {"candidate": ["x"], "peak_memory_bytes": [3 * 2**20], "cost_microdollars": [500_000.0], "model_calls": [None]}
    )
    view = verdicts.compare_costs(costs, records=1000)
    assert list(view.columns) == ["candidate", "peak memory MiB", "dollars per 1,000 records"]  # nobody reports model calls
    assert view.iloc[0].tolist() == ["x", 3.0, 0.5]
    frame = pd.DataFrame({"n": range(15)})
    html = verdicts.with_long_tail(frame, "row")
    assert html.count("<table") == 2 and "3 rows more" in html
    assert "<details" not in verdicts.with_long_tail(frame.head(5), "row")  # no empty fold


@pytest.mark.slow
def test_the_compare_report_on_s8f_keeps_every_cell_in_view(tmp_path, s8f):
    """On s8f nothing has an interval (n_eff 3): the side-by-side slice table says "no interval"
    and leaves the long reason to the verdict above it, so no column runs off the page."""
    layout, _ = compare_oracle_and_planted(tmp_path, s8f)
    assert layout["verdictFirst"] and layout["hiddenHeaders"] == [], layout["hiddenHeaders"]
    assert "rests on component #5112" in layout["text"]  # the reason is still said, in the verdict
