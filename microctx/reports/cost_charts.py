"""Charts of cost: each candidate's run cost, a sweep's tune metric against cost, and the
net-true decision boundary (the Pareto front, the gain over a baseline). The notebooks call them
through `microctx.reports.charts`.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from microctx.reports.figures import ROW_HEIGHT


def cost_chart(costs: pd.DataFrame, column: str) -> alt.Chart:
    """One bar per candidate for a numeric cost column of the run manifests."""
    return (
        alt.Chart(costs.dropna(subset=[column]), title=f"Run cost: {column}")
        .mark_bar()
        .encode(y=alt.Y("candidate:N", title=None), x=alt.X(f"{column}:Q", title=column), tooltip=["candidate", column])
        .properties(width=360, height=ROW_HEIGHT * 2 * len(costs))
    )


# ---------------------------------------------------------------- sweeps (tuning issue)


def sweep_tradeoff(points: pd.DataFrame, metric: str, cost: str, floor: float | None = None) -> alt.LayerChart | alt.FacetChart:
    """Tune metric (with its interval) against cost, one point per configuration that ran: the
    Pareto front joined by a line, the chosen configuration ringed, the rule's floor (if any)
    dashed. `points` is `tables.sweep_points(...)` (columns cost, metric, low, high, pareto,
    chosen, label)."""
    shown = points.dropna(subset=["cost", "metric"])
    base = alt.Chart(shown)
    x = alt.X("cost:Q", title=cost, scale=alt.Scale(zero=False), axis=alt.Axis(labelOverlap=True))
    interval = base.mark_rule(color="#9ecae9").encode(
        x=x, y=alt.Y("low:Q", title=f"tune {metric}", scale=alt.Scale(zero=False)), y2="high:Q"
    )
    dots = base.mark_circle(size=60).encode(
        x=x,
        y="metric:Q",
        color=alt.Color("pareto:N", title="Pareto front", scale=alt.Scale(domain=[True, False], range=["#e45756", "#4c78a8"])),
        tooltip=[
            "label",
            alt.Tooltip("metric:Q", format=".4f"),
            alt.Tooltip("low:Q", format=".4f"),
            alt.Tooltip("high:Q", format=".4f"),
            alt.Tooltip("cost:Q", format=".4g"),
        ],
    )
    front = (
        alt.Chart(shown[shown["pareto"]].sort_values("cost")).mark_line(color="#e45756").encode(x=x, y="metric:Q", order="cost:Q")
    )
    chosen = (
        alt.Chart(shown[shown["chosen"]])
        .mark_point(size=300, shape="circle", color="black", strokeWidth=2)
        .encode(x=x, y="metric:Q")
    )
    layers = [interval, front, dots, chosen]
    if floor is not None:
        layers.append(alt.Chart(pd.DataFrame({"floor": [floor]})).mark_rule(color="black", strokeDash=[4, 3]).encode(y="floor:Q"))
    return alt.layer(
        *layers,
        title=f"Tune {metric} against {cost} (ringed: chosen" + (f"; dashed: floor {floor:g})" if floor is not None else ")"),
    ).properties(width=460, height=300)


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
        color=alt.Color(
            "position:N", scale=alt.Scale(domain=["on the front", "behind the front"], range=["#e45756", "#4c78a8"]), title=None
        ),
    )
    ci = base.mark_rule(strokeWidth=2).encode(
        y=alt.Y("net_true_ci_low:Q", title="net-true facts: on these records (point), a new test set (bar)"),
        y2="net_true_ci_high:Q",
    )
    point = base.mark_point(filled=True, size=70).encode(
        y="net_true:Q", tooltip=["candidate", "net_true", alt.Tooltip("cost:Q", format=".3g"), "verdict"]
    )
    label = base.mark_text(align="left", dx=7, dy=-7, fontSize=11).encode(y="net_true:Q", text="candidate:N")
    front = (
        alt.Chart(rows[rows["on_front"]].sort_values("cost"))
        .mark_line(color="#e45756", strokeDash=[4, 3])
        .encode(x="cost:Q", y="net_true:Q")
    )
    return alt.layer(ci, front, point, label, title="Net-true facts against cost: the Pareto front").properties(
        width=460, height=300
    )


def gain_chart(table: pd.DataFrame, baseline: str) -> alt.TopLevelMixin:
    """Each candidate's net-true gain over the baseline with its paired 95% interval."""
    rows = table[table["candidate"] != baseline].copy()
    rows["interval"] = ((rows["gain_ci_low"] > 0) | (rows["gain_ci_high"] < 0)).map({True: "excludes 0", False: "includes 0"})
    base = alt.Chart(rows).encode(
        y=alt.Y("candidate:N", title=None, sort=list(rows["candidate"])),
        color=alt.Color("interval:N", scale=alt.Scale(domain=["excludes 0", "includes 0"], range=["#e45756", "#4c78a8"])),
    )
    ci = base.mark_rule(strokeWidth=2).encode(
        x=alt.X("gain_ci_low:Q", title=f"net-true minus {baseline}'s: on these records (point), a new test set (bar)"),
        x2="gain_ci_high:Q",
    )
    point = base.mark_point(filled=True, size=50).encode(x="gain:Q", tooltip=["candidate", "gain", "verdict"])
    zero = alt.Chart(pd.DataFrame({"zero": [0.0]})).mark_rule(color="black", strokeDash=[4, 3]).encode(x="zero:Q")
    return alt.layer(ci, point, zero, title=f"Gain over {baseline} (paired component bootstrap)").properties(
        width=420, height=ROW_HEIGHT * 2 * max(1, len(rows))
    )
