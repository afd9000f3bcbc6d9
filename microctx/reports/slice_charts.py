"""The grade and compare reports' charts of slice tables: F1, precision and recall per slice with
their intervals, fact outcomes per kind, candidates side by side and their paired differences. One
status colour in each (`microctx.reports.figures`: red weak or significant, blue judged, grey not
judged, brown not estimable, hollow without an interval). The notebooks call them through
`microctx.reports.charts`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from microctx.reports.figures import (
    DEFAULT_CONFIG,
    PAIRED_COLORS,
    RED,
    ROW_HEIGHT,
    SCHEMA_URL,
    STATUS_COLORS,
    Spec,
    field,
    inline_data,
)

if TYPE_CHECKING:
    import altair as alt

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


_STATUS = {"field": "status", "scale": STATUS_COLORS, "title": "slice", "type": "nominal"}
_ESTIMABLE, _NOT_ESTIMABLE = [{"filter": "datum.estimable"}], [{"filter": "(!datum.estimable)"}]


def _rows_axis(order: list) -> dict:
    return {"axis": {"labelLimit": 320}, "field": "row", "sort": order, "title": None, "type": "nominal"}


def _status_points(y: dict, x: str, tooltip: list, size: int = 40) -> list[dict]:
    """Filled points for slices with an interval, hollow ones (no interval drawn) for the rest."""
    encoding = {"color": _STATUS, "tooltip": tooltip, "x": {"field": x, "type": "quantitative"}, "y": y}
    return [
        {"mark": {"type": "point", "filled": True, "size": size}, "encoding": encoding, "transform": _ESTIMABLE},
        {
            "mark": {"type": "point", "filled": False, "size": size, "strokeWidth": 1.5},
            "encoding": encoding,
            "transform": _NOT_ESTIMABLE,
        },
    ]


def _interval(y: dict, low: str, high: str, title: str) -> dict:
    """The 95% interval of each estimable slice as a rule from `low` to `high` on [0, 1]."""
    x = {"field": low, "scale": {"domain": [0, 1]}, "title": title, "type": "quantitative"}
    return {
        "mark": {"type": "rule", "strokeWidth": 2},
        "encoding": {"color": _STATUS, "x": x, "x2": {"field": high}, "y": y},
        "transform": _ESTIMABLE,
    }


def _top(spec: dict, datasets: dict) -> Spec:
    """The chart as altair's `to_dict()` writes it: its config first, the schema and the datasets last."""
    return Spec({"config": DEFAULT_CONFIG, **spec, "$schema": SCHEMA_URL, "datasets": datasets})


def slice_f1(table: pd.DataFrame) -> Spec:
    """F1 per slice (in table order: worst first within a kind) with its 95% Korn-Graubard
    interval, the overall F1 as a rule; weak slices red, judged blue, not judged grey; slices in
    too few components hollow and without an interval. Row labels carry support and components.
    A Vega-Lite dict (`figures.Spec`), not an altair chart: the grade report's kernel never
    imports altair."""
    rows = _slice_rows(table).dropna(subset=["f1"])
    order = list(rows["row"])
    overall = float(table.loc[table["slice_kind"] == "overall", "f1"].iloc[0])
    datasets: dict = {}
    data = inline_data(rows, datasets)
    y = _rows_axis(order)
    title = "F1 on these records (point); 95% interval beyond these records (bar; hollow: none, see the table)"
    tooltip = [field(rows, c) for c in ("slice_kind", "slice", "support", "tp", "fp", "fn")]
    tooltip += [{"field": c, "format": ".3f", "type": "quantitative"} for c in ("f1", "ci_low", "ci_high")]
    tooltip.append(field(rows, "status"))
    extra = ("n_components", "n_eff", "rests_on", "no_interval_reason", "p_adjusted", "train_support")
    tooltip += [field(rows, c) for c in extra if c in rows]
    line = {
        "data": inline_data(pd.DataFrame({"overall": [overall]}), datasets),
        "mark": {"type": "rule", "color": "black", "strokeDash": [4, 3]},
        "encoding": {"x": {"field": "overall", "type": "quantitative"}},
    }
    layers = [
        {"data": data, **_interval(y, "ci_low", "ci_high", title)},
        {"layer": _status_points(y, "f1", tooltip), "data": data},
    ]
    spec = {
        "layer": [*layers, line],
        "height": ROW_HEIGHT * len(order),
        "title": f"F1 per slice, worst first (overall F1 {overall:.3f}, dashed)",
        "width": 420,
    }
    return _top(spec, datasets)


def precision_recall(table: pd.DataFrame) -> Spec:
    """Precision and recall per slice side by side, each with its 95% Korn-Graubard interval;
    a slice with gold facts but nothing submitted (precision undefined) stays listed in the
    precision panel, marked "never predicted". A Vega-Lite dict (`figures.Spec`)."""
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
    if len(never):
        long = pd.concat([long, never], ignore_index=True)
    y = _rows_axis(order)
    tooltip = [field(long, c) for c in ("slice_kind", "slice", "metric", "support")]
    tooltip += [{"field": c, "format": ".3f", "type": "quantitative"} for c in ("value", "low", "high")]
    layers = [
        _interval(y, "low", "high", "value with 95% Korn-Graubard interval"),
        {"layer": _status_points(y, "value", tooltip, size=36)},
    ]
    if len(never):
        note = {"field": "note", "type": "nominal"}
        layers.append(
            {
                "mark": {"type": "text", "align": "left", "color": RED, "dx": 2, "fontSize": 10},
                "encoding": {"text": note, "x": {"field": "note_x", "type": "quantitative"}, "y": y},
                "transform": [{"filter": "(datum.note === 'never predicted')"}],
            }
        )
    datasets: dict = {}
    spec = {
        "data": inline_data(long, datasets),
        "facet": {"column": {"field": "metric", "sort": ["precision", "recall"], "title": None, "type": "nominal"}},
        "spec": {"layer": layers, "height": ROW_HEIGHT * len(order), "width": 260},
        "title": "Precision and recall per slice",
    }
    return _top(spec, datasets)


def outcomes_by_kind(table: pd.DataFrame) -> Spec:
    """tp, fp and fn counts per fact kind (these rows sum to the grade's totals). A Vega-Lite dict (`figures.Spec`)."""
    kinds = table[table["slice_kind"] == "fact_kind"]
    long = kinds.melt(id_vars=["slice"], value_vars=["tp", "fp", "fn"], var_name="outcome", value_name="facts")
    datasets: dict = {}
    colors = {"domain": ["tp", "fn", "fp"], "range": ["#54a24b", "#e45756", "#f58518"]}
    encoding = {
        "color": {"field": "outcome", "scale": colors, "type": "nominal"},
        "order": {"field": "outcome", "type": "nominal"},
        "tooltip": [field(long, c) for c in ("slice", "outcome", "facts")],
        "x": {"axis": {"tickCount": 6}, "field": "facts", "title": "facts", "type": "quantitative"},
        "y": {"field": "slice", "sort": list(kinds["slice"]), "title": "fact kind", "type": "nominal"},
    }
    spec = {"data": inline_data(long, datasets), "mark": {"type": "bar"}, "encoding": encoding}
    return _top({**spec, "height": 150, "title": "Fact outcomes per kind", "width": 420}, datasets)


# ---------------------------------------------------------------- comparison charts


def compare_f1(compare: pd.DataFrame, judged_only: bool = True) -> alt.TopLevelMixin:
    """F1 with its interval per slice, one mark per candidate on the same row (shape and offset
    tell candidates apart; colour is the slice status, as in every chart: red weak, blue judged,
    grey not judged; hollow and no interval when too few components)."""
    import altair as alt

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
    import altair as alt

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
