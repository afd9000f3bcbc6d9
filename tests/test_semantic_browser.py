"""The annotation widget in a real JupyterLab, in headless Chromium: annotate three items (two by
button, one by keyboard shortcut), see the progress change, find the three events in the log;
another annotator's labels and notes never reach the page. Slow (a server and a kernel start)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from browser import browser_page, jupyterlab, need_browser, run_all_cells

from microctx.semantic import events as ev
from microctx.semantic.items import StudyFolder, init_folder

ROOT = Path(__file__).resolve().parents[1]
SECRET = "BEN-ONLY-NOTE-7f3a"


@pytest.mark.slow
def test_annotate_three_items_in_jupyterlab(s8f, tmp_path):
    need_browser()
    root = tmp_path / "lab"
    root.mkdir()
    folder = init_folder(ROOT / "studies" / "s8f-conflicts.toml", s8f.public, s8f.answers, root / "study")
    shared = [i for i in folder.assigned("ann") if "ben" in folder.items[i]["annotators"]]
    # ben has labelled every item he shares with ann, with a note only he wrote
    ev.append(
        folder.events_path,
        [
            {"annotator": "ben", "item": i, "kind": "label", "label": "unsure", "note": SECRET, "guideline_version": "1"}
            for i in shared
        ],
    )
    book = nbformat.v4.new_notebook()
    book.cells = [
        nbformat.v4.new_code_cell(f"import microctx\nwidget = microctx.annotate({str(folder.path)!r}, annotator='ann')\nwidget")
    ]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, root / "annotate.ipynb")
    order = folder.assigned("ann")
    with jupyterlab(root, tmp_path) as (base, token), browser_page(1300, 1500) as page:
        run_all_cells(page, base, token, "annotate.ipynb")
        progress = page.locator(".microctx-annotate .microctx-progress")
        try:
            progress.wait_for(timeout=90_000)
        except Exception:
            page.screenshot(path=str(tmp_path / "annotate-failure.png"), full_page=True)
            raise
        assert progress.inner_text() == "0 / 88 labelled"
        first = folder.records[folder.items[order[0]]["record_id"]]
        assert f"#{first['number']}" in page.locator(".microctx-annotate .microctx-title").inner_text()
        for k, label in enumerate(["yes", "no"], 1):
            page.locator(f".microctx-annotate button.microctx-label[data-label='{label}']").click()
            page.wait_for_function(
                "n => document.querySelector('.microctx-progress').innerText === n + ' / 88 labelled'", arg=str(k), timeout=30_000
            )
        page.locator(".microctx-annotate .microctx-note").fill("third by keyboard")
        page.locator(".microctx-annotate").click(position={"x": 5, "y": 5})
        page.keyboard.press("u")  # the shortcut of `unsure`
        page.wait_for_function(
            "() => document.querySelector('.microctx-progress').innerText === '3 / 88 labelled'", timeout=30_000
        )
        page.screenshot(path=str(tmp_path / "annotate.png"), full_page=True)
        content = page.content()
        assert SECRET not in content and "ben" not in page.locator(".microctx-annotate").inner_text()
    events = [e for e in ev.read(folder.events_path) if e["annotator"] == "ann"]
    assert [(e["item"], e["kind"], e["label"]) for e in events] == [
        (order[0], "label", "yes"),
        (order[1], "label", "no"),
        (order[2], "label", "unsure"),
    ]
    assert events[2]["note"] == "third by keyboard"
    assert StudyFolder(folder.path).items[order[0]]["annotators"]  # the folder is still whole
