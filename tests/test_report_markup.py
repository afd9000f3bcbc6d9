"""Reports of a corpus whose text is markup: nothing from the data becomes a live element.

Titles, label names, the corpus's source string, the public file's name and the submission's
file name are all set to HTML/Markdown payloads; the grade and corpus reports are made through
the CLI, and their HTML is parsed (html.parser, and the interactive charts' srcdoc documents too):
no element carries an event handler, no script has a source, no image points at the payloads'
targets, and every payload is present as text, so the test would see it were it live.
"""

from __future__ import annotations

import base64
import copy
import json
from html.parser import HTMLParser
from pathlib import Path

import orjson
import pytest

from microctx.cli import main
from microctx.corpus.public import corpus_to_export

PAYLOADS = [
    "<img src=x onerror=alert(1)>",
    "<script src=//evil.example/x.js></script>",
    "[click](javascript:alert(2)) **bold** <b onmouseover=alert(3)>hover</b>",
    "</script><script>alert(4)</script>",
    "`<iframe src=//evil.example>` & <svg onload=alert(5)>",
]


class Elements(HTMLParser):
    """Every start tag with its attributes, and the text, of one HTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        (self.scripts if self._in_script else self.text).append(data)


def parse(html: str) -> Elements:
    doc = Elements()
    doc.feed(html)
    doc.close()
    return doc


def assert_inert(doc: Elements, where: str) -> None:
    for tag, attrs in doc.tags:
        handlers = [name for name in attrs if name.lower().startswith("on")]
        assert not handlers, f"{where}: <{tag}> has event handlers {handlers}"
        assert not (tag == "script" and attrs.get("src")), f"{where}: a script with a source: {attrs}"
        for name in ("src", "href"):
            value = (attrs.get(name) or "").strip().lower()
            assert not value.startswith("javascript:"), f"{where}: <{tag} {name}={value}>"
            assert "evil.example" not in value and value != "x", f"{where}: <{tag} {name}={value}>"
        assert tag not in ("iframe",) or not attrs.get("src"), f"{where}: an iframe with a source"
    for script in doc.scripts:
        assert not any(f"alert({n})" == script.strip() for n in range(1, 6)), f"{where}: a live script {script[:80]}"


def render_markdown(text: str) -> str:
    """Markdown as a renderer that lets raw HTML through renders it (markdown-it, as JupyterLab and
    most site generators are set up)."""
    import markdown_it

    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table").render(text)


def test_the_markdown_slice_table_shows_markup_labels_as_text():
    """`slices.md` is pasted into write-ups and rendered anywhere: a label that is HTML or a
    Markdown link stays text, and a `|` in a label does not split its cell."""
    import pandas as pd

    from microctx.reports.views import markdown_table

    names = [f"label: {p}" for p in PAYLOADS] + ["label: a|b"]
    frame = pd.DataFrame({"slice": names, "support": range(len(names)), "judged": ["ok"] * len(names)})
    doc = parse(render_markdown(markdown_table(frame)))
    assert_inert(doc, "slices.md")
    cells = [t for t in doc.text if t.strip()]
    assert [c for c in cells if c.startswith("label: ")] == names  # each whole, as text, in its own cell
    assert not any(tag == "a" for tag, _ in doc.tags)


@pytest.fixture(scope="module")
def marked(s8f_corpus, tmp_path_factory):
    """A corpus whose titles and labels are markup, its answers, and an imperfect submission."""
    folder = tmp_path_factory.mktemp("markup")
    rows = copy.deepcopy(corpus_to_export(s8f_corpus)[:80])
    for i, row in enumerate(rows):
        row["title"] = f"{PAYLOADS[i % len(PAYLOADS)]} #{i}"
        row["labels"] = [{"name": PAYLOADS[i % len(PAYLOADS)]}] + row["labels"]
    raw = folder / "raw.json"
    raw.write_bytes(orjson.dumps(rows))
    public = folder / "<img src=x onerror=alert(1)>.json"
    answers, report = folder / "answers.json", folder / "report.json"
    assert (
        main(
            [
                "freeze",
                str(raw),
                "--public",
                str(public),
                "--answers",
                str(answers),
                "--report",
                str(report),
                "--source",
                PAYLOADS[1] + " " + PAYLOADS[2],
            ]
        )
        == 0
    )
    submission = json.loads(answers.read_text())
    for answer in submission["answers"][::2]:  # missed labels and a wrong state: examples to show
        answer["labels"] = []
        answer["state"] = "OPEN" if answer["state"] == "CLOSED" else "CLOSED"
    sub_path = folder / "<b onmouseover=alert(3)>sub.json"
    sub_path.write_text(json.dumps(submission))
    return folder, public, answers, sub_path


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["grade", "corpus"])
def test_a_report_of_markup_has_no_live_element_from_the_data(marked, kind, tmp_path):
    folder, public, answers, submission = marked
    out = tmp_path / "report"
    argv = ["report", kind, "--public", str(public), "--out", str(out)]
    if kind == "grade":
        argv += ["--answers", str(answers), "--submission", str(submission)]
    assert main(argv) == 0
    html = next(out.glob("*.html")).read_text()
    doc = parse(html)
    assert_inert(doc, "report")
    # the charts are inlined as SVG documents (issue 24): their labels are the payloads, as text
    svgs = [
        base64.b64decode(attrs["src"].split(",", 1)[1]).decode()
        for tag, attrs in doc.tags
        if tag == "img" and (attrs.get("src") or "").startswith("data:image/svg+xml;base64,")
    ]
    assert svgs, "the charts are inlined as SVG"
    for svg in svgs:
        assert_inert(parse(svg), "chart SVG")
        assert "<script" not in svg.lower() and "foreignobject" not in svg.lower()
    if kind == "corpus":  # the label chart names every label: markup shown as text, escaped in the SVG
        assert any("&lt;img src=x onerror=alert(1)&gt;" in svg for svg in svgs)
    text = " ".join(doc.text)
    if kind == "grade":  # slices.md, the table for write-ups, names the labels: as text once rendered
        exported = parse(render_markdown((out / "slices.md").read_text()))
        assert_inert(exported, "slices.md")
        assert "label: <img src=x onerror=alert(1)>" in " ".join(exported.text)
    if kind == "grade":  # the missed-examples table shows the titles, as text
        assert "<img src=x onerror=alert(1)> #" in text and "</script><script>alert(4)</script> #" in text
        assert "**bold**" in text or "\\*\\*bold" in text
    else:  # the corpus header shows the file name and the source, as text
        assert "<img src=x onerror=alert(1)>.json" in text
        assert "<script src=//evil.example/x.js></script>" in text
        frames = [attrs["srcdoc"] for tag, attrs in doc.tags if tag == "iframe" and attrs.get("srcdoc")]
        assert frames, "the interactive chart is embedded"
        for frame in frames:
            inner = parse(frame)
            assert_inert(inner, "interactive chart")
        charts = Path(out / "charts")
        for page in charts.glob("*.html"):
            assert_inert(parse(page.read_text()), page.name)


@pytest.mark.slow
def test_a_frontier_report_of_markup_names_has_no_live_element(marked, tmp_path):
    """Candidate names (past the CLI's safe-name check: the notebook is run directly), the verdicts
    that name the baseline, and a run manifest's candidate (the held-out ledger line) are markup:
    the frontier report shows them as text."""
    from microctx.contract.canonical import dumps
    from microctx.reports import build

    folder, public, answers, submission = marked
    oracle, imperfect = tmp_path / "oracle.json", tmp_path / "imperfect.json"
    gold = json.loads(answers.read_text())
    oracle.write_text(
        json.dumps(
            {
                "schema": "fak-microcontext-submission/1",
                "corpus_sha256": gold["corpus_sha256"],
                "answers": gold["answers"],
                "aggregates": gold["aggregates"],
            }
        )
    )
    imperfect.write_bytes(submission.read_bytes())
    for path, cpu in ((oracle, 7200.0), (imperfect, 3600.0)):
        path.with_suffix(".run.json").write_bytes(
            dumps({"candidate": PAYLOADS[4], "cpu_seconds": cpu, "counters": {"model_calls": 0}})
        )
    names = [PAYLOADS[0] + " base", PAYLOADS[2]]
    out = tmp_path / "frontier"
    params = {
        "public": str(public),
        "answers": str(answers),
        "submissions": [str(imperfect), str(oracle)],
        "names": names,
        "baseline": "",
        "cost": "dollars",
        "cpu_dollars_per_hour": 1.0,
        "n_boot": 50,
        "seed": 0,
    }
    build.make_report("frontier", params, out, progress=False)
    doc = parse((out / "frontier_report.html").read_text())
    assert_inert(doc, "frontier report")
    text = " ".join(doc.text)
    assert "pays off when a net-true fact is worth more than $" in text and "Baseline:" in text
    for name in names:  # in the verdict list, the baseline line and the ledger lines: as text
        assert text.count(name) >= 2, name
    assert "'<iframe src=//evil.example>' & <svg onload=alert(5)>" in text  # the manifest's candidate, as text
