"""`SliceFrame`: a slice table with MetricFrame-like accessors (fairlearn's shape), for notebooks."""

from __future__ import annotations

import pandas as pd


class SliceFrame:
    """A slice table with MetricFrame-like accessors (fairlearn's shape).

    `overall`: the overall row as a Series; `by_group`: every other row, indexed by
    (slice_kind, slice); `group_min(metric)` / `group_max(metric)`: per slice kind, the
    smallest/largest value among slices large enough to judge (enough support, estimable);
    `difference(metric)`: per kind, max - min (`method="between_groups"`) or the largest
    |slice - overall| (`"to_overall"`); `weakest(n)`: the n judged slices with the lowest F1;
    `too_small()`: the slices too small to judge; `weak()`: the slices marked weak;
    `not_estimable()`: the slices in too few components for an interval.
    """

    def __init__(self, table: pd.DataFrame):
        self.table = table

    # display (notebooks): the overall row, the counts, and the weakest judged slices
    def __len__(self) -> int:
        return len(self.table)

    @property
    def summary(self) -> str:
        from microctx.display import Summary

        o = self.overall
        return Summary(
            f"{len(self.table):,} slices ({int(self.table['weak'].sum()):,} weak, {int(self.table['too_small'].sum()):,} too small); "
            f"overall F1 {o['f1']:.3f} on these records ({int(o['support']):,} facts; {_beyond(o)})"
        )

    def __repr__(self) -> str:
        return f"SliceFrame({self.summary})"

    def _repr_html_(self) -> str:
        from microctx.display import card_html, fields_html, table_html

        columns = ["slice_kind", "slice", "support", "tp", "fp", "fn", "f1", "ci_low", "ci_high", "weak", "too_small"]
        rows = [
            [f"{v:.3f}" if isinstance(v, float) else v for v in row]
            for row in self.weakest(5)[columns[2:]].reset_index()[columns].itertuples(index=False)
        ]
        return card_html(
            "Slices",
            fields_html([("summary", self.summary)]),
            "<div style='margin-top:4px'>weakest judged slices (.table has every row)</div>",
            table_html(columns, rows),
        )

    @property
    def overall(self) -> pd.Series:
        return self.table[self.table["slice_kind"] == "overall"].iloc[0]

    @property
    def by_group(self) -> pd.DataFrame:
        return self.table[self.table["slice_kind"] != "overall"].set_index(["slice_kind", "slice"])

    def _judged(self) -> pd.DataFrame:
        groups = self.by_group
        return groups[~groups["too_small"] & groups["estimable"]]

    def group_min(self, metric: str = "f1") -> pd.Series:
        return self._judged().groupby(level="slice_kind", sort=False)[metric].min()

    def group_max(self, metric: str = "f1") -> pd.Series:
        return self._judged().groupby(level="slice_kind", sort=False)[metric].max()

    def difference(self, metric: str = "f1", method: str = "between_groups") -> pd.Series:
        if method == "between_groups":
            return self.group_max(metric) - self.group_min(metric)
        if method == "to_overall":
            gap = (self._judged()[metric] - self.overall[metric]).abs()
            return gap.groupby(level="slice_kind", sort=False).max()
        raise ValueError(f"method must be 'between_groups' or 'to_overall', got {method!r}")

    def weakest(self, n: int = 5, metric: str = "f1") -> pd.DataFrame:
        return self._judged().sort_values([metric, "support"], ascending=[True, False], kind="mergesort").head(n)

    def weak(self) -> pd.DataFrame:
        return self.table[self.table["weak"]]

    def too_small(self) -> pd.DataFrame:
        return self.table[self.table["too_small"]]

    def not_estimable(self) -> pd.DataFrame:
        return self.table[~self.table["estimable"]]


def _beyond(row: pd.Series) -> str:
    """The overall row's beyond-these-records interval, or why there is none."""
    if row["estimable"]:
        return f"beyond them [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    return f"no interval beyond them: {row['no_interval_reason']}"
