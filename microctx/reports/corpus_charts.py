"""The corpus report's charts: tidy tables from the corpus (`label_counts`, `fact_density`, ...:
data in, a small DataFrame out, so a chart never embeds record bodies) and the charts drawn from
them (`state_by_split`, `labels_by_split`, the brushable timeline, component sizes). The notebooks
call them through `microctx.reports.charts`.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from microctx.contract.patterns import CUE_WORDS
from microctx.contract.split import SPLITS
from microctx.reports.figures import ROW_HEIGHT, SPLIT_COLORS

# ---------------------------------------------------------------- corpus tables


def _exploded_labels(frame: pd.DataFrame) -> pd.DataFrame:
    rows = frame[["id", "split", "created_at", "labels"]].explode("labels").dropna(subset=["labels"])
    return rows.rename(columns={"labels": "label"})


def label_counts(frame: pd.DataFrame) -> pd.DataFrame:
    """Records carrying each label, per split: columns label, split, records (every label)."""
    rows = _exploded_labels(frame)
    counts = rows.groupby(["label", "split"]).size().rename("records").reset_index()
    total = counts.groupby("label")["records"].transform("sum")
    return counts.assign(total=total).sort_values(["total", "label", "split"], ascending=[False, True, True], ignore_index=True)


def fact_density(records: pd.DataFrame) -> pd.DataFrame:
    """Per split and kind (references, duplicate targets), how many records carry n of them.

    Columns split, kind, n (clipped at 10, shown as "10+"), records. `records`: the record table
    (`grading.records.record_table`), whose references and duplicate targets are derived once per
    record from the public text, with the patterns the answers use.
    """
    per_record = pd.DataFrame(
        {
            "split": records["split"].to_numpy(),
            "references": [len(x) for x in records["references"]],
            "duplicate targets": [len(x) for x in records["duplicate_targets"]],
        }
    ).melt(id_vars="split", var_name="kind", value_name="n")
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
    return (
        alt.Chart(counts, title="Records by state and split")
        .mark_bar()
        .encode(
            x=alt.X("split:N", sort=list(SPLITS), title="split"),
            xOffset=alt.XOffset("state:N"),
            y=alt.Y("records:Q", title="records"),
            color=alt.Color("state:N", title="state"),
            tooltip=["split", "state", "records"],
        )
        .properties(width=320, height=240)
    )


def labels_by_split(counts: pd.DataFrame) -> alt.Chart:
    """Every label, most common first, records per split on a log axis (the tail spans 3 orders)."""
    order = list(dict.fromkeys(counts["label"]))
    counts = counts.assign(base=0.8)  # a log axis has no zero: bars start just below 1
    return (
        alt.Chart(counts, title=f"Records per label and split ({len(order)} labels, log scale)")
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort=order, title=None, axis=alt.Axis(labelLimit=220)),
            yOffset=alt.YOffset("split:N", sort=list(SPLITS)),
            x=alt.X("records:Q", scale=alt.Scale(type="log", domainMin=0.8), title="records (log scale)"),
            x2="base:Q",
            color=alt.Color("split:N", scale=SPLIT_COLORS),
            tooltip=["label", "split", "records", alt.Tooltip("total:Q", title="all splits")],
        )
        .properties(width=420, height=max(200, ROW_HEIGHT * 1.6 * len(order)))
    )


def fact_density_chart(density: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(density)
        .mark_bar()
        .encode(
            x=alt.X("n:O", title="per record (10 = 10 or more)"),
            xOffset=alt.XOffset("split:N", sort=list(SPLITS)),
            y=alt.Y("records:Q", scale=alt.Scale(type="symlog"), title="records (symlog scale)"),
            color=alt.Color("split:N", scale=SPLIT_COLORS),
            tooltip=["kind", "split", "n", "records"],
        )
        .properties(width=300, height=220)
        .facet(column=alt.Column("kind:N", title=None))
        .properties(title="Reference and duplicate density: records with n references / duplicate targets")
    )


def cue_words_chart(counts: pd.DataFrame) -> alt.Chart:
    return (
        alt.Chart(counts, title="Records whose body holds each cue word")
        .mark_bar()
        .encode(
            x=alt.X("cue_word:N", sort=list(CUE_WORDS), title="cue word"),
            xOffset=alt.XOffset("split:N", sort=list(SPLITS)),
            y=alt.Y("records:Q", title="records"),
            color=alt.Color("split:N", scale=SPLIT_COLORS),
            tooltip=["cue_word", "split", "records"],
        )
        .properties(width=380, height=220)
    )


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
    timeline = (
        alt.Chart(daily, title="Issues created and closed per day, every day")
        .mark_line(strokeWidth=1.2, interpolate="step")
        .encode(
            x=alt.X("date:T", title="day (UTC)", scale=alt.Scale(type="utc", nice=False, domain=domain)),
            y=alt.Y("issues:Q", title="issues per day"),
            color=alt.Color("event:N", scale=alt.Scale(domain=["created", "closed"], range=["#4c78a8", "#e45756"])),
            tooltip=[alt.Tooltip("day:N", title="day (UTC)"), "event", "issues"],
        )
        .add_params(brush)
        .properties(width=640, height=200)
    )
    labels = _exploded_labels(frame)
    labels = labels.assign(date=_epoch_ms(labels["created_at"].dt.tz_convert("UTC").dt.tz_localize(None).dt.floor("D")))
    per_day = labels.groupby(["date", "label"]).size().rename("records").reset_index()
    order = list(per_day.groupby("label")["records"].sum().sort_values(ascending=False, kind="mergesort").index)
    # one row per label with 0 records and no date: it takes the brush's start as its date, so it
    # passes every brush and each label keeps a (possibly zero) bar: the filtered data is never empty
    zeros = pd.DataFrame({"date": pd.array([None] * len(order), dtype="Int64"), "label": order, "records": 0})
    per_day = pd.concat([per_day, zeros], ignore_index=True).rename(columns={"date": "created"})
    label_chart = (
        alt.Chart(per_day, title="Labels of the issues created in the brushed range (all days when nothing is brushed)")
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=None, scale=alt.Scale(domain=order), axis=alt.Axis(labelLimit=220)),
            x=alt.X("sum(records):Q", title="records created in the range", scale=alt.Scale(domain={"unionWith": [0, 1]})),
            tooltip=["label", alt.Tooltip("sum(records):Q", title="records")],
        )
        .transform_calculate(date="datum.created === null ? (brush && brush.date ? brush.date[0] : 0) : datum.created")
        .transform_filter(brush)
        .properties(width=640, height=ROW_HEIGHT * max(1, len(order)))
    )
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
        xOffset=alt.XOffset("split:N", sort=list(SPLITS)),
    )
    bars = base.mark_bar().encode(
        y=alt.Y("records:Q", scale=alt.Scale(type="log", domainMin=0.8), title="records in components of this size (log)"),
        y2="base:Q",
        color=alt.Color("split:N", scale=SPLIT_COLORS),
        tooltip=["split", "size", "components", "records", alt.Tooltip("share:Q", format=".0%", title="share of split")],
    )
    # written upwards from the bar's top: three bars share a size's slot, so level labels would overlap
    counts_text = base.mark_text(angle=270, align="left", baseline="middle", dx=3, fontSize=9).encode(
        y="records:Q", text="label:N"
    )
    largest = rows.loc[rows.groupby("split")["size"].idxmax()]
    notes = [
        f"largest {sp} component: {int(z)} records ({sh:.0%} of {sp})"
        for sp, z, sh in zip(largest["split"], largest["size"], largest["share"])
    ]
    return alt.layer(
        bars,
        counts_text,
        title=alt.TitleParams(
            "Split components by size: records they hold per split (n× on a bar = components of that size)",
            subtitle=notes,
            subtitleFontWeight="bold",
        ),
    ).properties(width=max(520, 34 * len(sizes)), height=260)
