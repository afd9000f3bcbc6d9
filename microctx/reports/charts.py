"""Altair charts for the report notebooks, and the static images a report carries.

Two kinds of functions:
- tidy tables from the corpus or from slice tables (`label_counts`, `fact_density`, ...): data
  in, small DataFrame out, so a chart never embeds record bodies;
- chart builders (`state_by_split`, `labels_by_split`, `slice_f1`, ...): a DataFrame in, an
  altair chart out.
Rendering, the theme and the exported figures are `microctx.reports.figures` (`show`, `save`,
`render`, `show_interactive`, re-exported here for the notebooks' `charts.show(...)`).
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from microctx.contract.patterns import (
    CUE_WORDS,
    duplicate_targets,
    issue_text,
    references,
)
from microctx.contract.split import SPLITS
from microctx.reports.figures import (  # noqa: F401  (the notebooks call them as charts.show, ...)
    PNG_MAX_PIXELS,
    PNG_SCALE,
    Figure,
    interactive_page,
    png_scale,
    png_size,
    render,
    render_spec,
    save,
    show,
    show_interactive,
    svg_size,
)

SPLIT_COLORS = alt.Scale(domain=list(SPLITS), range=["#4c78a8", "#f58518", "#54a24b"])
# One colour meaning in every slice, comparison and grade chart: red = a finding that needs
# attention (a weak slice, a significant paired difference, a missed fact), blue = judged with no
# finding, grey = not judged (too little support, or too few components for an interval: hollow).
RED, BLUE, GREY, GREEN, ORANGE = "#e45756", "#4c78a8", "#bab0ac", "#54a24b", "#f58518"
BROWN = "#9d755d"  # not estimable: not judged like "too small", but a status of its own in every legend
STATUS_ORDER = ["judged", "weak", "too small", "not estimable"]
STATUS_COLORS = alt.Scale(domain=STATUS_ORDER, range=[BLUE, RED, GREY, BROWN])
PAIRED_ORDER = ["significant", "not significant", "not judged"]
PAIRED_COLORS = alt.Scale(domain=PAIRED_ORDER, range=[RED, BLUE, GREY])
ROW_HEIGHT = 14


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
    # no "drag to filter" here: the same chart is the static image; the notebook says how to brush
    timeline = alt.Chart(daily, title="Issues created and closed per day, every day").mark_line(
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


def component_sizes_chart(counts: pd.DataFrame) -> alt.TopLevelMixin:
    """Records per split held in components of each size (so one giant component is one tall bar,
    labelled with its size and share), on a log axis whose bars start below 1 (a count of 1 is
    drawn); the number of components of each size is written on its bar."""
    rows = counts.copy()
    rows["records"] = rows["size"] * rows["components"]
    rows["share"] = rows["records"] / rows.groupby("split")["records"].transform("sum")
    rows["label"] = rows["components"].map(lambda n: f"{n}×")
    rows["base"] = 0.8
    sizes = sorted(rows["size"].unique())
    base = alt.Chart(rows).encode(
        x=alt.X("size:O", sort=sizes, title="records in the component (one bar per component size)"),
        xOffset=alt.XOffset("split:N", sort=list(SPLITS)))
    bars = base.mark_bar().encode(
        y=alt.Y("records:Q", scale=alt.Scale(type="log", domainMin=0.8), title="records in components of this size (log)"),
        y2="base:Q",
        color=alt.Color("split:N", scale=SPLIT_COLORS),
        tooltip=["split", "size", "components", "records", alt.Tooltip("share:Q", format=".0%", title="share of split")])
    # written upwards from the bar's top: three bars share a size's slot, so level labels would overlap
    counts_text = base.mark_text(angle=270, align="left", baseline="middle", dx=3, fontSize=9).encode(
        y="records:Q", text="label:N")
    largest = rows.loc[rows.groupby("split")["size"].idxmax()]
    notes = [f"largest {sp} component: {int(z)} records ({sh:.0%} of {sp})"
             for sp, z, sh in zip(largest["split"], largest["size"], largest["share"])]
    return alt.layer(bars, counts_text, title=alt.TitleParams(
        "Split components by size: records they hold per split (n× on a bar = components of that size)",
        subtitle=notes, subtitleFontWeight="bold")).properties(
        width=max(520, 34 * len(sizes)), height=260)


# ---------------------------------------------------------------- slice charts

def slice_status(table: pd.DataFrame) -> pd.Series:
    """'weak', 'too small', 'not estimable' or 'judged' per slice row."""
    status = pd.Series("judged", index=table.index)
    if "estimable" in table:
        status[~table["estimable"].astype(bool)] = "not estimable"
    status[table["too_small"].astype(bool)] = "too small"
    status[table["weak"].astype(bool)] = "weak"
    return status


def _slice_rows(table: pd.DataFrame, components: bool = True) -> pd.DataFrame:
    """Rows with a label that carries the support (and, with `components`, the component count)
    so the static image shows how much each point rests on, the status, and `estimable` as a
    bool column. Without `components` the label is the same for every candidate (support is)."""
    rows = table.copy()
    if "estimable" not in rows:
        rows["estimable"] = True
    if components and "n_eff" in rows:  # issue 19: effective components, what an interval rests on
        rows["row"] = [f"{k}: {s}  (n={n}, n_eff={e:.1f})" for k, s, n, e in
                       zip(rows["slice_kind"], rows["slice"].astype(str), rows["support"], rows["n_eff"])]
    elif components and "n_components" in rows:
        rows["row"] = [f"{k}: {s}  (n={n}, {c} comp.)" for k, s, n, c in
                       zip(rows["slice_kind"], rows["slice"].astype(str), rows["support"], rows["n_components"])]
    else:
        rows["row"] = [f"{k}: {s}  (n={n})" for k, s, n in zip(rows["slice_kind"], rows["slice"].astype(str), rows["support"])]
    rows["status"] = slice_status(rows)
    rows["estimable"] = rows["estimable"].astype(bool)
    return rows


def _status_points(base: alt.Chart, x: str, tooltip: list, size: int = 40) -> alt.LayerChart:
    """Filled points for slices with an interval, hollow ones (no interval drawn) for the rest."""
    color = alt.Color("status:N", scale=STATUS_COLORS, title="slice")
    filled = base.mark_point(filled=True, size=size).encode(x=f"{x}:Q", color=color, tooltip=tooltip).transform_filter(
        alt.datum.estimable)
    hollow = base.mark_point(filled=False, size=size, strokeWidth=1.5).encode(
        x=f"{x}:Q", color=color, tooltip=tooltip).transform_filter(~alt.datum.estimable)
    return alt.LayerChart(layer=[filled, hollow])


def slice_f1(table: pd.DataFrame) -> alt.TopLevelMixin:
    """F1 per slice (in table order: worst first within a kind) with its 95% Korn-Graubard
    interval, the overall F1 as a rule; weak slices red, judged blue, not judged grey; slices in
    too few components hollow and without an interval. Row labels carry support and components."""
    rows = _slice_rows(table).dropna(subset=["f1"])
    order = list(rows["row"])
    overall = float(table.loc[table["slice_kind"] == "overall", "f1"].iloc[0])
    base = alt.Chart(rows).encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)))
    bars = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("ci_low:Q", scale=alt.Scale(domain=[0, 1]),
                title="F1 on these records (point); 95% interval beyond these records (bar; hollow: none, see the table)"),
        x2="ci_high:Q", color=alt.Color("status:N", scale=STATUS_COLORS, title="slice")).transform_filter(alt.datum.estimable)
    tooltip = ["slice_kind", "slice", "support", "tp", "fp", "fn", alt.Tooltip("f1:Q", format=".3f"),
               alt.Tooltip("ci_low:Q", format=".3f"), alt.Tooltip("ci_high:Q", format=".3f"), "status"]
    tooltip += [c for c in ("n_components", "n_eff", "rests_on", "no_interval_reason", "p_adjusted", "train_support")
                if c in rows]
    points = _status_points(base, "f1", tooltip)
    rule = alt.Chart(pd.DataFrame({"overall": [overall]})).mark_rule(strokeDash=[4, 3], color="black").encode(x="overall:Q")
    return alt.layer(bars, points, rule, title=f"F1 per slice, worst first (overall F1 {overall:.3f}, dashed)").properties(
        width=420, height=ROW_HEIGHT * len(order))


def precision_recall(table: pd.DataFrame) -> alt.TopLevelMixin:
    """Precision and recall per slice side by side, each with its 95% Korn-Graubard interval;
    a slice with gold facts but nothing submitted (precision undefined) stays listed in the
    precision panel, marked "never predicted"."""
    rows = _slice_rows(table)
    order = list(rows["row"])
    long = pd.concat([
        rows.assign(metric=m, value=rows[m], low=rows[f"{m}_ci_low"], high=rows[f"{m}_ci_high"])
        for m in ("precision", "recall")
    ])[["row", "slice_kind", "slice", "support", "status", "estimable", "metric", "value", "low", "high"]]
    never = long[(long["metric"] == "precision") & long["value"].isna() & (long["support"] > 0)].assign(
        note="never predicted", note_x=0.0)  # no point (precision is undefined): the note alone
    long = long.dropna(subset=["value"])
    base = alt.Chart().encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)))
    ci = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1]), title="value with 95% Korn-Graubard interval"), x2="high:Q",
        color=alt.Color("status:N", scale=STATUS_COLORS, title="slice")).transform_filter(alt.datum.estimable)
    point = _status_points(base, "value", ["slice_kind", "slice", "metric", "support", alt.Tooltip("value:Q", format=".3f"),
                                           alt.Tooltip("low:Q", format=".3f"), alt.Tooltip("high:Q", format=".3f")], size=36)
    layers = [ci, point]
    if len(never):
        layers.append(base.mark_text(align="left", dx=2, fontSize=10, color=RED).encode(
            x="note_x:Q", text="note:N").transform_filter(alt.datum.note == "never predicted"))
        long = pd.concat([long, never], ignore_index=True)
    return alt.layer(*layers, data=long).properties(width=260, height=ROW_HEIGHT * len(order)).facet(
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

def compare_f1(compare: pd.DataFrame, judged_only: bool = True) -> alt.TopLevelMixin:
    """F1 with its interval per slice, one mark per candidate on the same row (shape and offset
    tell candidates apart; colour is the slice status, as in every chart: red weak, blue judged,
    grey not judged; hollow and no interval when too few components)."""
    rows = _slice_rows(compare, components=False)  # components differ by candidate (false positives add some)
    if judged_only:
        rows = rows[~rows["too_small"].astype(bool)]
    rows = rows.dropna(subset=["f1"])
    order = list(dict.fromkeys(rows["row"]))
    candidates = list(dict.fromkeys(rows["candidate"]))
    base = alt.Chart(rows).encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)),
        yOffset=alt.YOffset("candidate:N", sort=candidates))
    ci = base.mark_rule(strokeWidth=3).encode(
        x=alt.X("ci_low:Q", scale=alt.Scale(domain=[0, 1]), title="F1 on these records; 95% interval beyond these records"), x2="ci_high:Q",
        color=alt.Color("status:N", scale=STATUS_COLORS, title="slice")).transform_filter(alt.datum.estimable)
    tooltip = ["candidate", "slice_kind", "slice", "support", "n_components", "n_eff", alt.Tooltip("f1:Q", format=".3f"),
               alt.Tooltip("ci_low:Q", format=".3f"), alt.Tooltip("ci_high:Q", format=".3f"), "status"]
    color = alt.Color("status:N", scale=STATUS_COLORS, title="slice")
    shape = alt.Shape("candidate:N", sort=candidates, title="candidate")
    filled = base.mark_point(filled=True, size=60).encode(x="f1:Q", color=color, shape=shape, tooltip=tooltip
                                                          ).transform_filter(alt.datum.estimable)
    hollow = base.mark_point(filled=False, size=60, strokeWidth=2).encode(x="f1:Q", color=color, shape=shape, tooltip=tooltip
                                                                          ).transform_filter(~alt.datum.estimable)
    return alt.layer(ci, filled, hollow, title="F1 per slice and candidate (slices with enough support)").properties(
        width=420, height=ROW_HEIGHT * max(1, len(candidates)) * len(order) / 1.5)


def paired_f1_diff(paired: pd.DataFrame) -> alt.TopLevelMixin:
    """F1(a) - F1(b) per slice with its paired cluster-bootstrap interval; red where the component
    sign-flip test is significant after adjustment, blue where not, grey hollow where the slice is
    not judged (too few components: no interval)."""
    rows = paired[~paired["too_small"].astype(bool)].dropna(subset=["f1_diff"]).copy()
    rows["row"] = [f"{k}: {s}  (n={n}, n_eff={e:.1f})" for k, s, n, e in
                   zip(rows["slice_kind"], rows["slice"].astype(str), rows["support"], rows["n_eff"])]
    rows["estimable"] = rows["estimable"].astype(bool)
    rows["test"] = np.where(~rows["estimable"], "not judged",
                            np.where(rows["significant"].astype(bool), "significant", "not significant"))
    order = list(dict.fromkeys(rows["row"]))
    pairs = list(dict.fromkeys(rows["pair"]))
    color = alt.Color("test:N", scale=PAIRED_COLORS, title="equal-F1 test (adjusted)")
    base = alt.Chart(rows).encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)),
        yOffset=alt.YOffset("pair:N", sort=pairs))
    ci = base.mark_rule(strokeWidth=2).encode(x=alt.X("f1_diff_ci_low:Q", title="F1(a) - F1(b), 95% paired cluster bootstrap"),
                                              x2="f1_diff_ci_high:Q", color=color).transform_filter(alt.datum.estimable)
    tooltip = ["pair", "slice_kind", "slice", alt.Tooltip("f1_diff:Q", format=".3f"),
               alt.Tooltip("f1_diff_ci_low:Q", format=".3f"), alt.Tooltip("f1_diff_ci_high:Q", format=".3f"),
               "b10", "b01", alt.Tooltip("p_adjusted:Q", format=".2g"), alt.Tooltip("exact_p_adjusted:Q", format=".2g")]
    shape = alt.Shape("pair:N", sort=pairs)
    filled = base.mark_point(filled=True, size=36, opacity=1).encode(x="f1_diff:Q", color=color, shape=shape, tooltip=tooltip
                                                                     ).transform_filter(alt.datum.estimable)
    hollow = base.mark_point(filled=False, size=36).encode(x="f1_diff:Q", color=color, shape=shape, tooltip=tooltip
                                                           ).transform_filter(~alt.datum.estimable)
    zero = alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="zero:Q")
    return alt.layer(ci, filled, hollow, zero, title="Paired F1 difference per slice (a - b, same records)").properties(
        width=420, height=ROW_HEIGHT * max(1, len(pairs)) * len(order) / 1.5)


def cost_chart(costs: pd.DataFrame, column: str) -> alt.Chart:
    """One bar per candidate for a numeric cost column of the run manifests."""
    return alt.Chart(costs.dropna(subset=[column]), title=f"Run cost: {column}").mark_bar().encode(
        y=alt.Y("candidate:N", title=None), x=alt.X(f"{column}:Q", title=column),
        tooltip=["candidate", column]).properties(width=360, height=ROW_HEIGHT * 2 * len(costs))


# ---------------------------------------------------------------- sweeps (tuning issue)

def sweep_tradeoff(points: pd.DataFrame, metric: str, cost: str, floor: float | None = None) -> alt.LayerChart | alt.FacetChart:
    """Tune metric (with its interval) against cost, one point per configuration that ran: the
    Pareto front joined by a line, the chosen configuration ringed, the rule's floor (if any)
    dashed. `points` is `tables.sweep_points(...)` (columns cost, metric, low, high, pareto,
    chosen, label)."""
    shown = points.dropna(subset=["cost", "metric"])
    base = alt.Chart(shown)
    x = alt.X("cost:Q", title=cost, scale=alt.Scale(zero=False), axis=alt.Axis(labelOverlap=True))
    interval = base.mark_rule(color="#9ecae9").encode(x=x, y=alt.Y("low:Q", title=f"tune {metric}", scale=alt.Scale(zero=False)),
                                                      y2="high:Q")
    dots = base.mark_circle(size=60).encode(
        x=x, y="metric:Q", color=alt.Color("pareto:N", title="Pareto front", scale=alt.Scale(domain=[True, False],
                                                                                           range=["#e45756", "#4c78a8"])),
        tooltip=["label", alt.Tooltip("metric:Q", format=".4f"), alt.Tooltip("low:Q", format=".4f"),
                 alt.Tooltip("high:Q", format=".4f"), alt.Tooltip("cost:Q", format=".4g")])
    front = alt.Chart(shown[shown["pareto"]].sort_values("cost")).mark_line(color="#e45756").encode(x=x, y="metric:Q",
                                                                                                     order="cost:Q")
    chosen = alt.Chart(shown[shown["chosen"]]).mark_point(size=300, shape="circle", color="black", strokeWidth=2).encode(
        x=x, y="metric:Q")
    layers = [interval, front, dots, chosen]
    if floor is not None:
        layers.append(alt.Chart(pd.DataFrame({"floor": [floor]})).mark_rule(color="black", strokeDash=[4, 3]).encode(y="floor:Q"))
    return alt.layer(*layers, title=f"Tune {metric} against {cost} (ringed: chosen"
                     + (f"; dashed: floor {floor:g})" if floor is not None else ")")).properties(width=460, height=300)


# ---------------------------------------------------------------- the net-true decision boundary

def frontier_chart(table: pd.DataFrame) -> alt.TopLevelMixin:
    """Net-true facts (95% component-bootstrap interval) against cost per record, one point per
    candidate; the Pareto front joined by a line. The cost axis is symlog: zero-cost and
    dollar-per-record candidates share one chart."""
    rows = table.dropna(subset=["cost"]).copy()
    rows["position"] = rows["on_front"].map({True: "on the front", False: "behind the front"})
    measure = str(rows["cost_measure"].iloc[0]) if len(rows) else "cost per record"
    if measure in ("dollars", "model_dollars"):  # a unit that reads: dollars per 1,000 records, not 8 decimals
        rows["cost"] = rows["cost"] * 1000
        measure = f"{measure} per 1,000 records"
    base = alt.Chart(rows).encode(
        x=alt.X("cost:Q", scale=alt.Scale(type="symlog", constant=1e-3), title=measure, axis=alt.Axis(format="~g")),
        color=alt.Color("position:N", scale=alt.Scale(domain=["on the front", "behind the front"],
                                                       range=["#e45756", "#4c78a8"]), title=None))
    ci = base.mark_rule(strokeWidth=2).encode(
        y=alt.Y("net_true_ci_low:Q", title="net-true facts: on these records (point), a new test set (bar)"),
        y2="net_true_ci_high:Q")
    point = base.mark_point(filled=True, size=70).encode(
        y="net_true:Q", tooltip=["candidate", "net_true", alt.Tooltip("cost:Q", format=".3g"), "verdict"])
    label = base.mark_text(align="left", dx=7, dy=-7, fontSize=11).encode(y="net_true:Q", text="candidate:N")
    front = alt.Chart(rows[rows["on_front"]].sort_values("cost")).mark_line(color="#e45756", strokeDash=[4, 3]).encode(
        x="cost:Q", y="net_true:Q")
    return alt.layer(ci, front, point, label, title="Net-true facts against cost: the Pareto front").properties(width=460, height=300)


def gain_chart(table: pd.DataFrame, baseline: str) -> alt.TopLevelMixin:
    """Each candidate's net-true gain over the baseline with its paired 95% interval."""
    rows = table[table["candidate"] != baseline].copy()
    rows["interval"] = ((rows["gain_ci_low"] > 0) | (rows["gain_ci_high"] < 0)).map({True: "excludes 0", False: "includes 0"})
    base = alt.Chart(rows).encode(
        y=alt.Y("candidate:N", title=None, sort=list(rows["candidate"])),
        color=alt.Color("interval:N", scale=alt.Scale(domain=["excludes 0", "includes 0"], range=["#e45756", "#4c78a8"])))
    ci = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("gain_ci_low:Q", title=f"net-true minus {baseline}'s: on these records (point), a new test set (bar)"),
        x2="gain_ci_high:Q")
    point = base.mark_point(filled=True, size=50).encode(x="gain:Q", tooltip=["candidate", "gain", "verdict"])
    zero = alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="zero:Q")
    return alt.layer(ci, point, zero, title=f"Gain over {baseline} (paired component bootstrap)").properties(
        width=420, height=ROW_HEIGHT * 2 * max(1, len(rows)))
