"""Typed records (microctx.contract.records), the declared sweep file (microctx.tuning.config), the
version of a built-in's code, candidates from the `microctx.candidates` entry-point group, and
`freeze([])` (issue 17)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from microctx.candidates.runner import run_candidate
from microctx.cli import main
from microctx.contract import records
from microctx.contract.canonical import dumps
from microctx.errors import InputError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def exact_run(tmp_path_factory, synthetic):
    """One real run of exact-sql (in the sandbox) on the synthetic corpus."""
    folder = tmp_path_factory.mktemp("exact")
    manifest = run_candidate("exact-sql", synthetic.public, folder / "exact.json")
    assert manifest["ok"], manifest["error"]
    return folder / "exact.json", manifest


# ---------------------------------------------------------------- one home for the schema ids


def test_every_microctx_schema_id_is_written_in_contract_schemas():
    found = {}
    below = {"microctx/_io/sets.py"}  # the private I/O layer sits below the contract: its journal's id stays there
    for path in (ROOT / "microctx").rglob("*.py"):
        if path.relative_to(ROOT).as_posix() in below:
            continue
        for match in re.finditer(r"[\"'](microctx-[a-z-]+/\d+)[\"']", path.read_text()):
            found.setdefault(match.group(1), set()).add(path.relative_to(ROOT).as_posix())
    from microctx.contract.schemas import MICROCTX_SCHEMAS, RUN_SCHEMAS

    assert found and {p for paths in found.values() for p in paths} == {"microctx/contract/schemas.py"}, found
    assert set(found) == set(MICROCTX_SCHEMAS) | set(RUN_SCHEMAS)


# ---------------------------------------------------------------- the run manifest


def test_the_run_manifest_is_the_record_it_was_written_as(exact_run):
    submission, manifest = exact_run
    path = records.manifest_path(submission)
    record = records.read_manifest(submission, strict=True)
    assert isinstance(record, records.RunManifest) and record.ok is True and record.kind == "builtin"
    assert dumps(record.as_dict()) == path.read_bytes()  # byte for byte: every field typed, none lost
    assert record.counter("tool_calls") == manifest["counters"]["tool_calls"] > 0
    assert record.counter("cost_microdollars") is None  # a model counter exact-sql never reported
    assert records.config_digest(record) == records.config_digest(orjson.loads(path.read_bytes()))


def test_the_run_manifest_is_read_without_the_sandbox_or_the_runner():
    code = (
        "import sys\nfrom microctx.contract import records\n"
        "print(sorted(m for m in sys.modules if m.startswith('microctx.candidates')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


PLANTED_FIELDS = [
    ({"cpu_seconds": "fast"}, "cpu_seconds", "expected float | null"),
    ({"ok": "yes"}, "ok", "expected bool | null"),
    ({"counters": {"model_calls": -1}}, "counters.model_calls", "expected int >= 0"),
    ({"counters": {"model_callz": 3}}, "counters.model_callz", "unknown field"),
    ({"runnr": {"microctx": "1"}}, "runnr", "unknown field"),
    ({"schema": "microctx-run/9"}, "schema", "expected schema microctx-run/2 or microctx-run/1"),
    ({"schema": "fak-microcontext-submission/1"}, "schema", "expected schema"),
]


@pytest.mark.parametrize("planted, field, said", PLANTED_FIELDS)
def test_a_planted_wrong_field_or_schema_is_refused_naming_file_and_field(exact_run, tmp_path, planted, field, said):
    from microctx.grading import ledger
    from microctx.reports import tables

    submission = tmp_path / "s.json"
    shutil.copyfile(exact_run[0], submission)
    document = {**exact_run[1], **planted}
    records.manifest_path(submission).write_bytes(dumps(document))
    with pytest.raises(InputError) as info:
        records.read_manifest(submission, strict=True)
    assert info.value.file == str(records.manifest_path(submission)) and info.value.field == field
    assert said in info.value.message and "\n" not in str(info.value)
    with pytest.raises(InputError, match=re.escape(field)):
        tables.cost_table([str(submission)], ["s"])  # a report that shows costs refuses it
    assert records.read_manifest(submission) is None  # the ledger takes it as no manifest
    assert ledger.submission_identity(submission, records.read_manifest(submission))[1:] == (None, None)


@pytest.mark.parametrize(
    "kind",
    [records.Selected, records.SweepResult, records.Evaluation, records.ReportManifest],
)
def test_every_record_reader_refuses_an_unknown_schema(tmp_path, kind):
    path = tmp_path / "r.json"
    path.write_bytes(dumps({"schema": "microctx-other/1"}))
    with pytest.raises(InputError) as info:
        records.read_record(path, kind)
    assert info.value.field == "schema" and str(path) in str(info.value)


def test_the_configuration_digest_is_computed_from_a_type():
    base = {"candidate": "c", "version": "1", "parameters": {"k": 2, "a": 1}}
    digest = records.config_digest(base)
    assert digest == records.config_digest({**base, "wall_seconds": 9.5, "ok": False})  # not a configuration field
    assert digest == records.config_digest({"parameters": {"k": 2, "a": 1}, "version": "1", "candidate": "c"})
    assert digest != records.config_digest({**base, "isolation": "process"})  # how it ran is part of it
    assert digest != records.config_digest({**base, "network": {"mode": "record", "allow_hosts": ["h:1"]}})
    assert digest != records.config_digest({**base, "version": "2"})
    expected = records.Configuration("c", "1", {"k": 2, "a": 1}).digest()
    assert digest == expected and len(digest) == 64
    with pytest.raises(InputError, match="parameters"):
        records.config_digest({**base, "parameters": [1]})


def test_the_ledger_entry_is_a_record(tmp_path):
    from microctx.grading import ledger

    entry = ledger.record_look(
        answers_sha256="a" * 64, submission_sha256=None, candidate="x", config_digest=None, via="t", grade={}, path=tmp_path / "l"
    )
    row = ledger.entries(path=tmp_path / "l")[0]
    stored = records.LedgerEntry(**{k: v for k, v in row.items() if k != "id"})
    assert stored.candidate == entry["candidate"] == "x" and stored.via == "t"


# ---------------------------------------------------------------- the declared sweep file


def _sweep(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(body)
    return path


BAD_VALUES = [
    ('[candidate]\nbuiltin = "exact-sql"\n[grid]\nthreads = [100000000000000000000]\n[select]\n', None),
    ('[candidate]\nbuiltin = "exact-sql"\n[grid]\nthreads = [1]\n[select]\nmetric = "f1\n', "not valid TOML"),
    ('[candidate]\nbuiltin = "exact-sql"\n[grid]\nthreads = [' + "[" * 3000 + "]" * 3000 + "]\n[select]\n", None),
    ('[candidate]\nbuiltin = "exact-sql"\ntimeout = "soon"\n[grid]\nthreads = [1]\n[select]\n', "candidate.timeout"),
    ('[candidate]\nbuiltin = "exact-sql"\n[grid]\nthreads = [1]\n[search]\nseed = true\n[select]\n', "search.seed"),
    ('[candidate]\nbuiltin = "exact-sql"\n[grid]\nthreads = [1]\n[select]\nfloor = 2\n', "select.floor"),
    ('[candidate]\nbuiltin = "exact-sql"\n[grid]\nthreads = [1]\n[select]\n[sandbox]\nmax_processes = 10e3\n', "sandbox"),
]


@pytest.mark.parametrize("body, where", BAD_VALUES)
def test_bad_values_in_a_sweep_file_exit_2_with_one_line(tmp_path, capsys, synthetic, body, where):
    path = _sweep(tmp_path, body)
    code = main(["sweep", str(path), "--public", str(synthetic.public), "--devkit", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and str(path) in err, err
    if where:
        assert where in err, err
    assert not (tmp_path / "o").exists()


def test_the_sweep_file_is_declared_once_in_types():
    from microctx.tuning import config

    assert set(config.SandboxTable.__struct_fields__) == set(config.SANDBOX_KEYS)
    assert set(config.SelectTable.__struct_fields__) == {"metric", "rule", "floor", "cost"}
    assert config.METRICS == config.Metric.__args__ and config.RULES == config.Rule.__args__


# ---------------------------------------------------------------- the version of a built-in's code


KEY_OF_A_BUILTIN = """
import sys
from microctx.candidates.registry import builtin_version
from microctx.tuning.config import SweepSpec, config_key
keys = []
for name in ("exact-sql", "text-only"):
    spec = SweepSpec("s.toml", name, "builtin", name, builtin_version(name), None, ("train",), {"x": [1]})
    keys.append(builtin_version(name) + " " + config_key(spec, {"x": 1}, "c", "d", "e"))
print("\\n".join(keys))
"""


def test_editing_a_builtins_source_changes_its_version_and_sweep_key(tmp_path):
    """A copy of the package; one built-in's module edited: its version and key move, the other's do not."""
    shutil.copytree(ROOT / "microctx", tmp_path / "microctx", ignore=shutil.ignore_patterns("__pycache__"))

    def keys() -> list[str]:
        env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
        out = subprocess.run(
            [sys.executable, "-c", KEY_OF_A_BUILTIN], capture_output=True, text=True, env=env, cwd=tmp_path, check=True
        )
        return out.stdout.split("\n")[:2]

    before = keys()
    module = tmp_path / "microctx" / "candidates" / "builtins" / "exact_sql.py"
    module.write_text(module.read_text() + "\n# an edit\n")
    after = keys()
    assert after[0] != before[0] and after[1] == before[1]
    assert before[0].split()[0].split("+code.")[0] == after[0].split()[0].split("+code.")[0]  # microctx's own version
    prompts = tmp_path / "microctx" / "candidates" / "builtins" / "prompts" / "micro.v1.txt"
    from microctx.candidates import registry

    llm_before = registry.code_digest([ROOT / "microctx" / "candidates" / "builtins" / "prompts"])
    prompts.write_text(prompts.read_text() + " ")
    assert registry.code_digest([prompts.parent]) != llm_before  # a prompt is code too


def test_a_builtins_manifest_version_carries_its_code_hash(exact_run):
    from microctx.candidates.registry import builtin_version

    assert exact_run[1]["version"] == builtin_version("exact-sql") and "+code." in exact_run[1]["version"]


def test_run_version_keeps_what_the_candidate_reports():
    from microctx._version import __version__
    from microctx.candidates.registry import run_version

    known = f"{__version__}+code.abc"
    assert run_version(known, f"{__version__}+prompt.micro.v1") == f"{known}+prompt.micro.v1"
    assert run_version(known, None) == known and run_version(None, "mine-1") == "mine-1"
    assert run_version(known, "other") == f"{known}+other"


# ---------------------------------------------------------------- candidates from other packages


PLUGIN = '''
"""A candidate of another package: exact-sql's answers under its own name."""
__version__ = "plugin-7"


def run(public_path, output_path, *, devkit_path=None, params=None):
    from microctx.candidates.builtins.exact_sql import run as exact

    counters = exact(public_path, output_path, params={})
    return {**counters, "tool_calls": counters["tool_calls"] + int(params.get("extra", 0))}
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """A real distribution on a temporary sys.path entry, with a `microctx.candidates` entry point."""
    site = tmp_path / "site"
    (site / "mcx_planted_plugin").mkdir(parents=True)
    (site / "mcx_planted_plugin" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "mcx_planted_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: mcx-planted-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[microctx.candidates]\nplanted-plugin = mcx_planted_plugin:run\nexact-sql = mcx_planted_plugin:run\n"
    )
    monkeypatch.syspath_prepend(str(site))
    return site


def test_an_entry_point_candidate_resolves_and_runs_beside_the_builtins(plugin, tmp_path, synthetic):
    from microctx.candidates import registry

    found = registry.entry_point_candidates()
    assert "planted-plugin" in found and "exact-sql" not in found  # a built-in name wins
    spec = registry.resolve("planted-plugin", {"extra": 5})
    assert (spec.kind, spec.entry, spec.import_root) == ("function", "mcx_planted_plugin:run", str(plugin))
    assert registry.resolve("exact-sql").kind == "builtin"
    manifest = run_candidate("planted-plugin", synthetic.public, tmp_path / "p.json", params={"extra": 5})
    assert manifest["ok"], manifest["error"]
    assert manifest["candidate"] == "planted-plugin" and manifest["version"] == "plugin-7"
    exact = run_candidate("exact-sql", synthetic.public, tmp_path / "e.json")
    assert (tmp_path / "p.json").read_bytes() == (tmp_path / "e.json").read_bytes()
    assert manifest["counters"]["tool_calls"] == exact["counters"]["tool_calls"] + 5


def test_an_unknown_name_lists_the_entry_point_candidates(plugin):
    from microctx.candidates import registry

    with pytest.raises(InputError, match="planted-plugin"):
        registry.resolve("no-such-candidate")


# ---------------------------------------------------------------- freeze([])


def test_freeze_of_nothing_is_an_input_error(tmp_path, capsys):
    import microctx

    with pytest.raises(InputError, match="0 issues, at least 50 are needed"):
        microctx.freeze([], source="nothing")
    raw = tmp_path / "raw.json"
    raw.write_text("[]")
    argv = ["freeze", str(raw), "--source", "x"]
    argv += [f"--{k}={tmp_path / k}.json" for k in ("public", "answers", "report")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "0 issues" in err and sorted(p.name for p in tmp_path.iterdir()) == ["raw.json"]


# ---------------------------------------------------------------- the built-ins' declared parameters


def test_a_builtins_defaults_are_written_once():
    import inspect

    from microctx.candidates import registry
    from microctx.candidates.builtins import llm, params, text_only

    assert llm.DEFAULTS == registry.BUILTINS["llm"].params == params.defaults(params.LlmParams)
    signature = inspect.signature(text_only.TextMetadataClassifier)
    assert {k: v.default for k, v in signature.parameters.items()} == registry.BUILTINS["text-only"].params
    assert registry.resolve("retrieval").params == params.defaults(params.RetrievalParams)


@pytest.mark.parametrize(
    "value, said",
    [("100000000000000000000", "expected int"), ('"unbalanced', "expected int"), ("[" * 2000 + "]" * 2000, "expected int")],
)
def test_a_builtin_parameter_of_the_wrong_type_is_exit_2_before_anything_runs(tmp_path, capsys, synthetic, value, said):
    argv = ["run", "exact-sql", "--public", str(synthetic.public), "--submission", str(tmp_path / "s.json")]
    assert main([*argv, "--param", f"threads={value}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--param threads" in err and said in err, err[:300]
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_grid_value_of_the_wrong_type_names_the_grid_key(tmp_path):
    from microctx.tuning.config import load_sweep

    path = _sweep(tmp_path, '[candidate]\nbuiltin = "retrieval"\n[grid]\nk = [5, "ten"]\n[select]\n')
    with pytest.raises(InputError) as info:
        load_sweep(path)
    assert info.value.field == "grid.k" and "expected int, got str" in info.value.message


@pytest.mark.parametrize(
    "text, said",
    [
        ('[m]\n"in" = -1.0\n"out" = 1.0\n', "Expected `float` >= 0"),
        ('[m]\n"in" = 1.0\n', "missing required field `out`"),
        ('[m]\n"in" = 1.0\n"out" = 1.0\ncached = "free"\n', "Expected `float | null`, got `str` - at `$.cached`"),
        ('[m]\n"in" = 1.0\n"out = 1.0\n', "not valid TOML"),
    ],
)
def test_the_price_file_is_a_declared_type(tmp_path, text, said):
    from microctx.candidates.builtins import llm

    table = tmp_path / "prices.toml"
    table.write_text(text)
    with pytest.raises(llm.ConfigError, match=re.escape(said)) as info:
        llm.make_config({"base_url": "http://x/v1", "model": "m", "price_file": str(table)})
    assert str(table) in str(info.value)
    table.write_text('[m]\n"in" = 2\n"out" = 3.5\n')
    config = llm.make_config({"base_url": "http://x/v1", "model": "m", "price_file": str(table)})
    assert (config.price_in, config.price_out, config.price_cached) == (2.0, 3.5, 2.0)


SELECTED = {
    "schema": "microctx-selected/1",
    "ok": True,
    "sweep": {"path": "s.toml", "sha256": "0" * 64, "configurations": 1, "failed": 0},
    "candidate": {"name": "c", "kind": "builtin", "entry": "exact-sql", "version": "1", "timeout": None},
    "sandbox": None,
    "parameters": {"threads": 1},
    "config_key": "k" * 64,
    "config_digest": "d" * 64,
    "corpus_sha256": "c" * 64,
    "devkit_sha256": "e" * 64,
    "candidate_devkit": {"path": "candidate-devkit.json", "splits": ["train"], "sha256": "f" * 64},
    "selection": {"metric": "f1", "rule": "max", "floor": None, "cost": None},
    "tune": {"f1": 0.5},
    "reason": "highest tune f1",
}


@pytest.mark.parametrize(
    "planted, field",
    [({"candidate_devkit": {**SELECTED["candidate_devkit"], "sha256": 5}}, "candidate_devkit.sha256"), ({"tun": {}}, "tun")],
)
def test_evaluate_refuses_a_selected_json_with_a_planted_wrong_field(tmp_path, capsys, synthetic, planted, field):
    from microctx.tuning.evaluate import load_selected

    path = tmp_path / "selected.json"
    path.write_bytes(dumps(SELECTED))
    assert load_selected(path)["candidate_devkit"]["path"] == "candidate-devkit.json"
    path.write_bytes(dumps({**SELECTED, **planted}))
    argv = ["evaluate", str(path), "--public", str(synthetic.public), "--answers", str(synthetic.answers)]
    assert main([*argv, "--out", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"field '{field}'" in err and str(path) in err, err
    assert not (tmp_path / "e").exists()


def test_a_sweep_result_that_is_not_the_record_is_run_again(tmp_path):
    from microctx.tuning.write import read_result

    folder = tmp_path / "runs" / "k"
    folder.mkdir(parents=True)
    result = {"schema": "microctx-sweep-result/1", "key": "k", "index": 0, "parameters": {}, "status": "ok", "error": ""}
    result |= {"manifest": None, "grade": None, "metrics": None, "task_seconds": 1.0}
    (folder / "result.json").write_bytes(dumps(result))
    assert read_result(folder) == result
    (folder / "result.json").write_bytes(dumps({**result, "index": "first"}))
    assert read_result(folder) is None
