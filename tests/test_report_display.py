"""What a reader sees in a report: no warning box, integer counts as integers, the compare
report's whole cost table (pandas would cut it to "... 29 columns"). On the synthetic corpus:
two real runs of the exact-sql candidate (so the run manifests carry every cost column), then
the compare and corpus reports, read back from the executed notebooks."""

from __future__ import annotations

import json
import re

import pytest

from microctx import cli
from microctx.reports import build as reports
from microctx.reports import tables

FLOAT_COUNT = re.compile(r"<td>-?\d+\.0</td>")


def _outputs(path):
    book = json.loads(path.read_text())
    return [(i, o) for i, c in enumerate(book["cells"]) for o in c.get("outputs", [])]


def _no_warning_boxes(path):
    for i, o in _outputs(path):
        assert o.get("output_type") != "error", (i, o)
        assert not (o.get("output_type") == "stream" and o.get("name") == "stderr"), (i, o.get("text"))
        assert "Warning" not in json.dumps(o.get("data", {}).get("text/plain", "")), (i, o)


@pytest.mark.slow
def test_compare_report_shows_the_whole_cost_table_and_integer_counts(synthetic, tmp_path):
    subs = []
    for name in ("sql-a", "sql-b"):
        sub = tmp_path / f"{name}.json"
        assert cli.main(["run", "exact-sql", "--public", str(synthetic.public), "--submission", str(sub)]) == 0
        subs.append(str(sub))
    costs = tables.cost_table(subs, ["sql-a", "sql-b"])
    out = tmp_path / "deep" / "compare"
    reports.compare_report(str(synthetic.public), str(synthetic.answers), subs, out, progress=False)
    executed = out / "compare_candidates.ipynb"
    _no_warning_boxes(executed)
    shown = [o["data"] for _, o in _outputs(executed) if "counters.tool_calls" in "".join(o.get("data", {}).get("text/html", ""))]
    assert len(shown) == 1
    summary, text = "".join(shown[0]["text/html"]), "".join(shown[0]["text/plain"])
    header = summary[summary.index("<thead>") : summary.index("</thead>")]
    assert header.count("<th") > 21  # wider than pandas' default 20 columns: it would cut it
    assert "<td>...</td>" not in summary and "<th>...</th>" not in summary and "columns]" not in text
    for column in costs.columns:
        assert f">{column}</th>" in header, column
    assert not FLOAT_COUNT.search(summary), FLOAT_COUNT.findall(summary)[:5]


@pytest.mark.slow
def test_corpus_report_counts_are_integers(synthetic, tmp_path):
    out = tmp_path / "corpus"
    reports.corpus_report(str(synthetic.public), out, progress=False)
    executed = out / "corpus_overview.ipynb"
    _no_warning_boxes(executed)
    tables_html = [
        "".join(o["data"]["text/html"])
        for _, o in _outputs(executed)
        if "<table" in "".join(o.get("data", {}).get("text/html", ""))
    ]
    assert len(tables_html) >= 3
    for h in tables_html:
        assert not FLOAT_COUNT.search(h), FLOAT_COUNT.findall(h)[:5]
