"""Charts in a user's own notebook need no network: `%load_ext microctx` (or
`microctx.notebook_setup()`) in a kernel selects the offline renderer; an executed notebook's chart outputs are images and its HTML export loads no
script from anywhere. The control (altair's default renderer, without microctx) does reference
the CDN, so the check can fail."""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from nbclient import NotebookClient

from microctx.reports.build import html_export

REMOTE = re.compile(r"https?://[^\"' ]*(jsdelivr|unpkg|cdnjs)|<script[^>]*\bsrc\s*=", re.IGNORECASE)

CHART = (
    "import altair as alt, pandas as pd\n"
    "alt.Chart(pd.DataFrame({'x': ['a', 'b'], 'n': [3, 5]}), title='plain altair').mark_bar().encode(x='x', y='n')"
)


def _run(tmp_path, cells: list[str], name: str):
    book = nbformat.v4.new_notebook()
    book.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    path = tmp_path / f"{name}.ipynb"
    nbformat.write(book, path)
    return book, path


def _outputs(book) -> list[dict]:
    return [o for c in book.cells for o in c.get("outputs", [])]


@pytest.mark.slow
def test_charts_in_a_users_notebook_are_offline_images(tmp_path, synthetic):
    book, path = _run(
        tmp_path,
        [
            "import microctx\n%load_ext microctx",
            CHART,
            f"corpus = microctx.load_corpus({str(synthetic.public)!r})\nmicroctx.charts.state_by_split(corpus.frame())",
            "import altair as alt\nalt.renderers.active",
        ],
        "offline",
    )
    outputs = _outputs(book)
    charts = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(charts) == 2  # the plain altair chart and the microctx chart
    for output in charts:
        assert not REMOTE.search(json.dumps(output)), "a chart output references the network"
        assert output["metadata"]["image/png"]["width"] > 50  # shown at its own size (rendered at twice it)
        assert "text/html" not in output["data"]
    assert "'microctx'" in outputs[-1]["data"]["text/plain"]
    assert not any("error" == o.get("output_type") or o.get("name") == "stderr" for o in outputs), outputs
    page = html_export(path).decode()  # raises if the export loads a script from the network
    assert page.count("data:image/png;base64,") >= 2 and not REMOTE.search(page)


@pytest.mark.slow
def test_control_altair_default_renderer_loads_from_the_cdn(tmp_path):
    book, _ = _run(tmp_path, [CHART], "control")
    assert any(REMOTE.search(json.dumps(o)) for o in _outputs(book))
