"""The corpus explorer in a real JupyterLab, in headless Chromium: run the notebook, filter, see
the count change, open a record, step to a neighbour. Offline: the server listens on 127.0.0.1
only and the widgets' front end ships with the `jupyterlab_widgets` package.

Slow (a server and a kernel start); it still runs in `make test`.
"""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from browser import browser_page, jupyterlab, need_browser, run_all_cells

SHOTS = os.environ.get("MICROCTX_SCREENSHOTS")  # a folder to keep the screenshots in (optional)


@pytest.fixture
def lab(tmp_path, synthetic):
    """A JupyterLab server on 127.0.0.1 with a token, serving a folder with explore.ipynb."""
    need_browser()
    root = tmp_path / "lab"
    root.mkdir()
    book = nbformat.v4.new_notebook()
    book.cells = [
        nbformat.v4.new_code_cell(
            f"import microctx\nresult = None\ncorpus = microctx.load_corpus({str(synthetic.public)!r})\ncorpus"
        ),
        nbformat.v4.new_code_cell("microctx.explore(corpus)"),
    ]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, root / "explore.ipynb")
    with jupyterlab(root, tmp_path) as (base, token):
        yield base, token, root


def _shot(page, path: Path, name: str) -> None:
    page.screenshot(path=str(path / name), full_page=True)
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / name), full_page=True)


@pytest.mark.slow
def test_explorer_in_jupyterlab(lab, tmp_path, synthetic_corpus):
    base, token, _ = lab
    records = synthetic_corpus.records
    mismatch = [r for r in records if "mismatch" in (r["title"] + "\n" + r["body"]).lower()]
    assert 0 < len(mismatch) < len(records)
    with browser_page(1400, 1600) as page:
        run_all_cells(page, base, token, "explore.ipynb")
        count = page.locator(".microctx-explorer .microctx-count")
        try:
            count.wait_for(timeout=90_000)
        except Exception:
            _shot(page, tmp_path, "lab-failure.png")
            raise
        assert "60 of 60 records match" in count.inner_text()
        assert "Corpus" in page.locator(".microctx-view").first.inner_text() or page.locator("table.microctx-fields").count() >= 1

        box = page.locator(".microctx-explorer input[placeholder='words in title or body']")
        box.fill("mismatch")
        box.press("Enter")
        page.wait_for_function(
            "n => document.querySelector('.microctx-count').innerText.startsWith(n + ' of 60')",
            arg=str(len(mismatch)),
            timeout=30_000,
        )
        page.wait_for_function(
            "n => document.querySelectorAll('.microctx-results select option').length === n", arg=len(mismatch), timeout=30_000
        )  # the list follows the count
        texts = page.locator(".microctx-results select option").all_inner_texts()
        assert [t.replace("\xa0", " ").split(" ")[0] for t in texts] == [f"#{r['number']}" for r in mismatch]
        first = mismatch[0]
        page.locator(".microctx-results select").select_option(index=0)
        view = page.locator(".microctx-explorer .microctx-view")
        view.get_by_text(f"#{first['number']} ", exact=False).first.wait_for(timeout=30_000)
        assert page.locator(".microctx-explorer .microctx-view mark.microctx-cue").count() >= 1
        _shot(page, tmp_path, "explorer.png")

        # a record's neighbours, one click away: #146 ends a chain of references (#140 .. #146)
        box.fill("")
        box.press("Enter")
        comp = page.locator(".microctx-explorer input[placeholder='#N or issue-N']")
        comp.fill("#146")
        comp.press("Enter")
        from microctx.lab.explorer import ExplorerData

        data = ExplorerData(synthetic_corpus)
        component = sorted(int(data.table["number"].iat[i]) for i in data.component_rows(data.row_of("#146")))
        assert set(range(140, 147)) <= set(component)
        page.wait_for_function(
            "n => document.querySelectorAll('.microctx-results select option').length === n", arg=len(component), timeout=30_000
        )
        numbers = [
            int(t.replace("\xa0", " ").split(" ")[0][1:])
            for t in page.locator(".microctx-results select option").all_inner_texts()
        ]
        assert numbers == component and f"{len(component)} of 60" in count.inner_text()
        page.locator(".microctx-results select").select_option(index=numbers.index(146))
        view.get_by_text("#146 ", exact=False).first.wait_for(timeout=30_000)
        # what it references comes first
        page.wait_for_function(
            "() => { const b = document.querySelector('.microctx-neighbour'); return b && b.innerText.trim() === '#145'; }",
            timeout=30_000,
        )
        page.locator(".microctx-neighbour").first.click()
        page.wait_for_function(
            "() => document.querySelector('.microctx-explorer .microctx-view').innerText.includes('#145 ')", timeout=30_000
        )
        _shot(page, tmp_path, "explorer-neighbour.png")
