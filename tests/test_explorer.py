"""The corpus explorer's data side (filters, record view, neighbours, grade outcomes) on the
synthetic corpus, each expectation recomputed here in plain Python; and the widget driven the way
a click drives it (trait changes), without a browser (tests/test_lab_browser.py has the browser)."""

from __future__ import annotations

import re

import pytest

import microctx
from microctx.grading.examples import planted_submission
from microctx.lab.explorer import ANY, Explorer, ExplorerData, Filters, highlight


@pytest.fixture(scope="module")
def data(synthetic_corpus):
    return ExplorerData(synthetic_corpus)


def _text(r):
    return (r["title"] + "\n" + r["body"]).lower()


def _components(records):
    """Union-find over in-corpus `#N` references and identical titles/bodies, done naively."""
    numbers = {r["number"] for r in records}
    parent = {n: n for n in numbers}

    def find(n):
        while parent[n] != n:
            n = parent[n]
        return n

    def union(a, b):
        parent[find(a)] = find(b)

    by_title, by_body = {}, {}
    for r in records:
        for m in re.finditer(r"(?<![0-9A-Za-z_])#([0-9]{1,7})\b", r["title"] + "\n" + r["body"]):
            if int(m.group(1)) in numbers:
                union(r["number"], int(m.group(1)))
        union(r["number"], by_title.setdefault(r["title"], r["number"]))
        union(r["number"], by_body.setdefault(r["body"], r["number"]))
    return {n: find(n) for n in numbers}


def test_filters_match_plain_python(data, synthetic_corpus):
    records = synthetic_corpus.records

    def expect(pred):
        return [i for i, r in enumerate(records) if pred(r)]

    assert list(data.filter()) == list(range(60))
    assert list(data.filter(split="test")) == expect(lambda r: r["split"] == "test")
    assert list(data.filter(state="OPEN")) == expect(lambda r: r["state"] == "OPEN") and len(data.filter(state="OPEN")) == 37
    assert list(data.filter(label="bug")) == expect(lambda r: "bug" in (r["labels"] or []))
    assert list(data.filter(text="MisMatch")) == expect(lambda r: "mismatch" in _text(r))
    assert list(data.filter(text="duplicate of")) == expect(lambda r: "duplicate of" in _text(r))
    assert list(data.filter(text="naïve café")) == expect(lambda r: "naïve café" in _text(r)) != []
    assert list(data.filter(split="test", label="bug", text="the")) == expect(
        lambda r: r["split"] == "test" and "bug" in (r["labels"] or []) and "the" in _text(r)
    )
    assert list(data.filter(label="no-such-label")) == [] and list(data.filter(split="nope")) == []
    assert list(data.filter(text="zzzz")) == [] and list(data.filter(text="\0")) == []
    # the few-candidates path and the whole-buffer path agree
    everything = data._text_hits(b"e", data.filter())
    assert list(data.filter(label="bug", text="e")) == [i for i in data.filter(label="bug") if everything[i]]


def test_components_and_neighbours(data, synthetic_corpus):
    records = synthetic_corpus.records
    roots = _components(records)
    for i, r in enumerate(records):
        same = sorted(j for j, s in enumerate(records) if roots[s["number"]] == roots[r["number"]])
        assert sorted(data.component_rows(i)) == same, r["id"]
        assert sorted(data.filter(component=f"#{r['number']}")) == same
    chain = data.filter(component="issue-146")
    assert {records[i]["number"] for i in chain} >= set(range(140, 147))
    assert list(data.filter(component="#9999")) == []  # not in the corpus
    # #146's neighbours: what it references first (#145), then the rest of its component
    i = data.row_of("#146")
    near = data.neighbours(i)
    assert records[near[0]]["number"] == 145 and i not in near
    assert set(near) == set(data.component_rows(i)) - {i}
    # identical titles put two records in one component
    assert data.table["component"].iat[data.row_of(151)] == data.table["component"].iat[data.row_of(152)]


def test_record_view_highlights_references_duplicates_and_cues(data, synthetic_corpus):
    records = synthetic_corpus.records
    dup = next(i for i, r in enumerate(records) if "Duplicate of #" in r["body"])
    view = data.record_html(dup)
    target = int(re.search(r"Duplicate of #(\d+)", records[dup]["body"]).group(1))
    assert (
        f'<mark class="microctx-dup" style="background:#ffcdd2">Duplicate of <mark class="microctx-ref" '
        f'style="background:#bbdefb">#{target}</mark></mark>' in view
    )
    assert f"duplicate of: #{target}" in view
    upper = data.row_of(115)  # k=14: "A MISMATCH in upper case"
    assert '<mark class="microctx-cue" style="background:#fff59d">MISMATCH</mark>' in data.record_html(upper)
    assert "cue words: disagree, mismatch" in data.record_html(upper)  # k=14 also has "disagree"
    labelled = data.filter(label="bug")[0]
    assert '<span class="microctx-label"' in data.record_html(labelled) and ">bug</span>" in data.record_html(labelled)
    assert (
        highlight("<b>#12 & x#3</b>")
        == '&lt;b&gt;<mark class="microctx-ref" style="background:#bbdefb">#12</mark> &amp; x#3&lt;/b&gt;'
    )
    # the option line marks duplicates
    assert data.option(dup).startswith(f"#{records[dup]['number']} [") and "[dup] " in data.option(dup)


def test_grade_outcomes_per_record(synthetic_corpus, synthetic_answers):
    result = microctx.grade(synthetic_answers, planted_submission(synthetic_answers))
    data = ExplorerData(synthetic_corpus, grade=result)
    wrong = {}
    for row in result.facts:
        if row.outcome in ("fp", "fn") and row.record_id:
            wrong.setdefault(row.record_id, set()).add((row.outcome, row.kind, row.value))
    assert {k: set(v) for k, v in data.fact_outcomes.items()} == wrong
    assert [synthetic_corpus.records[i]["id"] for i in data.filter(errors_only=True)] == [
        r["id"] for r in synthetic_corpus.records if r["id"] in wrong
    ]
    rid = next(iter(wrong))
    view = data.record_html(data.row_of(rid))
    for _outcome, kind, value in wrong[rid]:
        assert f"{kind}:{value}" in view
    assert ("missed" in view) == any(o == "fn" for o, _, _ in wrong[rid])
    # the same from a facts.csv path and from a frame
    assert ExplorerData(synthetic_corpus, grade=result.facts_frame()).fact_outcomes == data.fact_outcomes


def test_widget_filters_counts_and_opens_records(synthetic_corpus, synthetic_answers):
    result = microctx.grade(synthetic_answers, planted_submission(synthetic_answers))
    explorer = microctx.explore(synthetic_corpus, grade=result)
    assert isinstance(explorer, Explorer)
    assert ">60</b> of 60 records match" in explorer.count.value and len(explorer.results.options) == 60
    explorer.label.value = "bug"
    bugs = len(explorer.data.filter(label="bug"))
    assert f">{bugs}</b> of 60 records match" in explorer.count.value and len(explorer.results.options) == bugs
    explorer.text.value = "zzzz"
    assert ">0</b> of 60" in explorer.count.value and explorer.results.options == ()
    explorer.text.value, explorer.label.value = "", ANY
    explorer.results.value = explorer.data.row_of("#146")
    assert "#146 " in explorer.view.value
    buttons = [c for c in explorer.nearby.children if getattr(c, "description", "").startswith("#")]
    assert buttons[0].description == "#145"
    buttons[0].click()  # one click to the neighbour
    assert "<div style='font-size:1.15em;font-weight:bold'>#145 " in explorer.view.value
    whole = [c for c in explorer.nearby.children if getattr(c, "description", "") == "list its component"][0]
    whole.click()
    assert len(explorer.results.options) == len(explorer.data.component_rows(explorer.data.row_of(145)))
    explorer.open("#424242")
    assert "no record #424242" in explorer.view.value
    assert Filters().split == ANY


def test_the_explorer_derives_each_record_once_through_the_record_table(synthetic_corpus, monkeypatch):
    """One derivation: building the explorer matches R once per record, in the record table."""
    from microctx.contract import patterns
    from microctx.grading.records import record_table

    calls = []
    real = patterns._reference_matches
    monkeypatch.setattr(patterns, "_reference_matches", lambda data: calls.append(1) or real(data))
    data = ExplorerData(synthetic_corpus)
    assert len(calls) == len(synthetic_corpus.records) == 60
    monkeypatch.undo()
    table = record_table(synthetic_corpus)
    for column in ("id", "number", "references", "duplicate_targets", "cue_words", "component", "component_size"):
        assert data.table[column].tolist() == table[column].tolist(), column


def test_the_marks_are_exactly_what_the_answers_derive(s8f_corpus):
    """On every s8f record the marked spans give back the derived references, duplicate targets
    and cue words (the same matchers, not a second set of patterns)."""
    from microctx.contract.patterns import derive_utf8, spans_utf8

    marked_records = 0
    for r in s8f_corpus.records:
        title, body = r["title"].encode(), r["body"].encode()
        text = title + b"\n" + body
        spans = spans_utf8(title, body)
        refs = sorted({int(text[a + 1 : b]) for a, b, k in spans if k == "ref"})
        dups = sorted({int(text[a:b].rsplit(b"#", 1)[1]) for a, b, k in spans if k == "dup"})
        cues = sorted({text[a:b].decode().lower() for a, b, k in spans if k == "cue"})
        assert (refs, dups, cues) == tuple(derive_utf8(title, body)), r["id"]
        assert all(a >= len(title) + 1 for a, _, k in spans if k == "cue")
        marked_records += bool(spans)
    assert marked_records > 500


def test_marks_nest_escape_and_keep_their_offsets():
    """A duplicate marker holds its reference; a dotted capital I (two bytes that fold to one)
    before a cue word moves no later mark; markup in the text stays text."""
    from microctx.lab.explorer import _record_marked

    ref = '<mark class="microctx-ref" style="background:#bbdefb">'
    dup = '<mark class="microctx-dup" style="background:#ffcdd2">'
    cue = '<mark class="microctx-cue" style="background:#fff59d">'
    title, body = _record_marked("<i>#5</i>", "İİ İnconsistent & conflict; duplicate of #7 x#8")
    assert title == f"&lt;i&gt;{ref}#5</mark>&lt;/i&gt;"
    assert body == f"İİ {cue}İnconsistent</mark> &amp; {cue}conflict</mark>; {dup}duplicate of {ref}#7</mark></mark> x#8"
    assert _record_marked("Conflict", "no cue here")[0] == "Conflict"  # a title's cue word is no fact
    # a duplicate marker cut by the title's end is marked on both sides
    title, body = _record_marked("Closing: duplicate of", "#12 as said")
    assert title == f"Closing: {dup}duplicate of</mark>" and body == f"{dup}{ref}#12</mark></mark> as said"


@pytest.mark.parametrize(
    "url, shown",
    [
        ("javascript:alert(document.domain)//", "#"),
        (" JavaScript:alert(1)", "#"),
        ("data:text/html,<script>alert(1)</script>", "#"),
        ("https://github.com/o/r/issues/1?a=1&b='2'", "https://github.com/o/r/issues/1?a=1&amp;b=&#x27;2&#x27;"),
    ],
)
def test_a_record_link_is_live_only_when_http(tmp_path, synthetic, url, shown):
    """The corpus is data: a record's `url` that is not http(s) (a `javascript:` link, which in
    JupyterLab runs with the server's token) shows as `#`, as in the reports."""
    import orjson

    document = orjson.loads(synthetic.public.read_bytes())
    document["records"][0]["url"] = url
    public = tmp_path / "public.json"
    public.write_bytes(orjson.dumps(document))
    page = ExplorerData(microctx.load_corpus(public)).record_html(0)
    assert re.findall(r"<a href='([^']*)'", page) == [shown]
