"""Altair charts for the report notebooks, and the static images a report carries.

Two kinds of functions:
- tidy tables from the corpus or from slice tables (`label_counts`, `fact_density`, ...): data
  in, small DataFrame out, so a chart never embeds record bodies;
- chart builders (`state_by_split`, `labels_by_split`, `slice_f1`, ...): a DataFrame in, an
  altair chart out.
`show(chart, name, charts_dir)` renders a chart with vl-convert, writes `<name>.png` and
`<name>.svg` into `charts_dir` (when given) and returns a static PNG for the notebook to display,
so the exported HTML needs no JavaScript and no network. `show_interactive` also writes a
self-contained interactive `<name>.html` (the vega bundle inlined) and embeds it in an iframe.
"""

from __future__ import annotations

import html
import os
from pathlib import Path

import altair as alt
import pandas as pd

from microctx.contract.patterns import (
    CUE_WORDS,
    duplicate_targets,
    issue_text,
    references,
)
from microctx.contract.split import SPLITS
from microctx.files import atomic_write

SPLIT_COLORS = alt.Scale(domain=list(SPLITS), range=["#4c78a8", "#f58518", "#54a24b"])
STATUS_COLORS = alt.Scale(domain=["judged", "weak", "too small"], range=["#4c78a8", "#e45756", "#bab0ac"])
PNG_SCALE = 2  # PNGs are rendered at twice the chart's size and shown at half, for sharp text
ROW_HEIGHT = 14


# ---------------------------------------------------------------- rendering and display

def render(chart: alt.TopLevelMixin) -> tuple[bytes, str]:
    """(PNG bytes, SVG text) of a chart, rendered by vl-convert (no browser, no network)."""
    return _render_dict(chart.to_dict())


def _render_dict(spec: dict) -> tuple[bytes, str]:
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(spec)
    return vlc.svg_to_png(svg, scale=PNG_SCALE), svg  # rasterising the SVG skips a second vega run


def render_spec(spec: dict) -> bytes:
    """The PNG of a Vega-Lite spec (what the notebook renderer `microctx.notebook_setup()` shows)."""
    return _render_dict(spec)[0]


def save(chart: alt.TopLevelMixin, name: str, charts_dir: str | os.PathLike) -> tuple[bytes, str]:
    """Render a chart and write `<name>.png` and `<name>.svg` into `charts_dir` (atomically)."""
    png, svg = render(chart)
    folder = Path(charts_dir)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / f"{name}.png", png)
    atomic_write(folder / f"{name}.svg", svg.encode())
    return png, svg


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def show(chart: alt.TopLevelMixin, name: str, charts_dir: str | os.PathLike | None = None):
    """Render a chart, save it when `charts_dir` is set, and return a static PNG to display.

    The PNG lands in the notebook as an image output, which the HTML export inlines as a data
    URI: the report shows every chart with no script and no network.
    """
    if charts_dir:
        png, _ = save(chart, name, charts_dir)
    else:
        png, _ = render(chart)
    from IPython.display import Image

    width, _ = png_size(png)
    return Image(data=png, format="png", width=width // PNG_SCALE, metadata={"chart": name})


def show_interactive(chart: alt.TopLevelMixin, name: str, charts_dir: str | os.PathLike | None = None,
                     height: int | None = None):
    """The static PNG (as `show`) plus the live chart: a self-contained `<name>.html` with the
    vega libraries inlined, written to `charts_dir` and embedded in an iframe (no network).

    The iframe is as tall as the rendered chart (plus a margin), so nothing is clipped; pass
    `height` (pixels) to override."""
    from IPython.display import HTML

    page = chart.to_html(inline=True, embed_options={"renderer": "svg", "actions": False})
    if charts_dir:
        Path(charts_dir).mkdir(parents=True, exist_ok=True)
        atomic_write(Path(charts_dir) / f"{name}.html", page.encode())
    image = show(chart, name, charts_dir)
    if height is None:
        height = png_size(image.data)[1] // PNG_SCALE + 40
    # inside a <div>: IPython warns (a red UserWarning box in a report) about HTML that starts with <iframe
    frame = HTML(f'<div class="microctx-interactive"><iframe title="{html.escape(name)}" style="width:100%;height:{height}px;'
                 f'border:0" srcdoc="{html.escape(page, quote=True)}"></iframe></div>')
    return image, frame


def interactive_page(chart: alt.TopLevelMixin) -> str:
    """The self-contained HTML page `show_interactive` writes (vega, vega-lite and vega-embed inlined)."""
    return chart.to_html(inline=True, embed_options={"renderer": "svg", "actions": False})


# ---------------------------------------------------------------- corpus tables

def _exploded_labels(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[["id", "split", "created_at", "labels"]].explode("labels").dropna(subset=["labels"])
    return rows.rename(columns={"labels": "label"})


def label_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Records carrying each label, per split: columns label, split, records (every label)."""
    rows = _exploded_labels(frame)
    counts = rows.groupby(["label", "split"]).size().rename("records").reset_index()
    total = counts.groupby("label")["records"].transform("sum")
    return counts.assign(total=total).sort_values(["total", "label", "split"], ascending=[False, True, True],
                                                  ignore_index=True)


def fact_density(frame: pd.DataFrame) -> pd.DataFrame:
    """Per split and kind (references, duplicate targets), how many records carry n of them.

    Columns split, kind, n (clipped at 10, shown as "10+"), records. Counted from the public
    text with the same patterns the answers use.
    """
    texts = [issue_text(t, b) for t, b in zip(frame["title"], frame["body"])]
    per_record = pd.DataFrame({
        "split": frame["split"].to_numpy(),
        "references": [len(references(t)) for t in texts],
        "duplicate targets": [len(duplicate_targets(t)) for t in texts],
    }).melt(id_vars="split", var_name="kind", value_name="n")
    per_record["n"] = per_record["n"].clip(upper=10)
    return per_record.groupby(["split", "kind", "n"]).size().rename("records").reset_index()


def cue_word_counts(records: pd.DataFrame) -> pd.DataFrame:
    """Records whose body holds each cue word, per split (all five words listed, zero included)."""
    rows = records[["split", "cue_words"]].explode("cue_words").dropna()
    counts = rows.groupby(["cue_words", "split"]).size()
    full = pd.MultiIndex.from_product([CUE_WORDS, SPLITS], names=["cue_word", "split"])
    return counts.reindex(full, fill_value=0).rename("records").reset_index()


def timeline_events(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per created or closed event: columns id, split, event, date (UTC, day precision)."""
    created = frame[["id", "split", "created_at"]].rename(columns={"created_at": "date"}).assign(event="created")
    closed = frame[["id", "split", "closed_at"]].rename(columns={"closed_at": "date"}).dropna(subset=["date"])
    events = pd.concat([created, closed.assign(event="closed")], ignore_index=True)
    events["date"] = events["date"].dt.tz_convert("UTC").dt.tz_localize(None).dt.floor("D")
    return events


def component_size_counts(records: pd.DataFrame) -> pd.DataFrame:
    """How many split components of each size there are, per split: columns split, size, components."""
    sizes = records.groupby(["component", "split"]).size().rename("size").reset_index()
    return sizes.groupby(["split", "size"]).size().rename("components").reset_index()


# ---------------------------------------------------------------- corpus charts

def state_by_split(frame: pd.DataFrame) -> alt.Chart:
    counts = frame.groupby(["split", "state"]).size().rename("records").reset_index()
    return alt.Chart(counts, title="Records by state and split").mark_bar().encode(
        x=alt.X("split:N", sort=list(SPLITS), title="split"),
        xOffset=alt.XOffset("state:N"),
        y=alt.Y("records:Q", title="records"),
        color=alt.Color("state:N", title="state"),
        tooltip=["split", "state", "records"],
    ).properties(width=320, height=240)


def labels_by_split(counts: pd.DataFrame) -> alt.Chart:
    """Every label, most common first, records per split on a log axis (the tail spans 3 orders)."""
    order = list(dict.fromkeys(counts["label"]))
    counts = counts.assign(base=0.8)  # a log axis has no zero: bars start just below 1
    return alt.Chart(counts, title=f"Records per label and split ({len(order)} labels, log scale)").mark_bar().encode(
        y=alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=220)),
        yOffset=alt.YOffset("split:N", sort=list(SPLITS)),
        x=alt.X("records:Q", scale=alt.Scale(type="log", domainMin=0.8), title="records (log scale)"),
        x2="base:Q",
        color=alt.Color("split:N", scale=SPLIT_COLORS),
        tooltip=["label", "split", "records", alt.Tooltip("total:Q", title="all splits")],
    ).properties(width=420, height=max(200, ROW_HEIGHT * 1.6 * len(order)))


def fact_density_chart(density: pd.DataFrame) -> alt.Chart:
    return alt.Chart(density).mark_bar().encode(
        x=alt.X("n:O", title="per record (10 = 10 or more)"),
        xOffset=alt.XOffset("split:N", sort=list(SPLITS)),
        y=alt.Y("records:Q", scale=alt.Scale(type="symlog"), title="records (symlog scale)"),
        color=alt.Color("split:N", scale=SPLIT_COLORS),
        tooltip=["kind", "split", "n", "records"],
    ).properties(width=300, height=220).facet(
        column=alt.Column("kind:N", title=None)
    ).properties(title="Reference and duplicate density: records with n references / duplicate targets")


def cue_words_chart(counts: pd.DataFrame) -> alt.Chart:
    return alt.Chart(counts, title="Records whose body holds each cue word").mark_bar().encode(
        x=alt.X("cue_word:N", sort=list(CUE_WORDS), title="cue word"),
        xOffset=alt.XOffset("split:N", sort=list(SPLITS)),
        y=alt.Y("records:Q", title="records"),
        color=alt.Color("split:N", scale=SPLIT_COLORS),
        tooltip=["cue_word", "split", "records"],
    ).properties(width=380, height=220)


_NOON = pd.Timedelta(hours=12)


def _epoch_ms(days: pd.Series) -> pd.Series:
    """Naive UTC days as integer milliseconds since the epoch, at noon: how both charts of the
    timeline carry dates, so the brush (on a UTC scale) and the label filter compare numbers, never
    local-time strings. A day is drawn as a step from its midnight to the next, centred on its
    noon, so brushing most of a day's step takes that day."""
    return (days + _NOON - pd.Timestamp(0)) // pd.Timedelta(milliseconds=1)


def daily_events(events: pd.DataFrame) -> pd.DataFrame:
    """Created and closed issues per day, every day from the first event to the last (days
    without one are 0): columns date (epoch ms, UTC noon of the day), day (YYYY-MM-DD), event, issues."""
    days = pd.date_range(events["date"].min(), events["date"].max(), freq="D")
    full = pd.MultiIndex.from_product([days, ["created", "closed"]], names=["date", "event"])
    daily = events.groupby(["date", "event"]).size().reindex(full, fill_value=0).rename("issues").reset_index()
    daily["issues"] = daily["issues"].astype(int)
    daily.insert(1, "day", daily["date"].dt.strftime("%Y-%m-%d"))
    daily["date"] = _epoch_ms(daily["date"])
    return daily


def timeline_with_labels(events: pd.DataFrame, frame: pd.DataFrame) -> alt.VConcatChart:
    """Created/closed per day (every day, zero-filled); brushing a date range filters the label
    chart below to the records created in it (static renders show the whole range).

    The label chart lists every label in a fixed order (most common first) and its x domain
    always includes 0..1, so a brushed range without issues shows zero-length bars, not an empty
    chart or an "Infinite extent" warning.
    """
    brush = alt.selection_interval(encodings=["x"], name="brush")
    daily = daily_events(events)
    half_day = 12 * 3600 * 1000
    domain = [int(daily["date"].min()) - half_day, int(daily["date"].max()) + half_day]  # first midnight .. last day's end
    timeline = alt.Chart(daily, title="Issues created and closed per day, every day (drag to filter the labels below)").mark_line(
        strokeWidth=1.2, interpolate="step").encode(
        x=alt.X("date:T", title="day (UTC)", scale=alt.Scale(type="utc", nice=False, domain=domain)),
        y=alt.Y("issues:Q", title="issues per day"),
        color=alt.Color("event:N", scale=alt.Scale(domain=["created", "closed"], range=["#4c78a8", "#e45756"])),
        tooltip=[alt.Tooltip("day:N", title="day (UTC)"), "event", "issues"],
    ).add_params(brush).properties(width=640, height=200)
    labels = _exploded_labels(frame)
    labels = labels.assign(date=_epoch_ms(labels["created_at"].dt.tz_convert("UTC").dt.tz_localize(None).dt.floor("D")))
    per_day = labels.groupby(["date", "label"]).size().rename("records").reset_index()
    order = list(per_day.groupby("label")["records"].sum().sort_values(ascending=False, kind="mergesort").index)
    # one row per label with 0 records and no date: it takes the brush's start as its date, so it
    # passes every brush and each label keeps a (possibly zero) bar: the filtered data is never empty
    zeros = pd.DataFrame({"date": pd.array([None] * len(order), dtype="Int64"), "label": order, "records": 0})
    per_day = pd.concat([per_day, zeros], ignore_index=True).rename(columns={"date": "created"})
    label_chart = alt.Chart(per_day, title="Labels of the issues created in the brushed range (all days when nothing is brushed)").mark_bar().encode(
        y=alt.Y("label:N", title=None, scale=alt.Scale(domain=order), axis=alt.Axis(labelLimit=220)),
        x=alt.X("sum(records):Q", title="records created in the range", scale=alt.Scale(domain={"unionWith": [0, 1]})),
        tooltip=["label", alt.Tooltip("sum(records):Q", title="records")],
    ).transform_calculate(
        date="datum.created === null ? (brush && brush.date ? brush.date[0] : 0) : datum.created"
    ).transform_filter(brush).properties(width=640, height=ROW_HEIGHT * max(1, len(order)))
    return alt.vconcat(timeline, label_chart)


def component_sizes_chart(counts: pd.DataFrame) -> alt.Chart:
    return alt.Chart(counts, title="Split components by size (records joined by titles, bodies or references)").mark_bar().encode(
        x=alt.X("size:O", title="records in the component"),
        xOffset=alt.XOffset("split:N", sort=list(SPLITS)),
        y=alt.Y("components:Q", scale=alt.Scale(type="symlog"), title="components (symlog scale)"),
        color=alt.Color("split:N", scale=SPLIT_COLORS),
        tooltip=["split", "size", "components"],
    ).properties(width=520, height=240)


# ---------------------------------------------------------------- slice charts

def slice_status(table: pd.DataFrame) -> pd.Series:
    """'weak', 'too small' or 'judged' per slice row."""
    status = pd.Series("judged", index=table.index)
    status[table["too_small"].astype(bool)] = "too small"
    status[table["weak"].astype(bool)] = "weak"
    return status


def _slice_rows(table: pd.DataFrame) -> pd.DataFrame:
    rows = table.copy()
    rows["row"] = rows["slice_kind"] + ": " + rows["slice"].astype(str)
    rows["status"] = slice_status(rows)
    return rows


def slice_f1(table: pd.DataFrame) -> alt.LayerChart:
    """F1 per slice (in table order: worst first within a kind) with its 95% bootstrap interval,
    the overall F1 as a rule; weak slices red, too-small ones grey."""
    rows = _slice_rows(table).dropna(subset=["f1"])
    order = list(rows["row"])
    overall = float(table.loc[table["slice_kind"] == "overall", "f1"].iloc[0])
    base = alt.Chart(rows).encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=260)))
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("ci_low:Q", scale=alt.Scale(domain=[0, 1]), title="F1 with 95% component-bootstrap interval"),
        x2="ci_high:Q", color=alt.Color("status:N", scale=STATUS_COLORS, title="slice"))
    points = base.mark_point(filled=True, size=40).encode(
        x="f1:Q", color=alt.Color("status:N", scale=STATUS_COLORS),
        tooltip=["slice_kind", "slice", "support", "tp", "fp", "fn", alt.Tooltip("f1:Q", format=".3f"),
                 alt.Tooltip("ci_low:Q", format=".3f"), alt.Tooltip("ci_high:Q", format=".3f"), "status"])
    rule = alt.Chart(pd.DataFrame({"overall": [overall]})).mark_rule(strokeDash=[4, 3], color="black").encode(x="overall:Q")
    return alt.layer(bars, points, rule, title=f"F1 per slice, worst first (overall F1 {overall:.3f}, dashed)").properties(
        width=420, height=ROW_HEIGHT * len(order))


def precision_recall(table: pd.DataFrame) -> alt.FacetChart:
    """Precision and recall per slice side by side, each with its 95% Wilson interval."""
    rows = _slice_rows(table)
    order = list(rows["row"])
    long = pd.concat([
        rows.assign(metric=m, value=rows[m], low=rows[f"{m}_ci_low"], high=rows[f"{m}_ci_high"])
        for m in ("precision", "recall")
    ])[["row", "slice_kind", "slice", "support", "status", "metric", "value", "low", "high"]].dropna(subset=["value"])
    base = alt.Chart().encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=260)))
    ci = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1]), title="value with 95% Wilson interval"), x2="high:Q",
        color=alt.Color("status:N", scale=STATUS_COLORS, title="slice"))
    point = base.mark_point(filled=True, size=36).encode(
        x="value:Q", color=alt.Color("status:N", scale=STATUS_COLORS),
        tooltip=["slice_kind", "slice", "metric", "support", alt.Tooltip("value:Q", format=".3f"),
                 alt.Tooltip("low:Q", format=".3f"), alt.Tooltip("high:Q", format=".3f")])
    return alt.layer(ci, point, data=long).properties(width=260, height=ROW_HEIGHT * len(order)).facet(
        column=alt.Column("metric:N", title=None, sort=["precision", "recall"])
    ).properties(title="Precision and recall per slice")


def outcomes_by_kind(table: pd.DataFrame) -> alt.Chart:
    """tp, fp and fn counts per fact kind (these rows sum to the grade's totals)."""
    kinds = table[table["slice_kind"] == "fact_kind"]
    long = kinds.melt(id_vars=["slice"], value_vars=["tp", "fp", "fn"], var_name="outcome", value_name="facts")
    return alt.Chart(long, title="Fact outcomes per kind").mark_bar().encode(
        y=alt.Y("slice:N", title="fact kind", sort=list(kinds["slice"])),
        x=alt.X("facts:Q", title="facts", axis=alt.Axis(tickCount=6)),
        color=alt.Color("outcome:N", scale=alt.Scale(domain=["tp", "fn", "fp"], range=["#54a24b", "#e45756", "#f58518"])),
        order=alt.Order("outcome:N"),
        tooltip=["slice", "outcome", "facts"],
    ).properties(width=420, height=150)


# ---------------------------------------------------------------- comparison charts

def compare_f1(compare: pd.DataFrame, judged_only: bool = True) -> alt.Chart:
    """F1 with its interval per slice, one mark per candidate on the same row."""
    rows = _slice_rows(compare)
    if judged_only:
        rows = rows[~rows["too_small"].astype(bool)]
    rows = rows.dropna(subset=["f1"])
    order = list(dict.fromkeys(rows["row"]))
    candidates = list(dict.fromkeys(rows["candidate"]))
    base = alt.Chart(rows).encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=260)),
        yOffset=alt.YOffset("candidate:N", sort=candidates),
        color=alt.Color("candidate:N", sort=candidates))
    ci = base.mark_rule(strokeWidth=2).encode(x=alt.X("ci_low:Q", scale=alt.Scale(domain=[0, 1]),
                                                      title="F1 with 95% component-bootstrap interval"), x2="ci_high:Q")
    point = base.mark_point(filled=True, size=30).encode(
        x="f1:Q", tooltip=["candidate", "slice_kind", "slice", "support", alt.Tooltip("f1:Q", format=".3f"),
                           alt.Tooltip("ci_low:Q", format=".3f"), alt.Tooltip("ci_high:Q", format=".3f")])
    return alt.layer(ci, point, title="F1 per slice and candidate (slices with enough support)").properties(
        width=420, height=ROW_HEIGHT * max(1, len(candidates)) * len(order) / 1.5)


def paired_f1_diff(paired: pd.DataFrame) -> alt.Chart:
    """F1(a) - F1(b) per slice with its paired-bootstrap interval; intervals that exclude 0 in red."""
    rows = paired[~paired["too_small"].astype(bool)].dropna(subset=["f1_diff"]).copy()
    rows["row"] = rows["slice_kind"] + ": " + rows["slice"].astype(str)
    rows["interval"] = rows["f1_diff_excludes_zero"].map({True: "excludes 0", False: "includes 0"})
    order = list(dict.fromkeys(rows["row"]))
    pairs = list(dict.fromkeys(rows["pair"]))
    base = alt.Chart(rows).encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=260)),
        yOffset=alt.YOffset("pair:N", sort=pairs),
        color=alt.Color("interval:N", scale=alt.Scale(domain=["excludes 0", "includes 0"], range=["#e45756", "#4c78a8"])))
    ci = base.mark_rule(strokeWidth=2).encode(x=alt.X("f1_diff_ci_low:Q", title="F1(a) - F1(b), 95% paired bootstrap"),
                                              x2="f1_diff_ci_high:Q")
    point = base.mark_point(filled=True, size=36, opacity=1).encode(
        x="f1_diff:Q", shape=alt.Shape("pair:N", sort=pairs), tooltip=["pair", "slice_kind", "slice", alt.Tooltip("f1_diff:Q", format=".3f"),
                                alt.Tooltip("f1_diff_ci_low:Q", format=".3f"), alt.Tooltip("f1_diff_ci_high:Q", format=".3f"),
                                "b10", "b01", alt.Tooltip("mcnemar_p:Q", format=".3g")])
    zero = alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="zero:Q")
    return alt.layer(ci, point, zero, title="Paired F1 difference per slice (a - b, same records)").properties(
        width=420, height=ROW_HEIGHT * max(1, len(pairs)) * len(order) / 1.5)


def cost_chart(costs: pd.DataFrame, column: str) -> alt.Chart:
    """One bar per candidate for a numeric cost column of the run manifests."""
    return alt.Chart(costs.dropna(subset=[column]), title=f"Run cost: {column}").mark_bar().encode(
        y=alt.Y("candidate:N", title=None), x=alt.X(f"{column}:Q", title=column),
        tooltip=["candidate", column]).properties(width=360, height=ROW_HEIGHT * 2 * len(costs))
