"""The compare and corpus reports made for reading, like the grade report (`views.verdict_markdown`):
the verdict and the headline first, then the chart, then compact tables (every column visible;
`views.table_html` shows them), the long tail folded.

Presentation only: the statistics come from `grading` (slice tables, paired comparisons) and the
hub rule from `corpus.freeze.find_hubs`; these functions choose what a reader sees first and how
it is written.
"""

from __future__ import annotations

import math

from microctx.reports.tables import interval_text, p_text
from microctx.reports.text import md, plural
from microctx.reports.views import judged_slices, significant

# ---------------------------------------------------------------- comparison


def _overall(frame):
    return frame[frame["slice_kind"] == "overall"].iloc[0]


def _f1_text(row, why: bool = True) -> str:
    """F1 with its interval; without one, its reason when `why` (the side-by-side table leaves the
    reason to the verdict and the candidates table above it, so every column stays in view)."""
    if not why and not bool(row["estimable"]):
        return interval_text(row["f1"], None, None, False)
    reason = row.get("no_interval_reason")
    return interval_text(row["f1"], row["ci_low"], row["ci_high"], bool(row["estimable"]), row["n_components"],
                         reason if isinstance(reason, str) and reason else None)  # fmt: skip


def _diff_text(row, sign: float = 1.0, why: bool = True) -> str:
    """F1(a) - F1(b) (times `sign`) with its paired interval: "+0.117 [+0.081, +0.158]"; without
    one, its reason when `why` (tables leave the reason to the verdict above them)."""
    low, high = row["f1_diff_ci_low"], row["f1_diff_ci_high"]
    if sign < 0:
        low, high = -high, -low
    diff = sign * row["f1_diff"]
    if not bool(row["estimable"]) or math.isnan(low):
        reason = row.get("no_interval_reason") if why else None
        return f"{diff:+.3f} (no interval{': ' + reason if isinstance(reason, str) and reason else ''})"
    return f"{diff:+.3f} [{low:+.3f}, {high:+.3f}]"


def _pair_outcome(row) -> str:
    """A paired row's outcome: not judged (no interval), not significant, or which side is higher."""
    if not bool(row["estimable"]):
        return "not judged"
    if not bool(row["significant"]):
        return "not significant"
    return f"{row['a']} higher" if row["f1_diff"] > 0 else f"{row['b']} higher"


def compare_verdict(compared) -> str:
    """Markdown: the comparison's verdict (which candidate leads, and whether significantly), then
    the headline: each candidate's overall F1 with its interval and each pair's F1 difference."""
    overall = {name: _overall(g.slices) for name, g in compared.grades.items()}
    ranked = sorted(overall, key=lambda n: -overall[n]["f1"])
    top = ranked[0]
    pairs = compared.paired[compared.paired["slice_kind"] == "overall"]
    unsure, unjudged = [], []
    for _, row in pairs[(pairs["a"] == top) | (pairs["b"] == top)].iterrows():
        other, outcome = (row["b"] if row["a"] == top else row["a"]), _pair_outcome(row)
        if outcome == "not judged":
            unjudged.append(other)
        elif outcome != f"{top} higher":
            unsure.append(other)
    if unsure:
        verdict = f"no clear winner: **{md(top)}** has the highest F1, but not significantly above {', '.join(map(md, unsure))}"
    elif unjudged:
        verdict = (f"**{md(top)}** has the highest F1 on these records; whether it stays ahead beyond them is not "
                   f"judged (against {', '.join(map(md, unjudged))}: the overall difference has no interval)")  # fmt: skip
    else:
        verdict = f"**{md(top)}** has the highest F1, significantly above every other candidate"
    lines = [f"## Verdict: {verdict}", ""]
    for name in ranked:
        g = compared.grades[name].result.grade
        lines.append(f"- **{md(name)}**: F1 {_f1_text(overall[name])}; {g['exact_records']:,} of "
                     f"{plural(g['test_records'], 'test record')} exact; contract {'PASS' if g['quality_pass'] else 'FAIL'}")  # fmt: skip
    lines.append("")
    for _, row in pairs.iterrows():
        p = p_text(row["p_equal_f1_adjusted"])
        lines.append(f"- {md(row['a'])} − {md(row['b'])}: F1 difference {_diff_text(row)} (paired, n_eff "
                     f"{significant(row['n_eff'], 2)}), adjusted p_equal_f1 {p or 'not tested'}: {md(_pair_outcome(row))}")  # fmt: skip
    return "\n".join(lines)


def compare_candidates(compared):
    """One row per candidate, best F1 first: the contract verdict, F1 with its interval, exact
    records, false and missed facts, weak and not-judged slices (compact; slices.csv has all)."""
    import pandas as pd

    rows = []
    for name, g in compared.grades.items():
        grade, table = g.result.grade, g.slices
        row = _overall(table)
        rows.append({
            "candidate": name, "contract": "PASS" if grade["quality_pass"] else "FAIL", "f1 [95% interval]": _f1_text(row, why=False),
            "exact records": f"{grade['exact_records']:,} of {grade['test_records']:,}",
            "false facts": grade["false_positive_facts"], "missed facts": grade["false_negative_facts"],
            "weak slices": int(table["weak"].sum()), "not judged": int(((table["slice_kind"] != "overall") & ~judged_slices(table)).sum()),
            "_f1": row["f1"],
        })  # fmt: skip
    return pd.DataFrame(rows).sort_values("_f1", ascending=False, kind="mergesort").drop(columns="_f1").reset_index(drop=True)


def _judged_keys(table) -> set:
    """(slice_kind, slice) of every slice judged for at least one candidate of a stacked table."""
    judged = table[judged_slices(table)]
    return set(zip(judged["slice_kind"], judged["slice"]))


def compare_slices(table):
    """(judged, tail): the side-by-side slice table (one F1 [interval] column per candidate, weak
    count), as `slice`, `support`, ...; `judged`: the overall row and every slice judged for at
    least one candidate; `tail`: the rest (too small or no interval for every candidate)."""
    import pandas as pd

    keys = _judged_keys(table)
    rows = []
    candidates = list(dict.fromkeys(table["candidate"]))
    for (kind, name), group in table.groupby(["slice_kind", "slice"], sort=False):
        row = {"slice": "overall" if kind == "overall" else f"{kind}: {name}", "support": int(group["support"].iloc[0])}
        by = group.set_index("candidate")
        for candidate in candidates:
            row[f"f1 {candidate}"] = _f1_text(by.loc[candidate], why=False) if candidate in by.index else "–"
        row["weak in"] = int(group["weak"].sum())
        row["_judged"] = kind == "overall" or (kind, name) in keys
        rows.append(row)
    frame = pd.DataFrame(rows)
    judged, tail = frame[frame["_judged"]], frame[~frame["_judged"]]
    return judged.drop(columns="_judged").reset_index(drop=True), tail.drop(columns="_judged").reset_index(drop=True)


def compare_pairs(paired):
    """(judged, tail): each pair's slices as a reader needs them, named as paired.csv names them:
    `f1_diff` with its paired interval, the adjusted p-value `significant` reads
    (`p_equal_f1_adjusted`), `b10` and `b01` (records exact under only one side), and the outcome;
    `judged`: estimable slices with enough support, `tail`: the rest."""
    import pandas as pd

    rows = []
    up_front = (paired["slice_kind"] == "overall") | judged_slices(paired)
    for (_, row), judged in zip(paired.iterrows(), up_front):
        rows.append({
            "slice": "overall" if row["slice_kind"] == "overall" else f"{row['slice_kind']}: {row['slice']}",
            "pair": f"{row['a']} − {row['b']}", "support": int(row["support"]), "f1_diff [95% interval]": _diff_text(row, why=False),
            "p_equal_f1_adjusted": p_text(row["p_equal_f1_adjusted"]) or "–", "b10": int(row["b10"]), "b01": int(row["b01"]),
            "outcome": _pair_outcome(row), "_judged": judged,
        })  # fmt: skip
    frame = pd.DataFrame(rows)
    judged, tail = frame[frame["_judged"]], frame[~frame["_judged"]]
    return judged.drop(columns="_judged").reset_index(drop=True), tail.drop(columns="_judged").reset_index(drop=True)


COST_COLUMNS = (  # (manifest column, shown as, scale)
    ("wall_seconds", "wall seconds", 1),
    ("cpu_seconds", "CPU seconds", 1),
    ("peak_memory_bytes", "peak memory MiB", 1 / 2**20),
    ("model_calls", "model calls", 1),
    ("input_tokens", "input tokens", 1),
    ("output_tokens", "output tokens", 1),
    ("cost_microdollars", "dollars per 1,000 records", None),
)


def compare_costs(costs, records: int | None = None):
    """The run costs a reader compares, one row per candidate, in units that read (MiB; model
    dollars per 1,000 records, when `records`, the records a run answers, is given); columns no
    candidate reports are left out."""
    import pandas as pd

    view = pd.DataFrame({"candidate": costs["candidate"]}) if len(costs) else pd.DataFrame()
    for column, name, scale in COST_COLUMNS:
        if column not in costs or costs[column].isna().all():
            continue
        if scale is None:
            if not records:
                continue
            view[name] = costs[column] / 1e6 / records * 1000
        else:
            view[name] = costs[column] * scale
    return view


# ---------------------------------------------------------------- corpus


def corpus_hubs(records) -> list[tuple[int, int]]:
    """(issue number, in-corpus references) of every hub record (more than
    `corpus.freeze.HUB_REFERENCES` in-corpus references), most first: the freeze's own rule, on
    the references the public text gives, as the record table derived them (`records`:
    `grading.records.record_table`, one derivation per record)."""
    from microctx.corpus.freeze import find_hubs

    return find_hubs([int(n) for n in records["number"]], [list(refs) for refs in records["references"]])


def hub_table(corpus, records, hubs):
    """One row per hub record: number, split, in-corpus references, its component's size, title."""
    import pandas as pd

    by_number = {int(r["number"]): r for r in corpus.records}
    size = dict(zip(records["number"].astype(int), records["component_size"])) if "component_size" in records else {}
    rows = [{"issue": f"#{n}", "split": by_number[n]["split"], "in-corpus references": count,
             "component size": size.get(n), "title": _short(by_number[n]["title"])} for n, count in hubs]  # fmt: skip
    return pd.DataFrame(rows, columns=["issue", "split", "in-corpus references", "component size", "title"])


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def corpus_verdict(frame, records, hubs) -> str:
    """Markdown: the corpus's verdict (its size, its test split's components, its hub records)
    and the headline figures a reader checks before trusting a grade on it."""
    from microctx.corpus.freeze import HUB_REFERENCES

    splits = frame["split"].value_counts()
    test = records[records["split"] == "test"]
    components = test["component"].nunique()
    largest = int(test.groupby("component").size().max()) if len(test) else 0
    hub_text = (f"{plural(len(hubs), 'hub record')} (more than {HUB_REFERENCES} in-corpus references), named below"
                if hubs else f"no hub record (none references more than {HUB_REFERENCES} in-corpus issues)")  # fmt: skip
    parts = ", ".join(f"{int(splits.get(s, 0)):,} {s}" for s in ("train", "tune", "test"))
    labels = {label for labels in frame["labels"] for label in labels}
    unlabelled = int((frame["labels"].map(len) == 0).sum())
    return (
        f"## Verdict: {plural(len(frame), 'record')}, a test split of {plural(len(test), 'record')} in "
        f"{plural(components, 'split component')}; {hub_text}\n\n"
        f"**Splits** {parts}. **Test components**: the largest holds {plural(largest, 'record')} "
        f"({significant(100 * largest / len(test) if len(test) else 0, 2)}% of the test split); slice intervals "
        f"resample whole components. **Labels**: {len(labels):,} distinct, {plural(unlabelled, 'record')} without one. "
        f"**References**: {plural(int(records['has_references'].sum()), 'record')} cite another issue."
    )


def with_long_tail(frame, tail_noun: str, head: int = 12) -> str:
    """HTML: the first `head` rows of a table (in its order) and, when there are more, the rest
    folded away under "N more <tail_noun>s"."""
    from microctx.reports.views import folded, table_html

    shown = table_html(frame.iloc[:head].reset_index(drop=True))
    rest = frame.iloc[head:].reset_index(drop=True)
    return shown + (folded(table_html(rest), f"{plural(len(rest), tail_noun)} more") if len(rest) else "")
