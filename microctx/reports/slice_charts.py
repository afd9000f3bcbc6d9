"""The grade and compare reports' charts of slice tables: F1, precision and recall per slice with
their intervals, fact outcomes per kind, candidates side by side and their paired differences. One
status colour in each (`microctx.reports.figures`: red weak or significant, blue judged, grey not
judged, brown not estimable, hollow without an interval). The notebooks call them through
`microctx.reports.charts`.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from microctx.reports.figures import PAIRED_COLORS, RED, ROW_HEIGHT, STATUS_COLORS

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
        rows["row"] = [
            f"{k}: {s}  (n={n}, n_eff={e:.1f})"
            for k, s, n, e in zip(rows["slice_kind"], rows["slice"].astype(str), rows["support"], rows["n_eff"])
        ]
    elif components and "n_components" in rows:
        rows["row"] = [
            f"{k}: {s}  (n={n}, {c} comp.)"
            for k, s, n, c in zip(rows["slice_kind"], rows["slice"].astype(str), rows["support"], rows["n_components"])
        ]
    else:
        rows["row"] = [f"{k}: {s}  (n={n})" for k, s, n in zip(rows["slice_kind"], rows["slice"].astype(str), rows["support"])]
    rows["status"] = slice_status(rows)
    rows["estimable"] = rows["estimable"].astype(bool)
    return rows


def _status_points(base: alt.Chart, x: str, tooltip: list, size: int = 40) -> alt.LayerChart:
    """Filled points for slices with an interval, hollow ones (no interval drawn) for the rest."""
    color = alt.Color("status:N", scale=STATUS_COLORS, title="slice")
    filled = (
        base.mark_point(filled=True, size=size)
        .encode(x=f"{x}:Q", color=color, tooltip=tooltip)
        .transform_filter(alt.datum.estimable)
    )
    hollow = (
        base.mark_point(filled=False, size=size, strokeWidth=1.5)
        .encode(x=f"{x}:Q", color=color, tooltip=tooltip)
        .transform_filter(~alt.datum.estimable)
    )
    return alt.LayerChart(layer=[filled, hollow])


def slice_f1(table: pd.DataFrame) -> alt.TopLevelMixin:
    """F1 per slice (in table order: worst first within a kind) with its 95% Korn-Graubard
    interval, the overall F1 as a rule; weak slices red, judged blue, not judged grey; slices in
    too few components hollow and without an interval. Row labels carry support and components."""
    rows = _slice_rows(table).dropna(subset=["f1"])
    order = list(rows["row"])
    overall = float(table.loc[table["slice_kind"] == "overall", "f1"].iloc[0])
    base = alt.Chart(rows).encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)))
    bars = (
        base.mark_rule(strokeWidth=2)
        .encode(
            x=alt.X(
                "ci_low:Q",
                scale=alt.Scale(domain=[0, 1]),
                title="F1 on these records (point); 95% interval beyond these records (bar; hollow: none, see the table)",
            ),
            x2="ci_high:Q",
            color=alt.Color("status:N", scale=STATUS_COLORS, title="slice"),
        )
        .transform_filter(alt.datum.estimable)
    )
    tooltip = [
        "slice_kind",
        "slice",
        "support",
        "tp",
        "fp",
        "fn",
        alt.Tooltip("f1:Q", format=".3f"),
        alt.Tooltip("ci_low:Q", format=".3f"),
        alt.Tooltip("ci_high:Q", format=".3f"),
        "status",
    ]
    tooltip += [
        c for c in ("n_components", "n_eff", "rests_on", "no_interval_reason", "p_adjusted", "train_support") if c in rows
    ]
    points = _status_points(base, "f1", tooltip)
    rule = alt.Chart(pd.DataFrame({"overall": [overall]})).mark_rule(strokeDash=[4, 3], color="black").encode(x="overall:Q")
    return alt.layer(bars, points, rule, title=f"F1 per slice, worst first (overall F1 {overall:.3f}, dashed)").properties(
        width=420, height=ROW_HEIGHT * len(order)
    )


def precision_recall(table: pd.DataFrame) -> alt.TopLevelMixin:
    """Precision and recall per slice side by side, each with its 95% Korn-Graubard interval;
    a slice with gold facts but nothing submitted (precision undefined) stays listed in the
    precision panel, marked "never predicted"."""
    rows = _slice_rows(table)
    order = list(rows["row"])
    long = pd.concat(
        [
            rows.assign(metric=m, value=rows[m], low=rows[f"{m}_ci_low"], high=rows[f"{m}_ci_high"])
            for m in ("precision", "recall")
        ]
    )[["row", "slice_kind", "slice", "support", "status", "estimable", "metric", "value", "low", "high"]]
    never = long[(long["metric"] == "precision") & long["value"].isna() & (long["support"] > 0)].assign(
        note="never predicted", note_x=0.0
    )  # no point (precision is undefined): the note alone
    long = long.dropna(subset=["value"])
    base = alt.Chart().encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)))
    ci = (
        base.mark_rule(strokeWidth=2)
        .encode(
            x=alt.X("low:Q", scale=alt.Scale(domain=[0, 1]), title="value with 95% Korn-Graubard interval"),
            x2="high:Q",
            color=alt.Color("status:N", scale=STATUS_COLORS, title="slice"),
        )
        .transform_filter(alt.datum.estimable)
    )
    point = _status_points(
        base,
        "value",
        [
            "slice_kind",
            "slice",
            "metric",
            "support",
            alt.Tooltip("value:Q", format=".3f"),
            alt.Tooltip("low:Q", format=".3f"),
            alt.Tooltip("high:Q", format=".3f"),
        ],
        size=36,
    )
    layers = [ci, point]
    if len(never):
        layers.append(
            base.mark_text(align="left", dx=2, fontSize=10, color=RED)
            .encode(x="note_x:Q", text="note:N")
            .transform_filter(alt.datum.note == "never predicted")
        )
        long = pd.concat([long, never], ignore_index=True)
    return (
        alt.layer(*layers, data=long)
        .properties(width=260, height=ROW_HEIGHT * len(order))
        .facet(column=alt.Column("metric:N", title=None, sort=["precision", "recall"]))
        .properties(title="Precision and recall per slice")
    )


def outcomes_by_kind(table: pd.DataFrame) -> alt.Chart:
    """tp, fp and fn counts per fact kind (these rows sum to the grade's totals)."""
    kinds = table[table["slice_kind"] == "fact_kind"]
    long = kinds.melt(id_vars=["slice"], value_vars=["tp", "fp", "fn"], var_name="outcome", value_name="facts")
    return (
        alt.Chart(long, title="Fact outcomes per kind")
        .mark_bar()
        .encode(
            y=alt.Y("slice:N", title="fact kind", sort=list(kinds["slice"])),
            x=alt.X("facts:Q", title="facts", axis=alt.Axis(tickCount=6)),
            color=alt.Color("outcome:N", scale=alt.Scale(domain=["tp", "fn", "fp"], range=["#54a24b", "#e45756", "#f58518"])),
            order=alt.Order("outcome:N"),
            tooltip=["slice", "outcome", "facts"],
        )
        .properties(width=420, height=150)
    )


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
        yOffset=alt.YOffset("candidate:N", sort=candidates),
    )
    ci = (
        base.mark_rule(strokeWidth=3)
        .encode(
            x=alt.X("ci_low:Q", scale=alt.Scale(domain=[0, 1]), title="F1 on these records; 95% interval beyond these records"),
            x2="ci_high:Q",
            color=alt.Color("status:N", scale=STATUS_COLORS, title="slice"),
        )
        .transform_filter(alt.datum.estimable)
    )
    tooltip = [
        "candidate",
        "slice_kind",
        "slice",
        "support",
        "n_components",
        "n_eff",
        alt.Tooltip("f1:Q", format=".3f"),
        alt.Tooltip("ci_low:Q", format=".3f"),
        alt.Tooltip("ci_high:Q", format=".3f"),
        "status",
    ]
    color = alt.Color("status:N", scale=STATUS_COLORS, title="slice")
    shape = alt.Shape("candidate:N", sort=candidates, title="candidate")
    filled = (
        base.mark_point(filled=True, size=60)
        .encode(x="f1:Q", color=color, shape=shape, tooltip=tooltip)
        .transform_filter(alt.datum.estimable)
    )
    hollow = (
        base.mark_point(filled=False, size=60, strokeWidth=2)
        .encode(x="f1:Q", color=color, shape=shape, tooltip=tooltip)
        .transform_filter(~alt.datum.estimable)
    )
    return alt.layer(ci, filled, hollow, title="F1 per slice and candidate (slices with enough support)").properties(
        width=420, height=ROW_HEIGHT * max(1, len(candidates)) * len(order) / 1.5
    )


def paired_f1_diff(paired: pd.DataFrame) -> alt.TopLevelMixin:
    """F1(a) - F1(b) per slice with its paired cluster-bootstrap interval; red where the component
    sign-flip test is significant after adjustment, blue where not, grey hollow where the slice is
    not judged (too few components: no interval)."""
    rows = paired[~paired["too_small"].astype(bool)].dropna(subset=["f1_diff"]).copy()
    rows["row"] = [
        f"{k}: {s}  (n={n}, n_eff={e:.1f})"
        for k, s, n, e in zip(rows["slice_kind"], rows["slice"].astype(str), rows["support"], rows["n_eff"])
    ]
    rows["estimable"] = rows["estimable"].astype(bool)
    rows["test"] = np.where(
        ~rows["estimable"], "not judged", np.where(rows["significant"].astype(bool), "significant", "not significant")
    )
    order = list(dict.fromkeys(rows["row"]))
    pairs = list(dict.fromkeys(rows["pair"]))
    color = alt.Color("test:N", scale=PAIRED_COLORS, title="equal-F1 test (adjusted)")
    base = alt.Chart(rows).encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=320)), yOffset=alt.YOffset("pair:N", sort=pairs)
    )
    ci = (
        base.mark_rule(strokeWidth=2)
        .encode(
            x=alt.X("f1_diff_ci_low:Q", title="F1(a) - F1(b), 95% paired cluster bootstrap"), x2="f1_diff_ci_high:Q", color=color
        )
        .transform_filter(alt.datum.estimable)
    )
    tooltip = [
        "pair",
        "slice_kind",
        "slice",
        alt.Tooltip("f1_diff:Q", format=".3f"),
        alt.Tooltip("f1_diff_ci_low:Q", format=".3f"),
        alt.Tooltip("f1_diff_ci_high:Q", format=".3f"),
        "b10",
        "b01",
        alt.Tooltip("p_adjusted:Q", format=".2g"),
        alt.Tooltip("exact_p_adjusted:Q", format=".2g"),
    ]
    shape = alt.Shape("pair:N", sort=pairs)
    filled = (
        base.mark_point(filled=True, size=36, opacity=1)
        .encode(x="f1_diff:Q", color=color, shape=shape, tooltip=tooltip)
        .transform_filter(alt.datum.estimable)
    )
    hollow = (
        base.mark_point(filled=False, size=36)
        .encode(x="f1_diff:Q", color=color, shape=shape, tooltip=tooltip)
        .transform_filter(~alt.datum.estimable)
    )
    zero = alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="zero:Q")
    return alt.layer(ci, filled, hollow, zero, title="Paired F1 difference per slice (a - b, same records)").properties(
        width=420, height=ROW_HEIGHT * max(1, len(pairs)) * len(order) / 1.5
    )
