"""How a report reads: the verdict first, compact tables with every column visible, the long tail
folded away, numbers at the precision they deserve.

Presentation only: the statistics (columns, intervals, n_eff, weak flags) come from
`microctx.grading.slices`; these functions choose what a reader sees and how it is written.
`table_html` is the one way a report shows a DataFrame: escaped (nothing from the data is live),
no `NaN` (an empty cell reads "–"), slice names that never wrap, no index column.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from microctx.reports.tables import interval_text
from microctx.reports.text import md, plural

DASH = "–"
# Slice names stay on one line; the table scrolls sideways in a narrow window rather than
# hiding a column ("...") or wrapping a name over four lines.
TABLE_STYLE = (
    "<style>.microctx-table{border-collapse:collapse;font-size:13px;margin:0.4em 0}"
    ".microctx-table th,.microctx-table td{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd}"
    ".microctx-table th:first-child,.microctx-table td:first-child{text-align:left;white-space:nowrap}"
    ".microctx-table th,.microctx-table td{white-space:nowrap}.microctx-scroll{overflow-x:auto;max-width:100%}"
    ".microctx-wrap td:not(:first-child){white-space:normal;overflow-wrap:anywhere;max-width:36em;text-align:left}"
    "details.microctx-fold>summary{cursor:pointer;font-weight:600;margin:0.4em 0}</style>"
)


def significant(value, digits: int = 3) -> str:
    """A number at `digits` significant digits, never rounded to nothing: 0.899, 1e-05, 0.00012,
    12.3, 4,326 (integers and values of 1,000 or more in full with thousands separators);
    "–" for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    number = float(value)
    if number == int(number) and abs(number) < 1e15:
        return f"{int(number):,}"
    if abs(number) >= 1000:
        return f"{number:,.0f}"
    return f"{number:.{digits}g}"


def table_html(frame, *, numbers: int = 3, wrap: bool = False) -> str:
    """A DataFrame as a report's HTML table: escaped, no index, no NaN, floats at `numbers`
    significant digits, first column (the slice) kept on one line, scrolled rather than cut;
    `wrap`: long text cells (an aggregate's expected and submitted values) wrap in place."""
    view = frame.copy()
    view.columns.name = None  # a pivot's column title would stand over the first column and shift every header
    for column in view.columns:
        if view[column].dtype.kind in "fiu":
            view[column] = [significant(v, numbers) for v in view[column]]
        elif view[column].dtype.kind == "b":
            view[column] = ["yes" if v else "" for v in view[column]]
    classes = "microctx-table microctx-wrap" if wrap else "microctx-table"
    body = view.to_html(index=False, na_rep=DASH, escape=True, classes=classes, border=0)
    return f'{TABLE_STYLE}<div class="microctx-scroll">{body}</div>'


def folded(inner_html: str, summary: str) -> str:
    """`inner_html` inside a collapsible section (closed), titled `summary` (escaped)."""
    return f'<details class="microctx-fold"><summary>{html.escape(summary)}</summary>{inner_html}</details>'


def judged_slices(table):
    """Boolean per row of a slice (or paired) table: the slices a report judges and shows up front
    (not the overall row, enough support, an interval); the others are the folded long tail."""
    return (table["slice_kind"] != "overall") & ~table["too_small"].astype(bool) & table["estimable"].astype(bool)


def _reason(row) -> str | None:
    """The slice table's `no_interval_reason` (why no beyond-these-records interval), when it has one."""
    reason = row.get("no_interval_reason")
    return reason if isinstance(reason, str) and reason else None


def slice_status_text(row) -> str:
    """Why a slice is or is not judged, in words: "weak", "ok", "too small (n=3 < 20)",
    "no interval (4 components)"."""
    if bool(row.get("weak")):
        return "weak"
    if not bool(row.get("estimable", True)):
        return f"no interval ({_reason(row) or plural(int(row['n_components']), 'component')})"
    if bool(row.get("too_small")):
        return "too small (support below the minimum)"
    return "ok"


def compact_slices(table):
    """The slice table a reader needs: slice, support, F1 with its 95% interval, n_eff, and the
    judgement (weak, ok, or why not judged). Every column fits; slices.csv keeps all of them."""
    import pandas as pd

    rows = []
    for _, row in table.iterrows():
        name = "overall" if row["slice_kind"] == "overall" else f"{row['slice_kind']}: {row['slice']}"
        estimable = bool(row.get("estimable", True))  # without an interval, the reason is said once, under "judged"
        f1 = interval_text(row["f1"], row["ci_low"] if estimable else None, row["ci_high"], estimable)
        rows.append(
            {
                "slice": name,
                "support": int(row["support"]),
                "f1 [95% interval]": f1,
                "n_eff": row.get("n_eff"),
                "judged": slice_status_text(row),
            }
        )
    return pd.DataFrame(rows, columns=["slice", "support", "f1 [95% interval]", "n_eff", "judged"])


def verdict_markdown(name: str, result, table) -> str:
    """The report's first lines: the verdict, then the headline figure (overall F1 with its
    interval and what it rests on) and how many slices are weak."""
    g = result.grade
    overall = table[table["slice_kind"] == "overall"].iloc[0]
    judged = table[judged_slices(table)]
    weak = int(table["weak"].sum())
    f1 = interval_text(
        overall["f1"],
        overall["ci_low"],
        overall["ci_high"],
        bool(overall["estimable"]),
        overall["n_components"],
        _reason(overall),
    )
    verdict = "PASS" if g["quality_pass"] else "FAIL"
    return (
        f"## Verdict: **{verdict}** ({md(name)})\n\n"
        f"**F1 {f1}** over {plural(int(overall['support']), 'gold fact')} in "
        f"{plural(int(overall['n_components']), 'split component')} (n_eff {significant(overall['n_eff'], 2)}); "
        f"{g['exact_records']:,} of {plural(g['test_records'], 'test record')} exact; "
        f"{plural(weak, 'weak slice')} of {len(judged):,} judged.\n\n"
        f"{plural(g['false_positive_facts'], 'false positive fact')}, {plural(g['false_negative_facts'], 'missed fact')}, "
        f"{plural(g['aggregate_errors'], 'aggregate error')}, {plural(g['citation_errors'], 'citation error')}."
    )


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def _cells(frame) -> list[list[str]]:
    return [
        [significant(v) if isinstance(v, float) or (hasattr(v, "dtype") and v.dtype.kind == "f") else str(v) for v in row]
        for row in frame.itertuples(index=False)
    ]


def markdown_table(frame) -> str:
    """A DataFrame as a Markdown (pipe) table: numbers right-aligned, every text cell through `md`
    (a label `<img onerror=...>` or `[x](javascript:...)` shows as text wherever the file is
    rendered, raw HTML allowed or not; `|` escaped)."""
    header = [str(c) for c in frame.columns]
    numeric = [frame[c].dtype.kind in "fiu" for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if n else "---" for n in numeric) + "|"]
    rows = [[cell.replace("|", "\\|") if n else md(cell) for cell, n in zip(row, numeric, strict=True)] for row in _cells(frame)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def latex_table(frame, caption: str = "") -> str:
    """A DataFrame as a LaTeX `tabular` (booktabs rules), every cell escaped."""

    def esc(text: str) -> str:
        return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)

    align = "".join("r" if frame[c].dtype.kind in "fiu" else "l" for c in frame.columns)
    lines = [
        f"% {esc(caption)}" if caption else "% microctx slice table",
        f"\\begin{{tabular}}{{{align}}}",
        "\\toprule",
        " & ".join(esc(str(c)) for c in frame.columns) + " \\\\",
        "\\midrule",
    ]
    lines += [" & ".join(esc(cell) for cell in row) + " \\\\" for row in _cells(frame)]
    lines += ["\\bottomrule", "\\end{tabular}"]
    return "\n".join(lines) + "\n"


def write_slice_exports(table, output_dir: str, name: str = "slices") -> None:
    """`<name>.md` and `<name>.tex` beside `<name>.csv`: the compact slice table of every slice
    (judged first, worst first, then the ones not judged), for a write-up."""
    import pandas as pd

    from microctx._io.atomic import atomic_write

    overall = table[table["slice_kind"] == "overall"]
    rest = table[table["slice_kind"] != "overall"]
    judged = table[judged_slices(table)].sort_values(["f1", "support"], ascending=[True, False], kind="mergesort")
    ordered = compact_slices(pd.concat([overall, judged, rest.drop(judged.index)]))
    atomic_write(Path(output_dir) / f"{name}.md", markdown_table(ordered).encode())
    atomic_write(
        Path(output_dir) / f"{name}.tex", latex_table(ordered, "F1 per slice with its 95% Korn-Graubard interval").encode()
    )


MONEY = ("dollars", "model_dollars")


def frontier_view(table):
    """The frontier table as it reads: a money cost per record becomes dollars per 1,000 records
    (0.000179 $/record reads 0.179 $ per 1,000), and so does the extra cost; other measures stay."""
    view = table.copy()
    measure = str(view["cost_measure"].iloc[0]) if "cost_measure" in view and len(view) else ""
    if measure in MONEY:
        for column, name in (
            ("cost", f"{measure} per 1,000 records"),
            ("extra_cost_per_record", "extra dollars per 1,000 records"),
        ):
            if column in view:
                view[name] = view.pop(column) * 1000
    return view
