"""The net-true decision boundary: planted cases for each verdict, and exact-sql against a micro run on s8f."""

from __future__ import annotations

import copy
import csv
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from microctx.candidates.builtins.exact_sql import answer_corpus
from microctx.candidates.runner import manifest_path
from microctx.cli import main
from microctx.contract.canonical import dumps
from microctx.grading import frontier, stats
from microctx.reports import tables

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI  # noqa: E402


def test_pareto_front():
    # one implementation, in microctx.grading.stats (the frontier and the sweep share it)
    cost = [0.0, 1.0, 1.0, 2.0, math.nan, 0.5]
    value = [10, 12, 11, 12, 99, 10]
    assert stats.pareto_front(cost, value) == [True, True, False, False, False, False]
    assert not hasattr(frontier, "pareto_front")
    # ties on both stay on the front together; a NaN value is never on it and dominates nothing
    assert stats.pareto_front([1.0, 1.0, 2.0], [5.0, 5.0, math.nan]) == [True, True, False]
    assert stats.pareto_front([], []) == []


@pytest.mark.parametrize(
    "gain, extra, expected",
    [
        (0, 1.0, "dominated by exact-sql"),
        (-5, 0.0, "dominated by exact-sql"),
        (0, 0.0, "equal"),
        (3, -1.0, "dominates exact-sql"),
        (0, -1.0, "dominates exact-sql"),
        (4, 2.0, "pays off when a net-true fact is worth more than $0.5"),
        (-4, -2.0, "cheaper and worse: pays off only when a net-true fact is worth less than $0.5"),
        (1, math.nan, "cost unknown (no run manifest or no counters)"),
    ],
)
def test_verdicts(gain, extra, expected):
    assert frontier.verdict(gain, extra, extra / gain if gain else math.nan, "exact-sql", "dollars", (gain, gain)) == expected


def _write(path: Path, submission: dict, manifest: dict) -> str:
    path.write_bytes(dumps(submission))
    manifest_path(path).write_bytes(dumps(manifest))
    return str(path)


def test_planted_payoff_and_intervals(s8f, s8f_corpus, s8f_answers, tmp_path):
    exact, _ = answer_corpus(str(s8f.public))
    weaker = copy.deepcopy(exact)
    test_ids = [a["id"] for a in s8f_answers["answers"] if a["split"] == "test"]
    dropped = 0
    for answer in weaker["answers"]:
        if answer["id"] in test_ids[:50]:
            dropped += len(answer["labels"])
            answer["labels"] = []
    noisy = copy.deepcopy(exact)
    for answer in noisy["answers"]:
        if answer["id"] in test_ids[:30]:
            answer["references"] = sorted(set(answer["references"]) | {9999999})
    base = {"candidate": "exact-sql", "wall_seconds": 1.0, "cpu_seconds": 3600.0, "counters": {"model_calls": 0}}
    costly = {
        "candidate": "llm",
        "wall_seconds": 9.0,
        "cpu_seconds": 3600.0,
        "counters": {"model_calls": 1000, "input_tokens": 10, "output_tokens": 5, "cost_microdollars": 2_000_000},
    }
    paths = [
        _write(tmp_path / "weak.json", weaker, base),
        _write(tmp_path / "model.json", exact, costly),
        _write(tmp_path / "noisy.json", noisy, costly),
        str(tmp_path / "nomanifest.json"),
    ]
    (tmp_path / "nomanifest.json").write_bytes(dumps(exact))
    names = ["weak", "model", "noisy", "nomanifest"]
    inputs = tables.load_inputs(str(s8f.public), str(s8f.answers), paths, names)
    result = frontier.frontier_table(inputs, paths, names, baseline="weak", cpu_dollars_per_hour=1.0, n_boot=300)
    t = result.table.set_index("candidate")
    gold = t.loc["model", "gold_facts"]
    assert t.loc["model", "net_true"] == gold and t.loc["weak", "net_true"] == gold - dropped
    assert t.loc["noisy", "net_true"] == gold - 30 and t.loc["noisy", "false_facts"] == 30
    # dollars: model 2.00 + one CPU-hour at $1 = $3.00 over 1,000 records; the baseline $1.00
    assert t.loc["model", "dollars"] == pytest.approx(3.0) and t.loc["weak", "dollars"] == pytest.approx(1.0)
    extra = 2.0 / 1000
    assert t.loc["model", "extra_cost_per_record"] == pytest.approx(extra)
    assert t.loc["model", "break_even_per_fact"] == pytest.approx(extra / (dropped / 680))
    assert t.loc["model", "verdict"].startswith("pays off when a net-true fact is worth more than $")
    # beyond these records: s8f's test set rests on one component (n_eff 4.1 by records), so no interval
    assert t[["net_true_ci_low", "net_true_ci_high", "gain_ci_low", "gain_ci_high"]].isna().all().all()
    assert "no interval: the test set's n_eff is 4.1, below 10: it rests on component #5112" in result.method
    # the same records as independent components: intervals, and a gain interval above 0 (every
    # replicate drops the same labels, never fewer)
    from microctx.grading import slices

    records = slices.record_table(s8f_corpus).assign(component=lambda r: r["number"])
    spread = frontier.frontier_table(inputs, paths, names, baseline="weak", n_boot=300, records=records)
    u = spread.table.set_index("candidate")
    assert u.loc["model", "gain_ci_low"] > 0 and u.loc["model", "net_true_ci_low"] < gold < u.loc["model", "net_true_ci_high"]
    assert "95% prediction interval for a new test set of 680 split components" in spread.method
    assert t.loc["weak", "verdict"] == "baseline" and t.loc["nomanifest", "verdict"].startswith("cost unknown")
    assert list(t["on_front"]) == [True, True, False, False]
    # identical submissions have identical replicates: a gain of exactly zero with a zero-width interval
    twins = tables.load_inputs(str(s8f.public), str(s8f.answers), paths[1:2] * 2, ["a", "b"])
    same = frontier.frontier_table(twins, paths[1:2] * 2, ["a", "b"], baseline="a", n_boot=50, records=records)
    same = same.table.iloc[1]
    assert same["gain"] == 0 and same["gain_ci_low"] == same["gain_ci_high"] == 0 and same["verdict"] == "equal"


def test_the_interval_resamples_components(s8f_corpus, s8f_answers):
    from microctx.grading import slices

    records = slices.record_table(s8f_corpus)
    roots, sizes = frontier.test_components(records)
    assert sizes.sum() == 680 and len(roots) < 680  # linked records form fewer, larger units
    # the draws are grading.stats' cluster bootstrap (formerly the frontier's own component_draws):
    # a replicate is a new test set of as many components (issue 19: not ratio-scaled to the record
    # count), so one net-true fact per component is len(roots) in every replicate, and one per
    # held-out record varies with the components drawn; same seed, same replicates
    boot = frontier.bootstrap_net_true(sizes, {"per_record": sizes, "per_component": np.ones_like(sizes)}, 40, seed=3)
    assert boot["per_component"].shape == (40,) and np.allclose(boot["per_component"], len(roots))
    assert boot["per_record"].std() > 0
    again = frontier.bootstrap_net_true(sizes, {"per_record": sizes, "per_component": np.ones_like(sizes)}, 40, seed=3)
    assert np.array_equal(boot["per_record"], again["per_record"])
    # the prediction interval: observed + (T1 - T2) over the two halves of the replicates
    low, high = frontier.prediction_interval(680.0, boot["per_record"])
    pairs = 680.0 + boot["per_record"][:20] - boot["per_record"][20:]
    assert (low, high) == pytest.approx((np.percentile(pairs, 2.5), np.percentile(pairs, 97.5)))
    assert frontier.prediction_interval(5.0, np.full(10, 3.0)) == (5.0, 5.0)
    assert not hasattr(frontier, "component_draws")


@pytest.fixture(scope="module")
def sql_and_micro(s8f, tmp_path_factory):
    folder = tmp_path_factory.mktemp("frontier")
    assert main(["run", "exact-sql", "--public", str(s8f.public), "--submission", str(folder / "exact-sql.json")]) == 0
    with FakeOpenAI() as fake:
        host = fake.base_url.split("//", 1)[1].split("/", 1)[0]
        assert (
            main(
                [
                    "run",
                    "llm",
                    "--public",
                    str(s8f.public),
                    "--submission",
                    str(folder / "micro.json"),
                    "--network",
                    "record",
                    "--allow-host",
                    host,
                    "--param",
                    f"base_url={fake.base_url}",
                    "--param",
                    "model=fake-model",
                    "--param",
                    "mode=micro",
                    "--param",
                    "concurrency=8",
                    "--param",
                    "price_in=0.15",
                    "--param",
                    "price_out=0.6",
                ]
            )
            == 0
        )
    return folder


@pytest.mark.slow
def test_exact_sql_dominates_a_micro_run_on_s8f(s8f, sql_and_micro, tmp_path):
    out = tmp_path / "report"
    assert (
        main(
            [
                "report",
                "frontier",
                "--public",
                str(s8f.public),
                "--answers",
                str(s8f.answers),
                "--submission",
                str(sql_and_micro / "micro.json"),
                "--submission",
                str(sql_and_micro / "exact-sql.json"),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    with open(out / "frontier.csv", newline="") as handle:
        rows = {r["candidate"]: r for r in csv.DictReader(handle)}
    assert rows["exact-sql"]["verdict"] == "baseline" and rows["exact-sql"]["on_front"] == "True"
    assert rows["micro"]["verdict"] == "dominated by exact-sql" and rows["micro"]["on_front"] == "False"
    assert rows["micro"]["net_true"] == rows["exact-sql"]["net_true"] == "4326"  # a correct model: equal facts, more cost
    assert float(rows["micro"]["model_calls"]) == 1000 and float(rows["micro"]["model_dollars"]) > 0
    manifest = json.loads((out / "report.json").read_text())
    assert manifest["kind"] == "frontier" and sorted(manifest["charts"]) == ["frontier", "gain"]
    assert (out / "frontier_report.html").is_file() and (out / "charts" / "frontier.svg").is_file()


def _exit_code(argv: list[str]) -> int:
    """main's exit code, whether returned or raised by the argument parser (a bad option value)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_frontier_bad_input(s8f, sql_and_micro, tmp_path, capsys):
    sub = str(sql_and_micro / "exact-sql.json")
    base = ["report", "frontier", "--public", str(s8f.public), "--answers", str(s8f.answers), "--submission", sub]
    assert main([*base, "--baseline", "nobody", "--out", str(tmp_path / "a")]) == 2
    # the price is refused by the parser now (it raises SystemExit(2)), as inf and nan are
    assert _exit_code([*base, "--cpu-dollars-per-hour", "-1", "--out", str(tmp_path / "b")]) == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    for value in ("inf", "nan", "-inf", "1e400"):
        capsys.readouterr()
        assert _exit_code([*base, f"--cpu-dollars-per-hour={value}", "--out", str(tmp_path / "c")]) == 2
        err = capsys.readouterr().err
        assert "--cpu-dollars-per-hour: expected a non-negative, finite number" in err and err.count("\n") == 1
    assert not (tmp_path / "c").exists()
    # the same check where the notebook's API is called directly (no parser in front)
    from microctx.errors import InputError
    from microctx.reports import build

    for price in (math.inf, math.nan):
        with pytest.raises(InputError, match="cpu-dollars-per-hour"):
            build.frontier_report(str(s8f.public), str(s8f.answers), [sub], tmp_path / "d", cpu_dollars_per_hour=price)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("name", ["../../x", "<img src=x onerror=alert(1)>", ".hidden"])
def test_frontier_names_must_be_safe(s8f, sql_and_micro, tmp_path, name):
    from microctx.errors import InputError
    from microctx.reports import build

    sub = str(sql_and_micro / "exact-sql.json")
    with pytest.raises(InputError, match="is not a safe name"):
        build.frontier_report(str(s8f.public), str(s8f.answers), [sub], tmp_path / "r", names=[name])
    assert (
        main(
            [
                "report",
                "frontier",
                "--public",
                str(s8f.public),
                "--answers",
                str(s8f.answers),
                "--submission",
                sub,
                "--name",
                name,
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 2
    )
    assert list(tmp_path.iterdir()) == []


def _synthetic_oracle(synthetic, folder: Path, name: str, manifest: dict) -> str:
    from microctx.contract.schemas import load_answers

    answers = load_answers(synthetic.answers)
    return _write(
        folder / f"{name}.json",
        {
            "schema": "fak-microcontext-submission/1",
            "corpus_sha256": answers["corpus_sha256"],
            "answers": answers["answers"],
            "aggregates": answers["aggregates"],
        },
        manifest,
    )


USAGE = {"model_calls": 1000, "input_tokens": 100, "output_tokens": 50, "cached_tokens": 0}


def test_costs_prefer_the_runners_count_and_flag_a_disagreement(synthetic, tmp_path):
    """A candidate that under-reports: the runner's proxy saw 2,000 calls and more tokens; the
    frontier and the compare report's cost table use the runner's count and say they disagree."""
    liar = {
        "candidate": "llm",
        "cpu_seconds": 1.0,
        "wall_seconds": 1.0,
        "counters": USAGE,
        "model_usage_check": {
            "runner": {"model_calls": 2000, "input_tokens": 300, "output_tokens": 70, "cached_tokens": 10},
            "candidate": USAGE,
            "tokens_seen": True,
            "agree": False,
            "differences": ["model_calls: runner 2000, candidate 1000"],
        },
    }
    calls_only = {
        **liar,
        "model_usage_check": {**liar["model_usage_check"], "tokens_seen": False, "runner": {"model_calls": 2000}},
    }
    honest = {
        **liar,
        "model_usage_check": {"runner": dict(USAGE), "candidate": USAGE, "tokens_seen": True, "agree": True, "differences": []},
    }
    opaque = {**liar, "model_usage_check": {"agree": None, "opaque": True, "tunnels": 3}}
    unchecked = {k: v for k, v in liar.items() if k != "model_usage_check"}
    cases = {"liar": liar, "calls_only": calls_only, "honest": honest, "opaque": opaque, "unchecked": unchecked}
    names = list(cases)
    paths = [_synthetic_oracle(synthetic, tmp_path, name, manifest) for name, manifest in cases.items()]
    inputs = tables.load_inputs(str(synthetic.public), str(synthetic.answers), paths, names)
    t = frontier.frontier_table(inputs, paths, names, cost_measure="model_calls", n_boot=20).table.set_index("candidate")
    n = len(inputs.corpus.records)
    expected = {  # model_calls, input_tokens, output_tokens, cached_tokens, counts_source, counts_agree
        "liar": (2000, 300, 70, 10, "runner", False),
        "calls_only": (2000, 100, 50, 0, "runner calls, candidate tokens", False),
        "honest": (1000, 100, 50, 0, "runner", True),
        "opaque": (1000, 100, 50, 0, "candidate", None),
        "unchecked": (1000, 100, 50, 0, "candidate", None),
    }
    for name, (calls, tokens_in, tokens_out, cached, source, agree) in expected.items():
        row = t.loc[name]
        assert (row["model_calls"], row["input_tokens"], row["output_tokens"], row["cached_tokens"]) == (
            calls,
            tokens_in,
            tokens_out,
            cached,
        ), name
        assert row["counts_source"] == source and row["counts_agree"] is agree, name
        assert row["cost"] == pytest.approx(calls / n), name
    costs = tables.cost_table(paths, names).set_index("candidate")
    assert list(costs["model_calls"]) == [2000, 2000, 1000, 1000, 1000]
    assert list(costs["input_tokens"]) == [300, 100, 100, 100, 100]
    assert list(costs["counts_agree"]) == [False, False, True, None, None]
    assert list(costs["counters.model_calls"]) == [1000] * 5  # the candidate's own claim is still shown beside it


def test_one_manifest_reader(tmp_path):
    """runner.read_manifest is the one typed reader (contract.records'): strict for reports that show
    costs, lenient for the ledger; read_manifest_document is the same check, handing the document on."""
    from microctx.candidates.runner import read_manifest, read_manifest_document
    from microctx.errors import InputError
    from microctx.grading import ledger

    assert not hasattr(tables, "manifest_path") and not hasattr(tables, "run_manifest")
    sub = tmp_path / "s.json"
    sub.write_bytes(b"{}")
    assert read_manifest(sub) is None and read_manifest(sub, strict=True) is None  # no manifest
    for bad, said in ((b"[1, 2]", "expected a JSON object"), (b"{not json", "not valid JSON")):
        manifest_path(sub).write_bytes(bad)
        assert read_manifest(sub) is None
        with pytest.raises(InputError, match=said):
            read_manifest(sub, strict=True)
        with pytest.raises(InputError, match=said):
            tables.cost_table([str(sub)], ["s"])
    manifest_path(sub).write_bytes(dumps({"candidate": "c", "version": "1", "parameters": {"k": 2}}))
    found = read_manifest(sub, strict=True)
    assert found is not None and (found.candidate, found.version, found.parameters) == ("c", "1", {"k": 2})
    assert read_manifest_document(sub, strict=True) == {"candidate": "c", "version": "1", "parameters": {"k": 2}}
    assert ledger.submission_identity(sub, found)[1:] == ("c", ledger.config_digest(found))
    assert ledger.submission_identity(sub)[1:] == (None, None)  # the grading layer reads no manifest itself
