"""What the report notebooks compute: paths in, tables out, so a notebook cell only calls and shows.

`load_inputs` loads a corpus, answers and submissions (empty paths mean the s8f snapshot and the
example submissions); `grade_outputs` and `compare_outputs` grade and slice them; the rest turn
grades, manifests and facts into the small tables the notebooks display.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from microctx.contract.canonical import dumps
from microctx.errors import InputError

if TYPE_CHECKING:
    from microctx.contract.records import RunManifest
    from microctx.corpus.public import Corpus
from microctx._io.paths import inside, safe_name, safe_name_from
from microctx.contract.facts import write_grade
from microctx.reports.text import code_span, linked, md, plural, safe_url  # noqa: F401  (notebooks: tables.md, ...)


@dataclass
class Inputs:
    """Loaded report inputs: the corpus, the answers and the submissions (name -> dict)."""

    public: str
    answers_path: str
    corpus: Corpus
    answers: dict
    submissions: dict
    paths: dict = field(default_factory=dict)  # name -> submission file (none for demo submissions)
    # the SHA-256 of the bytes each file was parsed from (what the held-out ledger records): the
    # answers' (None for the defaults' parse) and name -> a submission file's
    answers_sha256: str | None = None
    digests: dict = field(default_factory=dict)


def default_paths():
    """The s8f artifacts through the data layer (what an empty notebook parameter means)."""
    from microctx.corpus import snapshot as data

    return data.s8f()


def load_inputs(
    public: str = "",
    answers: str = "",
    submissions: Sequence[str] = (),
    names: Sequence[str] = (),
    default: Sequence[str] = ("oracle", "planted"),
) -> Inputs:
    """Load the corpus, the answers and each submission; empty paths mean the s8f artifacts,
    and no submissions mean the `default` demo submissions ("oracle": the published answers,
    "planted": `demo.planted_submission`)."""
    from microctx.contract.schemas import read_answers, read_submission
    from microctx.corpus.public import load_corpus

    if not public or not answers:
        paths = default_paths()
        public = public or str(paths.public)
        answers = answers or str(paths.answers)
    corpus = load_corpus(public)
    gold, answers_sha256 = read_answers(answers)
    digests = {}
    if submissions:
        names = list(names) or candidate_names(submissions)
        if len(names) != len(submissions):
            raise InputError(names, f"{len(names)} names for {len(submissions)} submissions")
        read = {name: read_submission(path) for name, path in zip(names, submissions)}
        loaded = {name: document for name, (document, _) in read.items()}
        digests = {name: digest for name, (_, digest) in read.items()}
    else:
        from microctx.grading.examples import demo_submissions

        loaded = {name: sub for name, sub in demo_submissions(gold).items() if name in default}
    paths = dict(zip(names, map(str, submissions))) if submissions else {}
    return Inputs(public, answers, corpus, gold, loaded, paths, answers_sha256, digests)


def candidate_names(paths: Sequence[str]) -> list[str]:
    """A name per submission: the file name without `.json` (and without `.submission`), made
    unique with a numeric suffix when two files share a name, and safe as a file name (characters
    other than letters, digits, `.`, `_`, `-` become `_`)."""
    names = []
    for path in paths:
        name = Path(path).name
        for suffix in (".json", ".submission"):
            name = name.removesuffix(suffix)
        names.append(safe_name_from(name))  # a name becomes a file name (grades/<name>.json)
    seen: dict[str, int] = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if names.count(name) == 1 else f"{name}-{seen[name]}")
    return unique


@dataclass
class GradeOutputs:
    """One submission graded and sliced."""

    name: str
    result: Any  # grading.GradeResult
    facts: Any  # DataFrame of the fact table
    slices: Any  # DataFrame, slices.slice_table
    look: dict | None = None  # the held-out ledger entry this grade appended (microctx.grading.ledger)


# statistics defaults (microctx.grading.stats), repeated here so this module imports no numpy
N_BOOT, SEED, MIN_SUPPORT, MIN_COMPONENTS = 10_000, 0, 20, 10


def grade_one(
    name: str,
    inputs: Inputs,
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    min_support: int = MIN_SUPPORT,
    min_components: int = MIN_COMPONENTS,
    records=None,
) -> GradeOutputs:
    from microctx.contract.score import grade
    from microctx.grading import slices

    result = grade(inputs.answers, inputs.submissions[name])
    facts = slices.facts_frame(result.facts)
    table = slices.slice_table(
        facts, inputs.corpus, n_boot=n_boot, seed=seed, min_support=min_support, min_components=min_components, records=records
    )
    return GradeOutputs(name, result, facts, table)


def grade_outputs(inputs: Inputs, output_dir: str = "", **kw) -> GradeOutputs:
    """Grade and slice the (single) submission; with `output_dir`, write grade.json,
    grade.facts.csv and slices.csv there."""
    from microctx.grading import ledger
    from microctx.grading.slices import write_slices_csv

    if len(inputs.submissions) != 1:
        raise InputError("submissions", f"a grade report takes one submission, got {len(inputs.submissions)}")
    (name,) = inputs.submissions
    outputs = grade_one(name, inputs, **kw)
    outputs.look = ledger.record_report_look(inputs, name, outputs.result, "report grade")
    if output_dir:
        write_grade(outputs.result, Path(output_dir) / "grade.json")
        write_slices_csv(outputs.slices, Path(output_dir) / "slices.csv")
    return outputs


@dataclass
class CompareOutputs:
    grades: dict  # name -> GradeOutputs
    table: object  # DataFrame: slice tables stacked with a leading `candidate` column
    paired: object  # DataFrame: paired comparisons of every pair, with `pair`, `a`, `b` columns


def compare_outputs(
    inputs: Inputs,
    output_dir: str = "",
    *,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    min_support: int = MIN_SUPPORT,
    min_components: int = MIN_COMPONENTS,
    via: str = "report compare",
) -> CompareOutputs:
    """Grade and slice every submission, and compare every pair on the same records.

    With `output_dir`: slices.csv (stacked slice tables), paired.csv, and
    grades/<name>.json with its fact table for each candidate. `via`: the ledger's name for the
    door (each candidate's grading on test is one look).
    """
    import pandas as pd

    from microctx.grading import ledger, slices

    if len(inputs.submissions) < 2:
        raise InputError("submissions", f"a comparison needs at least two submissions, got {len(inputs.submissions)}")
    records = slices.record_table(inputs.corpus)
    kw: dict[str, Any] = dict(n_boot=n_boot, seed=seed, min_support=min_support, min_components=min_components)
    grades = {name: grade_one(name, inputs, records=records, **kw) for name in inputs.submissions}
    for name, g in grades.items():
        g.look = ledger.record_report_look(inputs, name, g.result, via)
    frames: list[pd.DataFrame] = [g.slices for g in grades.values()]
    table = pd.concat([f.assign(candidate=name)[["candidate", *f.columns]] for name, f in zip(grades, frames)], ignore_index=True)
    pairs = []
    for a, b in itertools.combinations(grades, 2):
        paired = slices.paired_comparison(
            grades[a].facts,
            grades[b].facts,
            inputs.corpus,
            records=records,
            n_boot=n_boot,
            seed=seed,
            min_support=min_support,
            min_components=min_components,
        )
        paired.insert(0, "b", b)
        paired.insert(0, "a", a)
        paired.insert(0, "pair", f"{a} vs {b}")
        pairs.append(paired)
    paired_table = pd.concat(pairs, ignore_index=True)
    if output_dir:
        for name, g in grades.items():
            write_grade(g.result, inside(output_dir, "grades", f"{safe_name(name, 'candidate name')}.json"))
        slices.write_slices_csv(table, Path(output_dir) / "slices.csv")
        slices.write_slices_csv(paired_table, Path(output_dir) / "paired.csv")
    return CompareOutputs(grades, table, paired_table)


def held_out_looks(outputs) -> str:
    """Markdown: how many times this answer bundle, and each candidate, has been graded on test
    (the held-out ledger's count, this report's own look included). `outputs`: GradeOutputs,
    CompareOutputs, or a dict of candidate name -> ledger entry (`frontier.Frontier.looks`)."""
    if isinstance(outputs, dict):  # name -> ledger entry (the frontier report's `Frontier.looks`)
        named = [(name, look) for name, look in outputs.items() if look]
    else:
        graded = list(outputs.grades.values()) if isinstance(outputs, CompareOutputs) else [outputs]
        named = [(g.name, g.look) for g in graded if g.look]
    if not named:
        return "No held-out ledger entry was made."
    last = named[-1][1]
    times = plural(last["answers_looks"], "time")
    lines = [
        f"**Held-out ledger**: answer bundle `{last['answers_sha256'][:12]}…` has been graded on test "
        f"**{times}** (example and demo looks kept but not counted), this report included."
    ]
    for name, look in named:
        if look.get("marked"):
            lines.append(f"- `{code_span(name)}`: a {look['marked']} look, kept in the ledger and not counted")
            continue
        whose = f"ledger candidate `{code_span(look['candidate'])}`"
        whose += f", configuration `{look['config_digest'][:12]}…`" if look.get("config_digest") else ""
        lines.append(f"- `{code_span(name)}` ({whose}): {plural(look['candidate_looks'], 'look')}")
    return "\n".join(lines)


def interval_text(value, low, high, estimable=True, n_components=None, reason=None) -> str:
    """A metric on these records with its beyond-these-records interval as text: "0.912 [0.894, 0.929]";
    a perfect (or all-wrong) slice's bound as "1 (at least 0.989)" ("0 (at most 0.131)"); a slice
    without an interval with its reason, "0.950 (no interval: n_eff 3.0 below 10: rests on
    component #5112)" (or its component count when no reason is given); "n/a" when undefined."""
    import math

    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if not estimable:
        if reason:
            return f"{value:.3f} (no interval: {reason})"
        where = f": {int(n_components)} components" if n_components is not None else ""
        return f"{value:.3f} (no interval{where})"
    if low is None or (isinstance(low, float) and math.isnan(low)):
        return f"{value:.3f}"
    if value == 1 and high == 1:
        return f"1 (at least {low:.3f})"
    if value == 0 and low == 0:
        return f"0 (at most {high:.3f})"
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def p_text(p) -> str:
    """A p-value for display: two significant digits, never rounded to 0; "" when not tested."""
    import math

    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ""
    return f"{p:.2g}"


def statistics_notes(method: str = "", n_candidates: int = 1, n_pairs: int = 0) -> str:
    """The method paragraph every grade and compare report prints (markdown), from the package,
    followed by `method` (a table's `ci_method`/`method` text: this report's settings) and, with
    several candidates or pairs, the family-wise note."""
    from microctx.grading.stats import METHOD_SUMMARY, family_wise_note

    note = family_wise_note(n_candidates, n_pairs)
    return METHOD_SUMMARY + (f"\n\n**This report:** {method}" if method else "") + (f"\n\n{note}" if note else "")


def contract_result(result) -> object:
    """The grade as a one-row-per-field table (field, value), verdict first."""
    import pandas as pd

    g = result.grade
    rows = [("verdict", "PASS" if g["quality_pass"] else "FAIL")]
    rows += [(k, g[k]) for k in g if k not in ("schema", "quality_pass")]
    return pd.DataFrame(rows, columns=["field", "value"])


def aggregate_errors(answers: dict, submission: dict) -> object:
    """Each aggregate field that differs, spelled out: field, problem, expected, submitted, and
    for count maps the keys that differ; for id lists the first position that differs."""
    import pandas as pd

    from microctx.contract.schemas import AGGREGATE_FIELDS
    from microctx.contract.score import same_json

    gold = answers["aggregates"]
    given = submission.get("aggregates") or {}
    rows = []
    for key in AGGREGATE_FIELDS:
        expected, got = gold.get(key), given.get(key)
        if same_json(expected, got):
            continue
        problem = "missing" if got is None else "differs from gold"
        rows.append((key, problem, _difference(expected, got), _short(expected), _short(got)))
    return pd.DataFrame(rows, columns=["field", "problem", "difference", "expected", "submitted"])


def _difference(expected, got) -> str:
    if isinstance(expected, dict) and isinstance(got, dict):
        keys = sorted(set(expected) | set(got))
        diffs = [
            f"{k}: {expected.get(k, '(absent)')} -> {got.get(k, '(absent)')}"
            for k in keys
            if k not in expected or k not in got or expected[k] != got[k]
        ]
        return "; ".join(diffs[:12]) + (f"; ... {len(diffs) - 12} more" if len(diffs) > 12 else "")
    if isinstance(expected, list) and isinstance(got, list):
        for i, (e, g) in enumerate(zip(expected, got)):
            if e != g:
                return f"position {i + 1}: expected {e}, submitted {g}"
        return f"length: expected {len(expected)}, submitted {len(got)}"
    return f"expected a {type(expected).__name__}, submitted {'nothing' if got is None else type(got).__name__}"


def _short(value, limit: int = 240) -> str:
    text = "(missing)" if value is None else dumps(value).decode().replace("\n", " ")
    text = re.sub(r"\s+", " ", text)
    return text if len(text) <= limit else text[:limit] + " ..."


def citation_errors(facts) -> object:
    """The citation error rows of a fact table: submitted id and what was wrong with it."""
    rows = facts[facts["kind"] == "citation"]
    return rows[["value", "detail"]].rename(columns={"value": "submitted id", "detail": "problem"}).reset_index(drop=True)


def missed_examples(facts, corpus, n: int = 20) -> object:
    """Up to `n` missed (fn) and falsely submitted (fp) facts, spread over kinds and values
    (the first of each kind and value, then the rest in table order), with the issue URL."""
    errors = facts[facts["outcome"].isin(("fn", "fp"))].copy()
    if errors.empty:
        return errors.assign(number=[], title=[], url=[])[["record_id", "kind", "value", "outcome", "detail"]]
    errors["first"] = ~errors.duplicated(["kind", "value", "outcome"])
    errors = errors.sort_values("first", ascending=False, kind="mergesort").head(n)
    by_id = {r["id"]: r for r in corpus.records}
    errors["title"] = errors["record_id"].map(lambda i: by_id[i]["title"])
    errors["url"] = errors["record_id"].map(lambda i: by_id[i]["url"])
    return errors[["record_id", "kind", "value", "outcome", "detail", "title", "url"]].reset_index(drop=True)


def cost_table(submission_paths: Sequence[str], names: Sequence[str]) -> object:
    """One row per candidate with a manifest: `ok` and every numeric field of the manifest
    (nested objects flattened as `outer.inner`), the cost columns of the comparison; and
    `model_calls`, `input_tokens`, `output_tokens`, `cached_tokens` as the runner counted them
    where its proxy could (else as the candidate reported them), with `counts_source` and
    `counts_agree` (False: the candidate's counters differ from the runner's count;
    microctx.candidates.runner.model_counts)."""
    import pandas as pd

    from microctx.contract.records import model_counts, read_manifest

    rows = []
    for name, path in zip(names, submission_paths):
        manifest = read_manifest(path, strict=True)
        if manifest is None:
            continue
        row: dict[str, Any] = {"candidate": name, "ok": manifest.ok}
        for key, value in _flatten(manifest.as_dict()):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row[key] = value
        row.update(_network_costs(manifest))
        row.update(model_counts(manifest))  # the runner's count of model calls and tokens where it has one
        rows.append(row)
    return pd.DataFrame(rows)


def _network_costs(manifest: RunManifest) -> dict:
    """Record-mode network use as tool calls: `network.requests` and `network.denied` (counts from the
    runner's proxy), and `tool_calls_with_network`, the candidate's self-reported tool calls plus
    every request the runner logged (a run without a network record adds nothing)."""
    network = manifest.network
    if network is None:
        return {}
    requests, denied = network.get("requests"), network.get("denied")
    n_requests = len(requests) if isinstance(requests, list) else 0
    costs: dict = {"network.requests": n_requests, "network.denied": len(denied) if isinstance(denied, list) else 0}
    reported = manifest.counter("tool_calls")
    costs["tool_calls_with_network"] = (reported if isinstance(reported, int) else 0) + n_requests
    return costs


def _flatten(document: dict, prefix: str = "") -> Iterator[tuple[str, object]]:
    for key, value in document.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


# ---------------------------------------------------------------- sweep report (tuning issue)

EXAMPLE_SWEEP = Path(__file__).resolve().parent / "example_sweep"  # sweep_report.ipynb's default


def load_sweep(sweep_dir: str | os.PathLike) -> tuple[object, dict]:
    """A sweep folder's sweep.csv (DataFrame) and selected.json."""
    from microctx._io.jsonio import read_json
    from microctx.tuning.sweep import sweep_frame

    path = Path(sweep_dir) / "selected.json"
    selected = read_json(path)
    if not isinstance(selected, dict):
        raise InputError(path, "expected a JSON object")
    return sweep_frame(sweep_dir), selected


def sweep_points(frame, metric: str, cost: str) -> object:
    """One row per configuration that ran: cost, metric and its interval, Pareto membership
    (least cost for at least the metric; lower cost and higher metric both better), chosen."""
    import pandas as pd

    from microctx.grading.stats import pareto_front

    ok = frame[frame["status"] == "ok"]
    cost_column = f"param.{cost[6:]}" if cost.startswith("param:") else cost
    params = [c for c in frame.columns if c.startswith("param.")]
    points = pd.DataFrame(
        {
            "key": ok["key"].str[:12],
            "label": ok[params].astype(str).apply(lambda r: ", ".join(f"{k[6:]}={v}" for k, v in r.items()), axis=1)
            if params
            else "",
            "cost": pd.to_numeric(ok[cost_column], errors="coerce"),
            "metric": ok[metric],
            "low": ok.get(f"{metric}_ci_low"),
            "high": ok.get(f"{metric}_ci_high"),
            "chosen": ok["selected"].astype(str).str.lower() == "true",
        }
    ).reset_index(drop=True)
    valid = points.dropna(subset=["cost", "metric"])
    front = pareto_front(valid["cost"].tolist(), valid["metric"].tolist())
    points["pareto"] = False
    points.loc[valid.index, "pareto"] = front
    return points
