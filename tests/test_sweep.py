"""Tuning sweeps (microctx.tuning.sweep): the sweep file, the tune grade, selection, resume,
failed configurations, what the candidate is given; on the real s8f corpus with a planted candidate
(tests/candidates/planted_sweep.py) whose tune quality and cost are fixed by its parameters."""

from __future__ import annotations

import csv
import inspect
import math
from pathlib import Path

import orjson
import pytest

from microctx.candidates.devkit import make_devkit
from microctx.candidates.runner import run_candidate
from microctx.cli import main
from microctx.contract.canonical import dumps
from microctx.contract.schemas import load_answers, load_submission
from microctx.contract.score import grade
from microctx.errors import InputError
from microctx.tuning import sweep as sweep_mod
from microctx.tuning.sweep import configurations, load_sweep, run_sweep, select

PLANTED = Path(__file__).parent / "candidates" / "planted_sweep.py"


def sweep_file(
    folder: Path, grid: str, select_block: str = 'metric = "f1"\nrule = "max"', name="planted.toml", extra: str = ""
) -> Path:
    path = folder / name
    path.write_text(
        f'[candidate]\nname = "planted"\nfunction = "{PLANTED}:run"\n{extra}\n[grid]\n{grid}\n[select]\n{select_block}\n'
    )
    return path


@pytest.fixture(scope="module")
def planted(tmp_path_factory, s8f, devkit):
    """One planted sweep of six configurations (miss x calls), local pool of two."""
    folder = tmp_path_factory.mktemp("planted")
    spec = sweep_file(folder, "miss = [0, 3, 6]\ncalls = [1, 2]")
    result = run_sweep(spec, s8f.public, devkit, folder / "out", workers=2, progress=False)
    return spec, result


# ---------------------------------------------------------------- the tune grade


def test_tune_grade_scores_the_devkit_tune_split_only(s8f_answers, s8f_corpus):
    devkit = make_devkit(s8f_answers, corpus=s8f_corpus)
    oracle = {
        "schema": "fak-microcontext-submission/1",
        "corpus_sha256": s8f_answers["corpus_sha256"],
        "answers": s8f_answers["answers"],
    }
    result = grade(devkit, oracle, split="tune")
    assert result.grade["split"] == "tune" and result.grade["test_records"] == 108 == result.grade["exact_records"]
    assert result.grade["citation_errors"] == 0 and result.grade["aggregate_errors"] == 0 and result.passed
    assert {row.split for row in result.facts} == {"tune"}
    assert "108/108 tune records exact" in result.summary()
    # one planted wrong state on a tune record: one fp and one fn, on tune only
    spoiled = [dict(a) for a in s8f_answers["answers"]]
    first_tune = next(i for i, a in enumerate(spoiled) if a["split"] == "tune")
    spoiled[first_tune]["state"] = "OPEN" if spoiled[first_tune]["state"] == "CLOSED" else "CLOSED"
    bad = grade(devkit, {**oracle, "answers": spoiled}, split="tune").grade
    assert (bad["exact_records"], bad["false_positive_facts"], bad["false_negative_facts"]) == (107, 1, 1)
    # the default is the contract's test grade, without a split key
    assert "split" not in grade(s8f_answers, oracle).grade
    with pytest.raises(ValueError):
        grade(devkit, oracle, split="train")


def test_grade_cli_split_tune(tmp_path, s8f, devkit):
    from tests.candidates.planted_sweep import run as planted_run

    submission = tmp_path / "sub.json"
    planted_run(str(s8f.public), str(submission), params={"miss": 3})
    assert (
        main(
            [
                "grade",
                "--split",
                "tune",
                "--devkit",
                str(devkit),
                "--submission",
                str(submission),
                "--output",
                str(tmp_path / "g.json"),
            ]
        )
        == 1
    )
    doc = orjson.loads((tmp_path / "g.json").read_bytes())
    assert doc["split"] == "tune" and doc["test_records"] == 108 and 0 < doc["exact_records"] < 108
    assert (
        main(
            [
                "grade",
                "--split",
                "tune",
                "--answers",
                str(s8f.answers),
                "--submission",
                str(submission),
                "--output",
                str(tmp_path / "h.json"),
            ]
        )
        == 2
    )
    assert main(["grade", "--devkit", str(devkit), "--submission", str(submission), "--output", str(tmp_path / "h.json")]) == 2
    assert not (tmp_path / "h.json").exists()


# ---------------------------------------------------------------- the sweep file

BAD = [
    ('[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = [1]\n[select]\nmetric = "f1"\nbogus = 1\n', "select.bogus"),
    ('[candidate]\nbuiltin = "text-only"\n[grid]\n[select]\nmetric = "f1"\n', "'grid'"),
    ('[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = []\n[select]\nmetric = "f1"\n', "grid.alpha"),
    ('[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = 1\n[select]\nmetric = "f1"\n', "grid.alpha"),
    ('[candidate]\nbuiltin = "text-only"\n[grid]\nnope = [1]\n[select]\nmetric = "f1"\n', "grid.nope"),
    ('[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = [1, 1]\n[select]\nmetric = "f1"\n', "grid.alpha"),
    ('[candidate]\nbuiltin = "text-only"\ncmd = "x"\n[grid]\nalpha = [1]\n[select]\nmetric = "f1"\n', "'candidate'"),
    ('[candidate]\nbuiltin = "nope"\n[grid]\nalpha = [1]\n[select]\nmetric = "f1"\n', "candidate.builtin"),
    ('[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = [1]\n[select]\nmetric = "accuracy"\n', "select.metric"),
    (
        '[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = [1]\n[select]\nrule = "least-cost-meeting-floor"\ncost = "wall_seconds"\n',
        "select.floor",
    ),
    (
        '[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = [1]\n[select]\nrule = "least-cost-meeting-floor"\nfloor = 0.5\ncost = "gold"\n',
        "select.cost",
    ),
    (
        '[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = [1]\n[search]\nmethod = "random"\n[select]\nmetric = "f1"\n',
        "search.budget",
    ),
    ('[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = [1]\n[select]\nmetric = "f1"\n[extra]\nx = 1\n', "'extra'"),
    (
        '[candidate]\nbuiltin = "text-only"\ndevkit_splits = ["test"]\n[grid]\nalpha = [1]\n[select]\nmetric = "f1"\n',
        "candidate.devkit_splits",
    ),
    ("[candidate\n", "not valid TOML"),
]


@pytest.mark.parametrize("text,where", BAD)
def test_bad_sweep_files_are_refused_naming_the_key(tmp_path, text, where):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_sweep(path)
    assert str(path) in str(caught.value) and where in str(caught.value)


def test_a_grid_past_the_limit_is_refused_but_random_search_samples_it(tmp_path, capsys, s8f, devkit):
    values = ", ".join(str(i) for i in range(100))
    big = tmp_path / "big.toml"
    big.write_text(
        f'[candidate]\nbuiltin = "text-only"\n[grid]\nalpha = [{values}]\nepochs = [{values}]\n[select]\nmetric = "f1"\n'
    )
    assert main(["sweep", str(big), "--public", str(s8f.public), "--devkit", str(devkit), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "10000 configurations, past the limit of 4096" in err[0] and "grid" in err[0]
    assert not (tmp_path / "o").exists()
    sampled = tmp_path / "random.toml"
    sampled.write_text(big.read_text().replace("[select]", '[search]\nmethod = "random"\nbudget = 7\nseed = 3\n[select]'))
    spec = load_sweep(sampled)
    first, again = configurations(spec), configurations(load_sweep(sampled))
    assert first == again and len(first) == 7 and len({orjson.dumps(p) for p in first}) == 7
    assert all(set(p) == {"alpha", "epochs"} and 0 <= p["alpha"] < 100 for p in first)


def test_grid_order_is_the_cartesian_product_in_file_order(tmp_path):
    spec = load_sweep(sweep_file(tmp_path, 'miss = [0, 3]\ncalls = [1, 2, 4]\nsleep = ["0"]'))
    assert configurations(spec) == [{"miss": m, "calls": c, "sleep": "0"} for m in (0, 3) for c in (1, 2, 4)]


# ---------------------------------------------------------------- a planted sweep


def rows_by_params(rows):
    return {(r["param.miss"], r["param.calls"]): r for r in rows}


def test_planted_sweep_rows_and_selection(planted):
    spec, result = planted
    rows = rows_by_params(result.rows)
    assert len(rows) == 6 and result.failed == 0 and len(result.ran) == 6
    f1 = {m: rows[(m, 1)]["f1"] for m in (0, 3, 6)}
    assert f1[0] == 1.0 and rows[(0, 1)]["exact_rate"] == 1.0 and f1[6] < f1[3] < 1.0
    for m in (0, 3, 6):  # quality depends on miss only; calls change the cost only
        assert rows[(m, 1)]["f1"] == rows[(m, 2)]["f1"] and rows[(m, 1)]["exact_records"] == rows[(m, 2)]["exact_records"]
        assert rows[(m, 2)]["model_calls"] == 2 * (10 - m)
        assert rows[(m, 1)]["f1_ci_low"] <= rows[(m, 1)]["f1"] <= rows[(m, 1)]["f1_ci_high"]
        assert rows[(m, 1)]["tune_records"] == 108
    assert rows[(3, 1)]["f1_ci_low"] < rows[(3, 1)]["f1_ci_high"]
    # rule max: the best tune F1; the tie between calls 1 and 2 goes to the earlier configuration
    assert result.selected["row"] is rows[(0, 1)]
    selected = orjson.loads((result.out / "selected.json").read_bytes())
    assert selected["parameters"] == {"miss": 0, "calls": 1} and selected["config_key"] == rows[(0, 1)]["key"]
    assert selected["candidate"]["version"].startswith("sha256:") and selected["candidate_devkit"]["splits"] == ["train"]
    with open(result.out / "sweep.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert len(table) == 6 and [r["selected"] for r in table].count("True") == 1
    assert {
        "param.miss",
        "param.calls",
        "f1",
        "f1_ci_low",
        "f1_ci_high",
        "exact_rate_ci_low",
        "precision_ci_high",
        "wall_seconds",
        "cpu_seconds",
        "peak_memory_bytes",
        "model_calls",
        "tool_calls",
        "status",
    } <= set(table[0])


@pytest.mark.parametrize(
    "floor_at,expected", [("between 6 and 3", (3, 1)), ("between 3 and 0", (0, 1)), ("at 6", (6, 1)), ("above all", None)]
)
def test_least_cost_meeting_floor_picks_the_planted_configuration(planted, tmp_path, floor_at, expected):
    # model calls are calls * (10 - miss): (0,1) 10, (3,1) 7, (6,1) 4, and twice that with calls 2
    _, result = planted
    rows = {k: dict(r) for k, r in rows_by_params(result.rows).items()}
    f1 = {m: rows[(m, 1)]["f1"] for m in (0, 3, 6)}
    if floor_at == "above all":
        for calls in (1, 2):
            rows[(0, calls)]["f1"] = 0.999  # nobody reaches 1.0 now
    floor = {"between 6 and 3": (f1[6] + f1[3]) / 2, "between 3 and 0": (f1[3] + 1) / 2, "at 6": f1[6], "above all": 1.0}[
        floor_at
    ]
    spec = load_sweep(
        sweep_file(
            tmp_path,
            "miss = [0, 3, 6]\ncalls = [1, 2]",
            f'metric = "f1"\nrule = "least-cost-meeting-floor"\nfloor = {floor!r}\ncost = "model_calls"',
        )
    )
    chosen = select(list(rows.values()), spec)
    if expected is None:
        assert chosen["row"] is None and "no configuration meets the tune f1 floor" in chosen["reason"]
    else:
        assert (chosen["row"]["param.miss"], chosen["row"]["param.calls"]) == expected, chosen["reason"]
    by_param = load_sweep(
        sweep_file(
            tmp_path,
            "miss = [0, 3, 6]\ncalls = [1, 2]",
            f'metric = "f1"\nrule = "least-cost-meeting-floor"\nfloor = {f1[6]!r}\ncost = "param:calls"',
            name="p.toml",
        )
    )
    assert (
        select(list(rows.values()), by_param)["row"]["param.calls"],
        select(list(rows.values()), by_param)["row"]["param.miss"],
    ) == (1, 0)


def test_the_sweep_is_never_given_the_answer_bundle(tmp_path, s8f, devkit):
    assert "answers" not in inspect.signature(run_sweep).parameters
    seen = []

    def recording_runner(candidate, public, submission, **kw):
        seen.append((candidate, Path(public), Path(submission), kw))
        return run_candidate(candidate, public, submission, **kw)

    spec = sweep_file(tmp_path, "miss = [0, 6]\ncalls = [1]")
    result = run_sweep(spec, s8f.public, devkit, tmp_path / "out", workers=1, progress=False, runner=recording_runner)
    assert len(seen) == 2 and result.failed == 0
    answers_bytes = Path(s8f.answers).read_bytes()
    for candidate, public, submission, kw in seen:
        assert public.read_bytes() == Path(s8f.public).read_bytes()
        given = load_answers(kw["devkit"])
        assert {a["split"] for a in given["answers"]} == {"train"}  # not even tune, and never test
        for value in [candidate, public, submission, *kw.values()]:
            assert str(s8f.answers) not in str(value) and "answers" not in Path(str(value)).name
    for row in result.rows:  # the candidate itself reports the splits its devkit held
        assert row["version"] == "devkit-splits:train"
    assert all(p.read_bytes() != answers_bytes for p in (tmp_path / "out").rglob("*") if p.is_file())
    # the command has no --answers: argparse refuses it (exit 2)
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "sweep",
                str(spec),
                "--public",
                str(s8f.public),
                "--devkit",
                str(devkit),
                "--out",
                str(tmp_path / "o2"),
                "--answers",
                str(s8f.answers),
            ]
        )
    assert exit_info.value.code == 2


def test_a_devkit_with_test_answers_is_refused(tmp_path, s8f, capsys):
    spec = sweep_file(tmp_path, "miss = [0]")
    assert (
        main(["sweep", str(spec), "--public", str(s8f.public), "--devkit", str(s8f.answers), "--out", str(tmp_path / "o")]) == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must not hold test answers" in err[0]


def test_failed_configurations_are_rows_and_the_sweep_goes_on(tmp_path, s8f, devkit, capsys):
    spec = sweep_file(tmp_path, "miss = [0, 3]\nfail = [false, true]")
    code = main(
        [
            "sweep",
            str(spec),
            "--public",
            str(s8f.public),
            "--devkit",
            str(devkit),
            "--out",
            str(tmp_path / "out"),
            "--workers",
            "2",
        ]
    )
    assert code == 0
    with open(tmp_path / "out" / "sweep.csv", newline="") as handle:
        table = list(csv.DictReader(handle))
    failed = [r for r in table if r["status"] == "failed"]
    assert len(table) == 4 and len(failed) == 2 and all(r["param.fail"] == "True" for r in failed)
    assert all("planted failure" in r["error"] and r["f1"] == "" and r["selected"] == "False" for r in failed)
    selected = orjson.loads((tmp_path / "out" / "selected.json").read_bytes())
    assert selected["parameters"] == {"miss": 0, "fail": False} and "2 failed configurations not considered" in selected["reason"]
    assert "4 configurations (4 run now, 0 resumed, 2 failed)" in capsys.readouterr().out


def test_resume_after_an_interruption_runs_only_what_is_missing(tmp_path, s8f, devkit):
    spec = sweep_file(tmp_path, "miss = [0, 3, 6]\ncalls = [1]")
    calls = []

    def interrupted(candidate, public, submission, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C during the third configuration
        calls.append(kw["params"])
        return run_candidate(candidate, public, submission, **kw)

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, s8f.public, devkit, out, workers=1, progress=False, runner=interrupted)
    assert len(list((out / "runs").glob("*/result.json"))) == 2 and not (out / "sweep.csv").exists()
    again = []

    def counting(candidate, public, submission, **kw):
        again.append(kw["params"])
        return run_candidate(candidate, public, submission, **kw)

    result = run_sweep(spec, s8f.public, devkit, out, workers=1, progress=False, runner=counting)
    assert again == [{"miss": 6, "calls": 1}] and len(result.ran) == 1 and len(result.rows) == 3 and result.failed == 0
    third = run_sweep(spec, s8f.public, devkit, out, workers=1, progress=False, runner=counting)
    assert len(again) == 1 and third.ran == [] and [r["f1"] for r in third.rows] == [r["f1"] for r in result.rows]
    # a configuration the cluster lost (a transient failure) is run again on resume; a candidate's failure is not
    first = out / "runs" / result.rows[0]["key"] / "result.json"
    document = orjson.loads(first.read_bytes())
    first.write_bytes(dumps({**document, "status": "failed", "transient": True, "error": "task error: KilledWorker"}))
    fourth = run_sweep(spec, s8f.public, devkit, out, workers=1, progress=False, runner=counting)
    assert fourth.ran == [result.rows[0]["key"]] and again[-1] == {"miss": 0, "calls": 1} and fourth.failed == 0
    # another devkit is another configuration key: nothing is reused across it
    spec_doc = load_sweep(spec)
    assert sweep_mod.config_key(spec_doc, {"miss": 0}, "c", "d1", "e") != sweep_mod.config_key(
        spec_doc, {"miss": 0}, "c", "d2", "e"
    )


def test_an_output_folder_that_is_not_a_sweep_is_refused(tmp_path, s8f, devkit):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "precious.txt").write_text("keep")
    with pytest.raises(InputError, match="not a sweep folder"):
        run_sweep(sweep_file(tmp_path, "miss = [0]"), s8f.public, devkit, tmp_path / "out", workers=1, progress=False)
    assert (tmp_path / "out" / "precious.txt").read_text() == "keep"


def test_tune_metric_intervals_follow_their_assumptions():
    from microctx.contract.facts import FactRow
    from microctx.contract.score import GradeResult

    facts = [FactRow(f"r{i}", "tune", "state", "OPEN", "tp") for i in range(8)]
    facts += [FactRow("r8", "tune", "state", "OPEN", "fp"), FactRow("r9", "tune", "state", "CLOSED", "fn")]
    result = GradeResult({"test_records": 10, "exact_records": 8}, facts)
    metrics = sweep_mod.tune_metrics(result, {f"r{i}": f"c{i}" for i in range(10)})
    assert metrics["precision"] == metrics["recall"] == round(8 / 9, 6) and metrics["f1"] == round(16 / 18, 6)
    # the exact rate's interval is the cluster bootstrap of grading.stats now (review A7), no longer Wilson's
    # (0.49-0.5 to 0.94-0.95 here): 10 one-record components, 8 exact, resampled
    # (issue 19: the slice table's Korn-Graubard interval, Clopper-Pearson's for 8 of about 10 effective units)
    assert metrics["exact_rate"] == 0.8 and 0.4 <= metrics["exact_rate_ci_low"] < 0.8 < metrics["exact_rate_ci_high"] <= 1.0
    assert metrics["f1_ci_low"] < metrics["f1"] < metrics["f1_ci_high"] <= 1.0
    # one component holding every record: the bootstrap cannot vary (asked for with min_components=1 and
    # min_n_eff=1; by default one component is below stats.DEFAULT_MIN_COMPONENTS and DEFAULT_MIN_N_EFF:
    # not estimable, no interval)
    single = sweep_mod.tune_metrics(result, {f"r{i}": "c" for i in range(10)}, min_components=1, min_n_eff=1)
    # issue 19: one component is one unit: the interval of a single trial, not the certain point
    # [f1, f1] a percentile bootstrap gave
    assert single["f1_ci_low"] < 0.1 and single["f1"] < single["f1_ci_high"] <= 1.0
    assert math.isnan(sweep_mod.tune_metrics(result, {f"r{i}": "c" for i in range(10)})["f1_ci_low"])
    assert math.isnan(sweep_mod.tune_metrics(GradeResult({"test_records": 0, "exact_records": 0}, []), {})["f1"])


def test_pareto_front():
    from microctx.grading.stats import pareto_front

    assert pareto_front([1, 2, 2, 3, 0.5], [0.5, 0.7, 0.6, 0.7, 0.1]) == [True, True, False, False, True]


def test_evaluate_runs_the_frozen_configuration_once_and_grades_on_test(planted, tmp_path, s8f, capsys):
    from microctx.grading.ledger import config_digest, entries

    _, result = planted
    selected = result.out / "selected.json"
    assert (
        main(
            [
                "evaluate",
                str(selected),
                "--public",
                str(s8f.public),
                "--answers",
                str(s8f.answers),
                "--out",
                str(tmp_path / "eval"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "PASS: 680/680 test records exact" in out and "looked at 1 time" in out
    evaluation = orjson.loads((tmp_path / "eval" / "evaluation.json").read_bytes())
    frozen = orjson.loads(selected.read_bytes())
    assert evaluation["parameters"] == frozen["parameters"] and evaluation["config_key"] == frozen["config_key"]
    manifest = orjson.loads((tmp_path / "eval" / "submission.run.json").read_bytes())
    assert manifest["parameters"] == {"miss": 0, "calls": 1} and manifest["version"] == "devkit-splits:train"
    assert grade(load_answers(s8f.answers), load_submission(tmp_path / "eval" / "submission.json")).passed
    assert (
        main(
            [
                "evaluate",
                str(selected),
                "--public",
                str(s8f.public),
                "--answers",
                str(s8f.answers),
                "--out",
                str(tmp_path / "eval2"),
            ]
        )
        == 0
    )
    looks = entries()
    assert len(looks) == 2 and {e["via"] for e in looks} == {"evaluate"}
    # one configuration digest (review A4): the ledger's, as grade and the reports compute it, not the sweep's key
    assert {e["config_digest"] for e in looks} == {config_digest(manifest)} == {frozen["config_digest"]}
    assert {e["candidate"] for e in looks} == {"planted"}
    assert "looked at 2 times, 2 by planted" in capsys.readouterr().out
    # a changed candidate devkit, another corpus: refused before anything runs
    assert (
        main(
            [
                "evaluate",
                str(selected),
                "--public",
                str(s8f.answers),
                "--answers",
                str(s8f.answers),
                "--out",
                str(tmp_path / "eval3"),
            ]
        )
        == 2
    )
    assert len(entries()) == 2


def test_sweep_report(planted, tmp_path):
    import nbformat

    from microctx.reports.build import sweep_report

    _, result = planted
    manifest = sweep_report(result.out, tmp_path / "report", progress=False)
    assert manifest["charts"] == ["sweep_tradeoff"]
    book = nbformat.read(tmp_path / "report" / "sweep_report.ipynb", as_version=4)
    text = "".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/markdown", ""))
        for c in book.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert "Chosen: **miss=0, calls=1**" in text and "Pareto front: " in text
    assert main(["report", "sweep", str(tmp_path), "--out", str(tmp_path / "r2")]) == 2  # not a sweep folder


def test_the_text_only_sweep_file():
    spec = load_sweep(Path(__file__).resolve().parents[1] / "sweeps" / "text-only.toml")
    assert spec.kind == "builtin" and spec.entry == "text-only" and spec.devkit_splits == ("train",)
    assert len(configurations(spec)) == 16 and {"max_features": 50000, "alpha": 1e-4} in configurations(spec)
    assert (spec.rule, spec.metric, spec.floor, spec.cost) == ("least-cost-meeting-floor", "f1", 0.73, "param:max_features")
