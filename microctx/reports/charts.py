"""Altair charts for the report notebooks, and the static images a report carries: the one
namespace the notebooks call (`charts.show(charts.slice_f1(...), ...)`).

Two kinds of functions:
- tidy tables from the corpus or from slice tables (`label_counts`, `fact_density`, ...): data
  in, small DataFrame out, so a chart never embeds record bodies;
- chart builders (`state_by_split`, `labels_by_split`, `slice_f1`, ...): a DataFrame in, an
  altair chart out; the grade report's three (`slice_f1`, `precision_recall`,
  `outcomes_by_kind`) are built as the Vega-Lite dicts altair would make (`figures.Spec`), and
  the corpus and cost charts' modules load when first named, so that report's kernel never
  imports altair (issue 24).
They live by report: `corpus_charts` (the corpus report), `slice_charts` (slice tables: grade and
compare), `cost_charts` (run costs, sweeps, the net-true frontier). Rendering, the theme, the
palette and the exported figures are `microctx.reports.figures` (`show`, `save`, `render`,
`show_interactive`).
"""

from __future__ import annotations

# ruff: noqa: F401  (the notebooks call them as charts.show, charts.slice_f1, ...)
import importlib
from typing import Any

from microctx.reports.figures import (
    BLUE,
    BROWN,
    GREEN,
    GREY,
    ORANGE,
    PAIRED_COLORS,
    PAIRED_ORDER,
    PNG_MAX_PIXELS,
    PNG_SCALE,
    RED,
    ROW_HEIGHT,
    SCHEMA_URL,
    SPLIT_COLORS,
    STATUS_COLORS,
    STATUS_ORDER,
    Figure,
    Spec,
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
from microctx.reports.slice_charts import (
    compare_f1,
    outcomes_by_kind,
    paired_f1_diff,
    precision_recall,
    slice_f1,
    slice_status,
)

# the corpus, cost and sweep charts are altair charts: their modules (and altair, 0.25 s) are
# imported when a notebook first names one of them, so the grade report's kernel imports neither
_LATER = {
    "microctx.reports.corpus_charts": (
        "component_size_counts",
        "component_sizes_chart",
        "cue_word_counts",
        "cue_words_chart",
        "daily_events",
        "fact_density",
        "fact_density_chart",
        "label_counts",
        "labels_by_split",
        "state_by_split",
        "timeline_events",
        "timeline_with_labels",
    ),
    "microctx.reports.cost_charts": ("cost_chart", "frontier_chart", "gain_chart", "sweep_tradeoff"),
}
_HOME = {name: module for module, names in _LATER.items() for name in names}


def __getattr__(name: str) -> Any:
    """A corpus or cost chart function, its module imported on first use (PEP 562)."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME[name]), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOME])
