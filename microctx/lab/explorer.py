"""The corpus explorer for JupyterLab: `microctx.explore(corpus, grade=None)`.

Filter records by split, state, label, component and free text; open a record to read its title,
body and labels with the `#N` references, the duplicate markers and the cue words highlighted;
step to the records of its split component (and to the records it references) in one click.
Given a grade (a GradeResult, a fact table DataFrame, or a `<grade>.facts.csv` path), each
record shows its missed (false negative) and false (false positive) facts, and the records can
be filtered to those in error.

Two parts:
- `ExplorerData`: the columns every filter needs, from the one record table of grading
  (`microctx.grading.records.record_table`: references, duplicate targets, cue words and
  components derived once per record with the answers' own functions), and `filter(...)`
  returning row positions: plain data, fast on 100,000 records, tested without a browser. The
  record view marks what the answers derive by the same matchers
  (`microctx.contract.patterns.spans_utf8`).
- `Explorer`: the ipywidgets front end (works offline: the widgets' JupyterLab extension ships
  with the `jupyterlab_widgets` package).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import pandas as pd

from microctx.contract.patterns import spans_utf8
from microctx.corpus.public import Corpus
from microctx.grading.records import load_facts, record_table

ANY = "(any)"
LISTED = 200  # matching records listed at once (the count shows how many match)
BODY_SHOWN = 20_000  # characters of a body shown in the record view
_MARK = {
    "dup": '<mark class="microctx-dup" style="background:#ffcdd2">',
    "ref": '<mark class="microctx-ref" style="background:#bbdefb">',
    "cue": '<mark class="microctx-cue" style="background:#fff59d">',
}


@dataclass
class Filters:
    split: str = ANY
    state: str = ANY
    label: str = ANY
    component: str = ""  # a record id or number: the records of its component
    text: str = ""  # substring of title + body, case-insensitive for ASCII letters
    errors_only: bool = False  # with a grade: records with a missed or false fact


def _text_buffer(records: list[dict]) -> tuple[bytes, np.ndarray]:
    """(the text buffer; its record starts): every record's lower-cased (ASCII) title + body in
    one buffer, 0-separated, so free text is found with bytes.find, at C speed, then mapped back
    to records by offset."""
    lowered: list[bytes] = []
    starts = np.zeros(len(records) + 1, dtype=np.int64)
    offset = 0
    for i, r in enumerate(records):
        text = r["title"].encode().lower() + b"\n" + r["body"].encode().lower()
        lowered.append(text)
        offset += len(text) + 1
        starts[i + 1] = offset
    return b"\0".join(lowered) + b"\0", starts


class ExplorerData:
    """The corpus as filterable columns (built once), plus per-record grade outcomes."""

    def __init__(self, corpus: Corpus, grade=None):
        self.corpus = corpus
        records = corpus.records
        # the one record table of grading: facts derived once per record, split components
        table = record_table(corpus)
        table["split"], table["state"] = table["split"].astype("category"), table["state"].astype("category")
        table["title"] = [r["title"] for r in records]
        table["has_duplicate"] = table["duplicate_targets"].map(bool)
        self.table = table
        self._text, self._starts = _text_buffer(records)
        self._index_table(table, table["number"].tolist(), table["references"].tolist())
        self.fact_outcomes: dict[str, list[tuple[str, str, str]]] = {}
        self._in_error = np.zeros(len(records), dtype=bool)
        if grade is not None:
            self.set_grade(grade)

    def _index_table(self, table: pd.DataFrame, numbers: list[int], refs: list[list[int]]) -> None:
        """The lookups the filters use: positions, categories, label rows, component rows, citers."""
        self._codes = {
            column: (table[column].cat.categories, table[column].cat.codes.to_numpy()) for column in ("split", "state")
        }
        self.position = {x: i for i, x in enumerate(numbers)}
        self.id_position = {rid: i for i, rid in enumerate(table["id"])}
        self.splits = list(table["split"].cat.categories)
        self.states = list(table["state"].cat.categories)
        exploded = table["labels"].explode().dropna()
        self.labels = list(exploded.value_counts().index)  # most common first
        self._label_rows = {
            label: np.asarray(rows, dtype=np.int64) for label, rows in exploded.groupby(exploded, sort=False).groups.items()
        }
        roots_array = table["component"].to_numpy()
        order = np.argsort(roots_array, kind="stable")
        bounds = np.flatnonzero(np.r_[True, roots_array[order][1:] != roots_array[order][:-1], True])
        self._component_rows = {int(roots_array[order[a]]): order[a:b] for a, b in zip(bounds[:-1], bounds[1:])}
        self._cited_by: dict[int, list[int]] = {}
        for row, cited in enumerate(refs):
            for number in cited:
                if number in self.position:
                    self._cited_by.setdefault(number, []).append(row)

    def __len__(self) -> int:
        return len(self.table)

    def set_grade(self, grade) -> None:
        """Per record, its missed (fn) and false (fp) facts, from a GradeResult, a fact-table frame or a path."""
        if isinstance(grade, pd.DataFrame):
            facts = grade
        elif hasattr(grade, "facts_frame"):
            facts = grade.facts_frame()
        else:
            facts = load_facts(grade)
        wrong = facts[facts["outcome"].isin(["fp", "fn"])]
        outcomes: dict[str, list[tuple[str, str, str]]] = {}
        for rid, kind, value, outcome in zip(wrong["record_id"], wrong["kind"], wrong["value"], wrong["outcome"]):
            outcomes.setdefault(rid, []).append((outcome, kind, value))
        self.fact_outcomes = outcomes
        self._in_error = self.table["id"].isin(list(outcomes)).to_numpy()

    def component_rows(self, record: str | int) -> np.ndarray:
        """Row positions of the records in the split component of a record (`issue-N`, `#N` or N as
        text; an int is a row position)."""
        i = record if isinstance(record, (int, np.integer)) else self.row_of(record)
        if i is None:
            return np.empty(0, dtype=np.int64)
        return self._component_rows[self.table["component"].iat[i]]

    def row_of(self, record: str | int) -> int | None:
        """The row position of a record: `issue-N`, `#N` or `N` as text, or the issue number N as an int."""
        if isinstance(record, int):
            return self.position.get(record)
        text = str(record).strip()
        if text in self.id_position:
            return self.id_position[text]
        digits = text.lstrip("#")
        return self.position.get(int(digits)) if digits.isdigit() else None

    def filter(self, filters: Filters | None = None, **kw) -> np.ndarray:
        """Row positions (in corpus order) of the records that pass every filter."""
        f = filters or Filters(**kw)
        mask = np.ones(len(self.table), dtype=bool)
        for column, value in (("split", f.split), ("state", f.state)):
            if value != ANY:
                categories, codes = self._codes[column]
                mask &= codes == (categories.get_loc(value) if value in categories else -2)
        if f.label != ANY:
            keep = np.zeros(len(mask), dtype=bool)
            keep[self._label_rows.get(f.label, np.empty(0, dtype=np.int64))] = True
            mask &= keep
        if f.component.strip():
            keep = np.zeros(len(mask), dtype=bool)
            keep[self.component_rows(f.component)] = True
            mask &= keep
        if f.errors_only and self.fact_outcomes:
            mask &= self._in_error
        rows = np.flatnonzero(mask)
        text = f.text.strip().encode().lower()
        if text and b"\0" not in text:
            rows = rows[self._text_hits(text, rows)]
        elif text:
            rows = rows[:0]
        return rows

    def _text_hits(self, needle: bytes, rows: np.ndarray) -> np.ndarray:
        """Which of `rows` hold `needle` (lower-cased bytes) in their title + body."""
        buffer, starts = self._text, self._starts
        if len(rows) * 8 < len(self):  # few candidates: look in each
            return np.fromiter((buffer.find(needle, starts[r], starts[r + 1] - 1) >= 0 for r in rows), bool, len(rows))
        found = np.zeros(len(self), dtype=bool)
        pos = buffer.find(needle)
        while pos >= 0:
            row = int(np.searchsorted(starts, pos, side="right")) - 1
            found[row] = True
            pos = buffer.find(needle, int(starts[row + 1]))  # the next record
        return found[rows]

    # ------------------------------------------------------------ the record view

    def option(self, i: int) -> str:
        t = self.table
        flags = ("[dup] " if t["has_duplicate"].iat[i] else "") + ("[errors] " if t["id"].iat[i] in self.fact_outcomes else "")
        title = " ".join(str(t["title"].iat[i]).split())
        return f"#{t['number'].iat[i]} [{t['split'].iat[i]}/{t['state'].iat[i]}] {flags}{title[:90]}"

    def neighbours(self, i: int) -> list[int]:
        """Rows one click away, nearest first: the records it references (in the corpus), the
        records that reference it, then the rest of its split component."""
        refs = [self.position[n] for n in self.table["references"].iat[i] if n in self.position]
        cited_by = self._cited_by.get(int(self.table["number"].iat[i]), [])
        same = [int(j) for j in self._component_rows[self.table["component"].iat[i]]]
        return [j for j in dict.fromkeys(refs + cited_by + same) if j != i]

    def record_html(self, i: int) -> str:
        from microctx.reports.text import safe_url  # a link from data is live only when http(s)

        record = self.corpus.records[i]
        t = self.table
        labels = (
            " ".join(
                f'<span class="microctx-label" style="background:#e8eef7;border-radius:3px;padding:0 4px">'
                f"{html.escape(label)}</span>"
                for label in record["labels"] or []
            )
            or "<i>no labels</i>"
        )
        refs = list(t["references"].iat[i])
        dups = list(t["duplicate_targets"].iat[i])
        cues = list(t["cue_words"].iat[i])
        body = record["body"]
        cut = len(body) > BODY_SHOWN
        title_html, body_html = _record_marked(record["title"], body[:BODY_SHOWN])
        facts = ""
        if self.fact_outcomes or record["split"] == "test":
            wrong = self.fact_outcomes.get(record["id"], [])
            if self.fact_outcomes and not wrong and record["split"] == "test":
                facts = "<div class='microctx-facts'>grade: every fact right</div>"
            elif wrong:
                missed = ", ".join(f"{k}:{html.escape(v)}" for o, k, v in wrong if o == "fn") or "none"
                false = ", ".join(f"{k}:{html.escape(v)}" for o, k, v in wrong if o == "fp") or "none"
                facts = (
                    f"<div class='microctx-facts'><b style='color:#c62828'>missed</b> {missed}<br>"
                    f"<b style='color:#e65100'>false</b> {false}</div>"
                )
        size = int(t["component_size"].iat[i])
        return (
            f"<div class='microctx-record'><div style='font-size:1.15em;font-weight:bold'>#{record['number']} "
            f"{title_html}</div>"
            f"<div>{html.escape(record['id'])} · split <b>{record['split']}</b> · state <b>{html.escape(record['state'])}</b>"
            f" · created {html.escape(record['created_at'])}"
            + (f" · closed {html.escape(record['closed_at'])}" if record.get("closed_at") else "")
            + f" · <a href='{html.escape(safe_url(record['url']))}' target='_blank' rel='noopener'>source</a></div>"
            f"<div style='margin:4px 0'>{labels}</div>"
            f"<div>references: {', '.join(f'#{n}' for n in refs) or 'none'} · duplicate of: "
            f"{', '.join(f'#{n}' for n in dups) or 'none'} · cue words: {', '.join(cues) or 'none'} · component of "
            f"{size} record{'s' if size != 1 else ''}</div>{facts}"
            f"<pre style='white-space:pre-wrap;max-height:420px;overflow:auto;background:#fafafa;padding:6px'>"
            f"{body_html}{'…' if cut else ''}</pre></div>"
        )


def highlight(text: str) -> str:
    """Escaped body text with what the answers derive from it marked: duplicate markers, `#N`
    references and cue words (`_record_marked` with no title)."""
    return _record_marked("", text)[1]


def _record_marked(title: str, body: str) -> tuple[str, str]:
    """(title, body) as escaped HTML with the spans of `contract.patterns.spans_utf8` marked: the
    facts the answers derive, found by the same matchers over the same `title + "\n" + body`
    (a cue word only in the body, where it counts)."""
    head, rest = title.encode(), body.encode()
    spans = spans_utf8(head, rest)
    data = head + b"\n" + rest
    return _marked(data, spans, 0, len(head)), _marked(data, spans, len(head) + 1, len(data))


def _marked(data: bytes, spans: list[tuple[int, int, str]], start: int, end: int) -> str:
    """`data[start:end]` escaped, with each span (sorted by start, longer first; nested or
    apart) cut to that range and wrapped in its <mark>."""
    out: list[str] = []
    pos, open_ends = start, list[int]()

    def text(upto: int) -> None:
        nonlocal pos
        out.append(html.escape(data[pos:upto].decode(errors="replace"), quote=False))
        pos = upto

    for a, b, kind in spans:
        a = max(a, start)
        while open_ends and open_ends[-1] <= a:
            text(open_ends.pop())
            out.append("</mark>")
        b = min(b, end, *open_ends[-1:])
        if a >= b:
            continue
        text(a)
        out.append(_MARK[kind])
        open_ends.append(b)
    while open_ends:
        text(open_ends.pop())
        out.append("</mark>")
    text(end)
    return "".join(out)


class Explorer:
    """The ipywidgets front end of ExplorerData; `Explorer(...).widget` is what a cell shows."""

    def __init__(self, data: ExplorerData):
        import ipywidgets as w

        self.data = data
        self.rows = np.arange(len(data))
        layout = w.Layout(width="auto")
        self.split = w.Dropdown(options=[ANY, *data.splits], description="split", layout=layout)
        self.state = w.Dropdown(options=[ANY, *data.states], description="state", layout=layout)
        self.label = w.Dropdown(options=[ANY, *data.labels], description="label", layout=w.Layout(width="280px"))
        self.component = w.Text(
            placeholder="#N or issue-N", description="component", continuous_update=False, layout=w.Layout(width="240px")
        )
        self.text = w.Text(
            placeholder="words in title or body", description="text", continuous_update=False, layout=w.Layout(width="320px")
        )
        self.errors = w.Checkbox(
            value=False, description="records with grade errors only", indent=False, disabled=not data.fact_outcomes
        )
        self.count = w.HTML()
        self.results = w.Select(options=[], rows=14, layout=w.Layout(width="100%"))
        self.view = w.HTML("<i>choose a record</i>")
        self.nearby = w.HBox(layout=w.Layout(flex_flow="row wrap"))
        for control in (self.split, self.state, self.label, self.component, self.text, self.errors):
            control.observe(self._refilter, names="value")
        self.results.observe(self._chosen, names="value")
        self.widget = w.VBox(
            [
                w.HBox([self.split, self.state, self.label], layout=w.Layout(flex_flow="row wrap")),
                w.HBox([self.component, self.text, self.errors], layout=w.Layout(flex_flow="row wrap")),
                self.count,
                self.results,
                self.nearby,
                self.view,
            ]
        )
        self.widget.add_class("microctx-explorer")
        self.count.add_class("microctx-count")
        self.results.add_class("microctx-results")
        self.view.add_class("microctx-view")
        self._refilter()

    def filters(self) -> Filters:
        return Filters(
            self.split.value, self.state.value, self.label.value, self.component.value, self.text.value, self.errors.value
        )

    def _refilter(self, _change=None) -> None:
        self.rows = self.data.filter(self.filters())
        shown = self.rows[:LISTED]
        self.count.value = f"<b class='microctx-matches'>{len(self.rows):,}</b> of {len(self.data):,} records match" + (
            f" (first {LISTED} listed)" if len(self.rows) > LISTED else ""
        )
        self.results.options = [(self.data.option(int(i)), int(i)) for i in shown]

    def _chosen(self, change) -> None:
        if change["new"] is not None:
            self.open(int(change["new"]))

    def open(self, record: int | str) -> None:
        """Show a record (a row position, an id, a number or `#N`) and its neighbours."""
        import ipywidgets as w

        i = record if isinstance(record, (int, np.integer)) else self.data.row_of(record)
        if i is None:
            self.view.value = f"<i>no record {html.escape(str(record))} in this corpus</i>"
            return
        i = int(i)
        buttons = []
        for j in self.data.neighbours(i)[:40]:
            number = int(self.data.table["number"].iat[j])
            button = w.Button(description=f"#{number}", tooltip=self.data.option(j), layout=w.Layout(width="auto"))
            button.add_class("microctx-neighbour")
            button.on_click(lambda _b, j=j: self.open(j))
            buttons.append(button)
        size = len(self.data.component_rows(i))
        header = w.HTML(
            f"<b>one click away</b> (references, cited by, then the rest of its component of {size:,}):"
            if buttons
            else "<i>no other record in its component, no reference into the corpus</i>"
        )
        whole = w.Button(description="list its component", layout=w.Layout(width="auto"), button_style="info")
        whole.on_click(lambda _b, n=int(self.data.table["number"].iat[i]): setattr(self.component, "value", f"#{n}"))
        self.nearby.children = [header, *buttons, *([whole] if size > 1 else [])]
        self.view.value = self.data.record_html(i)  # last: once it shows, its neighbours are in place

    def _repr_mimebundle_(self, **kw):
        return self.widget._repr_mimebundle_(**kw)


def explore(corpus: Corpus | str, grade=None) -> Explorer:
    """Open the corpus explorer in a notebook cell: `microctx.explore(corpus)` or
    `microctx.explore(corpus, grade=result)` (a GradeResult, a fact-table frame or a facts.csv path)."""
    from microctx.corpus.public import load_corpus

    if not isinstance(corpus, Corpus):
        corpus = load_corpus(corpus)
    return Explorer(ExplorerData(corpus, grade))
