"""The annotation widget in a real JupyterLab, in headless Chromium: annotate three items (two by
button, one by keyboard shortcut), see the progress change, find the three events in the log;
another annotator's labels and notes never reach the page, and a hostile title is text, not markup.
Then the adjudication widget: the labels side by side without names, a decision with a reason.
Slow (a server and a kernel start)."""

from __future__ import annotations

import json
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
    # a hostile title: shown as text, never run as markup
    document = json.loads((folder.path / "items.json").read_text())
    hostile = folder.items[folder.assigned("ann")[0]]["record_id"]
    document["records"][hostile]["title"] = '<img src=x onerror="window.__pwned=1">'
    (folder.path / "items.json").write_text(json.dumps(document))
    folder = StudyFolder(folder.path)
    # a disagreement for the adjudicator, between two others
    disputed = next(i for i in folder.items if folder.items[i]["annotators"] == ["ben", "cat"])
    ev.append(
        folder.events_path,
        [
            {"annotator": a, "item": disputed, "kind": "label", "label": x, "note": "", "guideline_version": "1"}
            for a, x in (("ben", "yes"), ("cat", "no"))
        ],
    )
    book = nbformat.v4.new_notebook()
    book.cells = [
        nbformat.v4.new_code_cell(f"import microctx\nwidget = microctx.annotate({str(folder.path)!r}, annotator='ann')\nwidget")
    ]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(book, root / "annotate.ipynb")
    book.cells = [nbformat.v4.new_code_cell(f"import microctx\nmicroctx.adjudicate({str(folder.path)!r})")]
    nbformat.write(book, root / "adjudicate.ipynb")
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
        assert page.evaluate("window.__pwned") is None
        run_all_cells(page, base, token, "adjudicate.ipynb", workspace="adjudicate")
        widget = page.locator(".microctx-annotate >> visible=true")
        widget.locator(".microctx-given").wait_for(timeout=90_000)
        total = widget.locator(".microctx-progress").inner_text()
        assert total.startswith("0 / ") and total.endswith(" decided")
        given = widget.locator(".microctx-given").inner_text()
        assert "ben" not in given and "cat" not in given and "ann" not in given and "=" not in given  # names hidden
        widget.locator(".microctx-note").fill("the body names both versions")
        shown = widget.locator(".microctx-title").inner_text()
        widget.locator("button.microctx-label[data-label='no']").click()
        visible = "[...document.querySelectorAll('.microctx-progress')].find(e => e.offsetParent !== null)"
        page.wait_for_function(f"() => {visible}.innerText.startsWith('1 / ')", timeout=30_000)
        page.screenshot(path=str(tmp_path / "adjudicate.png"), full_page=True)
    events = [e for e in ev.read(folder.events_path) if e["annotator"] == "ann"]
    assert [(e["item"], e["kind"], e["label"]) for e in events] == [
        (order[0], "label", "yes"),
        (order[1], "label", "no"),
        (order[2], "label", "unsure"),
    ]
    assert events[2]["note"] == "third by keyboard"
    decisions = [e for e in ev.read(folder.events_path) if e["kind"] == "adjudicate"]
    assert len(decisions) == 1 and decisions[0]["label"] == "no" and decisions[0]["reason"] == "the body names both versions"
    assert f"#{folder.records[folder.items[decisions[0]['item']]['record_id']]['number']}" in shown
    assert StudyFolder(folder.path).items[order[0]]["annotators"]  # the folder is still whole
