"""Follow-ups of the sweep review: the [sandbox] table (isolation, network, limits, pass_env) carried
from SWEEP.toml to every run, the configuration key, selected.json and `evaluate`; a sandbox that
cannot start is exit 2 (and a refused run is transient); one configuration digest; finite
timeouts; the tune intervals through grading.stats; one Pareto front; model costs; an llm sweep
through the recording proxy against the local fake endpoint."""

from __future__ import annotations

import csv
import math
import sys
import threading
from pathlib import Path

import orjson
import pytest

from microctx.candidates.devkit import make_devkit
from microctx.candidates.runner import run_candidate
from microctx.candidates.sandbox import SandboxSettings, SandboxUnavailable
from microctx.cli import main
from microctx.contract.canonical import dumps
from microctx.corpus.freeze import freeze, write_frozen
from microctx.corpus.public import corpus_to_issues
from microctx.errors import InputError
from microctx.grading import stats
from microctx.tuning import sweep as sweep_mod
from microctx.tuning import tune as tune_mod
from microctx.tuning.sweep import config_key, load_sweep, run_sweep

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_openai import FakeOpenAI  # noqa: E402

PLANTED = Path(__file__).parent / "candidates" / "planted_sweep.py"
ROOT = Path(__file__).resolve().parents[1]


def sweep_file(
    folder: Path,
    grid: str,
    *,
    sandbox: str = "",
    candidate: str = "",
    select: str = 'metric = "f1"\nrule = "max"',
    name: str = "planted.toml",
) -> Path:
    path = folder / name
    text = f'[candidate]\nname = "planted"\nfunction = "{PLANTED}:run"\n{candidate}\n[grid]\n{grid}\n[select]\n{select}\n'
    if sandbox:
        text += f"[sandbox]\n{sandbox}\n"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- A1: the [sandbox] table


def test_the_sandbox_table_becomes_sandbox_settings(tmp_path):
    (tmp_path / "cache").mkdir()
    spec = load_sweep(
        sweep_file(
            tmp_path,
            "miss = [0]",
            sandbox='network = "record"\nallow_hosts = ["127.0.0.1:8000"]\n'
            'memory = "1G"\nmax_processes = 64\ncpu_seconds = 120\ncache_dir = "cache"\n'
            'pass_env = ["SOME_KEY"]',
        )
    )
    assert spec.sandbox == SandboxSettings(
        network="record",
        allow_hosts=("127.0.0.1:8000",),
        memory_bytes=1 << 30,
        max_processes=64,
        cpu_seconds=120,
        cache_dir=str(tmp_path / "cache"),
    )
    assert spec.pass_env == ("SOME_KEY",)
    assert load_sweep(sweep_file(tmp_path, "miss = [0]", name="plain.toml")).sandbox is None


def test_relative_folders_in_the_sandbox_table_are_relative_to_the_sweep_file(tmp_path, monkeypatch):
    sweeps, elsewhere = tmp_path / "sweeps", tmp_path / "elsewhere"
    for folder in (sweeps / "cache", elsewhere / "cache"):
        folder.mkdir(parents=True)  # the same names beside the current directory: never the ones chosen
    monkeypatch.chdir(elsewhere)
    table = 'cache_dir = "cache"\nmodel_endpoint = "http://127.0.0.1:9/v1"\nmodel_cache = "model-cache"'
    spec = load_sweep(sweep_file(sweeps, "miss = [0]", sandbox=table))
    assert spec.sandbox.cache_dir == str(sweeps.resolve() / "cache")
    assert spec.sandbox.gateway.cache == str(sweeps.resolve() / "model-cache")
    absolute = f'cache_dir = "{sweeps / "cache"}"\nmodel_endpoint = "http://h/v1"\nmodel_cache = "/var/tmp/mc"'
    spec = load_sweep(sweep_file(sweeps, "miss = [0]", sandbox=absolute, name="abs.toml"))
    assert (spec.sandbox.cache_dir, spec.sandbox.gateway.cache) == (str(sweeps / "cache"), "/var/tmp/mc")


@pytest.mark.parametrize(
    "text, where",
    [
        ('network = "wifi"', "sandbox.network"),
        ('allow_hosts = ["127.0.0.1:1"]', "sandbox.allow_hosts"),  # without network = "record"
        ('network = "record"\nallow_hosts = "127.0.0.1:1"', "sandbox.allow_hosts"),
        ('memory = "lots"', "sandbox.memory"),
        ('memory = "1M"', "sandbox.memory"),
        ("max_processes = 0", "sandbox.max_processes"),
        ("cpu_seconds = 1.5", "sandbox.cpu_seconds"),
        ("max_processes = 100000000", "sandbox.max_processes"),
        ("cpu_seconds = 99999999999", "sandbox.cpu_seconds"),
        ('cache_dir = "no-such-folder"', "sandbox.cache_dir"),
        ('pass_env = ["sk-123 secret"]', "sandbox.pass_env"),
        ('isolation = "process"\nnetwork = "record"', "sandbox.network"),
        ("colour = 1", "sandbox.colour"),
    ],
)
def test_bad_sandbox_tables_are_refused_naming_the_key(tmp_path, text, where):
    with pytest.raises(InputError) as info:
        load_sweep(sweep_file(tmp_path, "miss = [0]", sandbox=text))
    assert info.value.field == where and str(tmp_path) in str(info.value)


def test_the_sandbox_is_in_the_key_selected_json_and_reused_by_evaluate(tmp_path, s8f, devkit, monkeypatch):
    monkeypatch.setenv("PLANTED_KEY", "not-a-real-key")
    plain = load_sweep(sweep_file(tmp_path, "miss = [0]", name="a.toml"))
    limited = load_sweep(sweep_file(tmp_path, "miss = [0]", sandbox='memory = "1G"\npass_env = ["PLANTED_KEY"]', name="b.toml"))
    keys = {config_key(s, {"miss": 0}, "c", "d", "e") for s in (plain, limited)}
    assert len(keys) == 2  # another isolation is another configuration
    seen = []

    def recording_runner(candidate, public, submission, **kw):
        seen.append(kw)
        return run_candidate(candidate, public, submission, **kw)

    result = run_sweep(limited, s8f.public, devkit, tmp_path / "out", workers=1, progress=False, runner=recording_runner)
    assert result.failed == 0 and len(seen) == 1
    assert seen[0]["sandbox"] == limited.sandbox and seen[0]["pass_env"] == ("PLANTED_KEY",)
    selected = orjson.loads((tmp_path / "out" / "selected.json").read_bytes())
    assert selected["sandbox"]["memory_bytes"] == 1 << 30 and selected["sandbox"]["pass_env"] == ["PLANTED_KEY"]
    assert selected["sandbox"]["network"] == "none" and "timeout_seconds" not in selected["sandbox"]
    assert orjson.loads((tmp_path / "out" / "sweep.json").read_bytes())["sandbox"] == selected["sandbox"]
    # evaluate runs with the same settings: the manifest says the 1 GiB limit and the passed name
    assert (
        main(
            [
                "evaluate",
                str(tmp_path / "out" / "selected.json"),
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
    manifest = orjson.loads((tmp_path / "eval" / "submission.run.json").read_bytes())
    assert manifest["limits"]["memory_bytes"] == 1 << 30 and manifest["passed_env"] == ["PLANTED_KEY"]
    assert manifest["isolation"] == "sandbox" and manifest["network"]["mode"] == "none"


# ---------------------------------------------------------------- A2: a sandbox that cannot start


def test_no_sandbox_is_one_line_exit_2_and_nothing_runs(tmp_path, s8f, devkit, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no bwrap on PATH
    spec = sweep_file(tmp_path, "miss = [0, 3]")
    assert (
        main(
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
                "1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot start the sandbox" in err[0] and "bwrap" in err[0]
    assert not (tmp_path / "out" / "runs").exists() and not (tmp_path / "out" / "sweep.csv").exists()


def test_an_unset_variable_to_pass_is_one_line_exit_2(tmp_path, s8f, devkit, monkeypatch, capsys):
    monkeypatch.delenv("PLANTED_UNSET_KEY", raising=False)
    spec = sweep_file(tmp_path, "miss = [0, 3]", sandbox='pass_env = ["PLANTED_UNSET_KEY"]')
    assert (
        main(
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
                "1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "PLANTED_UNSET_KEY is not set" in err[0]
    assert not (tmp_path / "out" / "runs").exists()


def test_a_run_refused_by_the_sandbox_is_transient_and_resume_reruns_it(tmp_path, s8f, devkit):
    spec = sweep_file(tmp_path, "miss = [0, 3]")

    def no_sandbox_for_miss_3(candidate, public, submission, **kw):
        if kw["params"]["miss"] == 3:
            raise SandboxUnavailable("planted: user namespaces went away")
        return run_candidate(candidate, public, submission, **kw)

    first = run_sweep(spec, s8f.public, devkit, tmp_path / "out", workers=1, progress=False, runner=no_sandbox_for_miss_3)
    assert first.failed == 1
    refused = next(r for r in first.rows if r["status"] != "ok")
    stored = orjson.loads((tmp_path / "out" / "runs" / refused["key"] / "result.json").read_bytes())
    assert stored["transient"] is True and "cannot start the sandbox" in stored["error"]
    second = run_sweep(spec, s8f.public, devkit, tmp_path / "out", workers=1, progress=False)
    assert second.ran == [refused["key"]] and second.failed == 0


# ---------------------------------------------------------------- A3: the components cache under threads


def test_the_components_cache_is_safe_under_threads(tmp_path, monkeypatch):
    """The interleaving that broke the unlocked cache, forced: thread A stores corpus 0's table and,
    before it reads it back, thread B (another corpus) clears the cache. With the lock, B's clear
    waits for A (A's bounded wait below just runs out) and both get their own table."""
    import microctx.corpus.public as public_mod
    import microctx.grading.slices as slices_mod

    files = []
    for i in range(2):
        path = tmp_path / f"c{i}.json"
        path.write_text(f'{{"corpus": {i}}}')
        files.append(path)
    a_stored, b_cleared = threading.Event(), threading.Event()

    def record_table(name):
        if name == "c1.json":
            a_stored.wait(10)  # B computes its table while A stores its own
        return {"id": [name], "component": [name + "-component"]}

    class Orchestrated(dict):
        def __setitem__(self, key, value):
            super().__setitem__(key, value)
            if "c0.json" in value:
                a_stored.set()
                b_cleared.wait(2)  # give B the chance to clear before A reads (B cannot while A holds the lock)

        def clear(self):
            super().clear()
            if threading.current_thread().name == "B":
                b_cleared.set()

    monkeypatch.setattr(public_mod, "load_corpus", lambda path: Path(path).name)
    monkeypatch.setattr(slices_mod, "record_table", record_table)
    monkeypatch.setattr(tune_mod, "_COMPONENTS", Orchestrated())
    got: dict[str, object] = {}

    def work(path: Path) -> None:
        try:
            got[path.name] = tune_mod._components(path)
        except BaseException as exc:  # noqa: BLE001 - the assertion below shows it
            got[path.name] = exc

    threads = [
        threading.Thread(target=work, args=(files[0],), name="A"),
        threading.Thread(target=work, args=(files[1],), name="B"),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == {"c0.json": {"c0.json": "c0.json-component"}, "c1.json": {"c1.json": "c1.json-component"}}


# ---------------------------------------------------------------- A4: one configuration digest


def test_evaluate_records_the_digest_grade_and_reports_use(tmp_path, s8f, devkit):
    from microctx.grading.ledger import config_digest, entries

    spec = sweep_file(tmp_path, "miss = [0]\ncalls = [1]")
    run_sweep(spec, s8f.public, devkit, tmp_path / "out", workers=1, progress=False)
    selected = orjson.loads((tmp_path / "out" / "selected.json").read_bytes())
    assert (
        main(
            [
                "evaluate",
                str(tmp_path / "out" / "selected.json"),
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
    manifest = orjson.loads((tmp_path / "eval" / "submission.run.json").read_bytes())
    evaluation = orjson.loads((tmp_path / "eval" / "evaluation.json").read_bytes())
    digest = config_digest(manifest)
    assert [e["config_digest"] for e in entries()] == [digest]
    assert evaluation["config_digest"] == digest == selected["config_digest"]  # the sweep's run and the evaluation agree
    with open(tmp_path / "out" / "sweep.csv", newline="") as handle:
        assert [r["config_digest"] for r in csv.DictReader(handle)] == [digest]
    # `microctx grade` of the same submission records the same digest
    assert (
        main(
            [
                "grade",
                "--answers",
                str(s8f.answers),
                "--submission",
                str(tmp_path / "eval" / "submission.json"),
                "--output",
                str(tmp_path / "g.json"),
            ]
        )
        == 0
    )
    assert {e["config_digest"] for e in entries()} == {digest} and len(entries()) == 2


# ---------------------------------------------------------------- A5: finite timeouts


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_infinite_timeouts_are_refused(tmp_path, value):
    with pytest.raises(InputError) as info:
        load_sweep(sweep_file(tmp_path, "miss = [0]", candidate=f"timeout = {value}"))
    assert info.value.field == "candidate.timeout"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "[1.0, nan]", "{ a = -inf }"])
def test_grid_values_json_cannot_hold_are_refused(tmp_path, value):
    """TOML has nan and inf; JSON has not (orjson writes null): such a grid value was run under a
    key and written to selected.json as null, so the configuration said was not the one run."""
    with pytest.raises(InputError) as info:
        load_sweep(sweep_file(tmp_path, f"miss = [0]\nodd = [{value}]"))
    assert info.value.field == "grid.odd" and "not a finite number" in info.value.message


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "sel.json", "--public", "p", "--answers", "a", "--out", "o", "--timeout", "inf"],
        ["evaluate", "sel.json", "--public", "p", "--answers", "a", "--out", "o", "--timeout", "nan"],
        ["sweep", "s.toml", "--public", "p", "--devkit", "d", "--out", "o", "--connect-timeout", "inf"],
        ["sweep", "s.toml", "--public", "p", "--devkit", "d", "--out", "o", "--connect-timeout", "0"],
    ],
)
def test_cli_timeouts_must_be_finite_and_positive(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "positive, finite number of seconds" in err[0]


# ---------------------------------------------------------------- A6: the sweep report escapes markup


def test_the_sweep_report_escapes_names_parameters_and_reason(tmp_path, s8f, devkit):
    import nbformat

    from microctx.reports.build import sweep_report

    spec = tmp_path / "markup.toml"
    spec.write_text(
        f'[candidate]\nname = "<img src=x onerror=alert(1)>[click](javascript:alert(2))"\n'
        f'function = "{PLANTED}:run"\n[grid]\nmiss = [0]\n[select]\nmetric = "f1"\n'
    )
    run_sweep(spec, s8f.public, devkit, tmp_path / "out", workers=1, progress=False)
    sweep_report(tmp_path / "out", tmp_path / "report", progress=False)
    book = nbformat.read(tmp_path / "report" / "sweep_report.ipynb", as_version=4)
    markdown = "".join(
        str(o.get("data", {}).get("text/markdown", "")) for c in book.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;\\[click\\]\\(javascript:alert\\(2\\)\\)" in markdown
    assert "<img" not in markdown and "](javascript" not in markdown


# ---------------------------------------------------------------- A7: intervals through grading.stats, one Pareto front


def _result(per_component: list[tuple[int, int, int]]):
    from microctx.contract.facts import FactRow
    from microctx.contract.score import GradeResult

    facts, components = [], {}
    for c, counts in enumerate(per_component):
        for outcome, k in zip(("tp", "fp", "fn"), counts):
            for j in range(k):
                rid = f"r{c}-{outcome}-{j}"
                facts.append(FactRow(rid, "tune", "state", "OPEN", outcome))
                components[rid] = f"c{c}"
    exact = sum(counts[0] for counts in per_component)
    return GradeResult({"test_records": len(facts), "exact_records": exact}, facts), components


def test_tune_intervals_are_the_cluster_bootstrap_of_grading_stats():
    import numpy as np

    table = [
        (3, 1, 0),
        (2, 0, 1),
        (5, 0, 0),
        (0, 2, 1),
        (4, 1, 1),
        (1, 0, 0),
        (2, 2, 0),
        (3, 0, 2),
        (6, 1, 0),
        (0, 0, 1),
        (2, 1, 1),
        (4, 0, 0),
    ]
    result, components = _result(table)
    metrics = sweep_mod.tune_metrics(result, components)
    # each fact is a record of its own here: records = tp + fp + fn, exact records = tp
    columns = np.array([(tp, fp, fn, tp + fp + fn, tp) for tp, fp, fn in table])
    totals = stats.bootstrap_totals(columns, stats.DEFAULT_N_BOOT, stats.DEFAULT_SEED)
    precision = stats.ratio(totals[:, 0], totals[:, 0] + totals[:, 1])
    exact_rate = stats.ratio(totals[:, 4], totals[:, 3])
    # issue 19: the slice table's interval, Korn-Graubard (Clopper-Pearson at the bootstrap's effective
    # size, capped at Kish's n_eff of the metric's units); F1 through q = tp / (tp + fp + fn)
    from microctx.grading import estimate

    tp, fp, fn = columns[:, 0].sum(), columns[:, 1].sum(), columns[:, 2].sum()
    q_reps = stats.ratio(totals[:, 0], totals[:, 0] + totals[:, 1] + totals[:, 2])
    cases = (
        ("f1", np.array([tp / (tp + fp + fn)]), q_reps, columns[:, :3].sum(axis=1), estimate.f1_of_q),
        ("precision", np.array([tp / (tp + fp)]), precision, columns[:, 0] + columns[:, 1], None),
        ("exact_rate", np.array([tp / (tp + fp + fn)]), exact_rate, columns[:, 3], None),
    )
    for name, point, replicates, weights, transform in cases:
        n_eff = stats.kish_n_eff(weights[None, :], axis=1)
        low, high, _ = estimate.korn_graubard(point, replicates[:, None], n_eff, 0.95)
        if transform is not None:
            low, high = transform(low), transform(high)
        assert (metrics[f"{name}_ci_low"], metrics[f"{name}_ci_high"]) == (round(float(low[0]), 6), round(float(high[0]), 6))
        assert metrics[f"{name}_undefined_draws"] == int(np.isnan(replicates).sum())
    assert metrics["tune_components"] == 12


def test_undefined_draws_are_counted_not_dropped():
    # recall is defined only in draws holding a tp or fn: most components hold only fp (three tp
    # components, so that no single one carries the metric: issue 19's leave-one-out check passes)
    result, components = _result([(1, 0, 0)] * 3 + [(0, 1, 0)] * 9)
    metrics = sweep_mod.tune_metrics(result, components, n_boot=4000)
    assert 0 < metrics["recall_undefined_draws"] < 4000  # (9/12)^12 of the draws, about 3%
    assert abs(metrics["recall_undefined_draws"] / 4000 - (9 / 12) ** 12) < 0.01


def test_too_few_components_get_no_interval():
    result, components = _result([(3, 1, 0)] * (stats.DEFAULT_MIN_COMPONENTS - 1))
    metrics = sweep_mod.tune_metrics(result, components)
    assert metrics["f1"] == round(6 / 7, 6)
    assert all(math.isnan(metrics[f"{n}_ci_{s}"]) for n in ("exact_rate", "precision", "recall", "f1") for s in ("low", "high"))


def test_pareto_front_semantics():
    front = stats.pareto_front
    assert front([], []) == []
    assert front([1.0, 1.0], [0.5, 0.5]) == [True, True]  # equal points dominate neither
    assert front([1.0, 1.0], [0.5, 0.6]) == [False, True]  # same cost, better value
    assert front([1.0, 2.0], [0.5, 0.5]) == [True, False]  # same value, more cost
    assert front([math.nan, 1.0, 0.5], [0.9, 0.5, math.nan]) == [False, True, False]  # NaN never on, never dominates
    assert front([0.0, 1.0, 1.0, 2.0, math.nan, 0.5], [10, 12, 11, 12, 99, 10]) == [True, True, False, False, False, False]
    with pytest.raises(ValueError):
        front([1.0], [])
    # the sweep's helper is the same implementation
    assert not hasattr(sweep_mod, "pareto_front")  # one implementation, in grading.stats
    assert front([1.0, 1.0, math.nan], [0.5, 0.5, 1.0]) == [True, True, False]


# ---------------------------------------------------------------- A8: model costs


def test_model_counters_are_selection_costs():
    for cost in ("cost_microdollars", "cached_tokens"):
        assert cost in sweep_mod.COSTS
    spec = sweep_mod.SweepSpec(
        "s",
        "x",
        "builtin",
        "llm",
        None,
        None,
        ("train",),
        {"mode": ["micro"]},
        rule="least-cost-meeting-floor",
        floor=0.5,
        cost="cost_microdollars",
    )
    rows = []
    for index, (f1, dollars) in enumerate([(0.9, 500), (0.8, 200), (0.4, 10), (0.95, None)]):
        result = {
            "index": index,
            "key": f"k{index}",
            "status": "ok",
            "parameters": {"mode": "micro"},
            "metrics": {"f1": f1},
            "manifest": {"counters": {"cost_microdollars": dollars, "cached_tokens": 7}},
        }
        rows.append(sweep_mod.sweep_row(result, spec))
    assert rows[0]["cost_microdollars"] == 500 and rows[0]["cached_tokens"] == 7
    assert sweep_mod.select(rows, spec)["row"]["key"] == "k1"  # cheapest meeting the floor; unknown cost never cheapest
    assert b"cost_microdollars" in sweep_mod.sweep_csv(rows, "k1").splitlines()[0]


# ---------------------------------------------------------------- issue 14: an llm sweep on tune


@pytest.fixture(scope="module")
def small(tmp_path_factory, s8f_corpus):
    """The first 120 s8f records frozen as a corpus of their own, and its devkit."""
    from microctx.contract.schemas import load_answers

    folder = tmp_path_factory.mktemp("small")
    frozen = freeze(corpus_to_issues(s8f_corpus)[:120], "s8f first 120 records")
    paths = folder / "public.json", folder / "answers.json", folder / "report.json"
    write_frozen(frozen, *paths)
    from microctx.corpus.public import load_corpus

    devkit = folder / "devkit.json"
    devkit.write_bytes(dumps(make_devkit(load_answers(paths[1]), corpus=load_corpus(paths[0]))))
    return paths[0], paths[1], devkit


@pytest.mark.slow
def test_an_llm_sweep_over_mode_and_chunk_records_runs_on_tune(small, tmp_path):
    from microctx.contract.schemas import load_answers

    public, _, devkit = small
    tune = {a["id"] for a in load_answers(devkit)["answers"] if a["split"] == "tune"}
    assert tune  # the sweep grades on these
    with FakeOpenAI() as fake:
        host = fake.base_url.split("//", 1)[1].split("/", 1)[0]
        spec = tmp_path / "llm.toml"
        spec.write_text(
            f'[candidate]\nbuiltin = "llm"\ntimeout = 300\n'
            f'[grid]\nmode = ["micro", "chunks"]\nchunk_records = [10, 20]\n'
            f'base_url = ["{fake.base_url}"]\nmodel = ["fake-model"]\nsplits = ["tune"]\nbackoff = [0]\n'
            f'[select]\nmetric = "f1"\nrule = "least-cost-meeting-floor"\nfloor = 0.9\ncost = "cost_microdollars"\n'
            f'[sandbox]\nnetwork = "record"\nallow_hosts = ["{host}"]\n'
        )
        code = main(
            [
                "sweep",
                str(spec),
                "--public",
                str(public),
                "--devkit",
                str(devkit),
                "--out",
                str(tmp_path / "out"),
                "--workers",
                "2",
            ]
        )
        asked = {rid for r in fake.requests for rid in r.get("ids", [])}
    assert code == 0
    with open(tmp_path / "out" / "sweep.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), [r["error"] for r in rows]
    assert all(float(r["f1"]) == 1.0 and int(r["model_calls"]) > 0 for r in rows)
    assert all(r["cost_microdollars"] != "" for r in rows)
    if asked:  # the fake logs the record ids it was asked about: tune records only
        assert asked <= tune
    selected = orjson.loads((tmp_path / "out" / "selected.json").read_bytes())
    assert selected["ok"] and selected["sandbox"]["network"] == "record" and selected["sandbox"]["allow_hosts"] == [host]
    chosen = selected["parameters"]
    assert chosen["mode"] in ("micro", "chunks") and chosen["chunk_records"] in (10, 20)
    manifest = orjson.loads(next((tmp_path / "out" / "runs").glob("*/run.json")).read_bytes())
    assert manifest["network"]["mode"] == "record"


def test_the_llm_example_sweep_file():
    spec = load_sweep(ROOT / "sweeps" / "llm.toml")
    assert spec.kind == "builtin" and spec.entry == "llm" and set(spec.grid) >= {"mode", "chunk_records"}
    assert spec.sandbox is not None and spec.sandbox.network == "record" and spec.sandbox.allow_hosts
