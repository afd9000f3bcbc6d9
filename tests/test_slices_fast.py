"""`microctx slices` without pandas (issue 24): the record table as numpy columns, the facts straight
from the grade, slices.csv written from the columns. Its bytes are those of the DataFrame path
(`slice_table` + `write_slices_csv`). The digests below were made by the DataFrame path
(`slice_table` + `frame_csv_bytes`) when the cluster bootstrap's draws became index draws where
they are cheaper (`stats.component_draws`, issue 24: the same distribution, another random
stream, so Monte-Carlo digits moved; the judged and weak slices stayed those of issue 19's
statistics, Fisher's slice-vs-rest test and the rests-on rule)."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import sys

import numpy as np
import pytest
import test_slices as cases

from microctx import cli
from microctx._io.csvout import columns_csv_bytes, frame_csv_bytes
from microctx.contract.canonical import dumps
from microctx.contract.score import grade
from microctx.errors import InputError
from microctx.grading import slices
from microctx.grading.counts import prepare_rows
from microctx.grading.examples import planted_submission
from microctx.grading.records import RecordColumns, record_columns
from microctx.grading.table import slice_columns

# slices.csv of `microctx slices` on s8f with the planted demo submission, default options
S8F_PLANTED = "9b4a38259b8b870dd3504c041724b3416bcdb384b0389b4407cf5b58565c291c"
# every record its own component (so slices are judged and some are weak), n_boot=2000, seed=5
INDEPENDENT = {
    "oracle": "7b9fad811f6b175a5d94aa11ef703e442b81b7f596617de6b9c79b7d61c5d6a6",
    "no_enhancement": "df989494dcefe361c28161852e2fa656f95335b8a8b7cfe7f55bfef9c110e787",
    "no_references": "c4a156c7812f9fdfed9365563afcb235952b8be4b0ee6e28eb9d99ab8e2e5951",
    "false_positives": "f8178d8ef0a9a479576df7f44b74cb74084fe6b6d8f37700f75647fda704d99d",
    "dropped_record": "2b0e584bc57c6ee0ce2dc839305e8aa2a7ff8cf341d7e45d0cd56b827c19ecaa",
    "all_faults": "c54e3cdf23a232ea807087014f5ea77abbac215fda204a0ac41ae9e87d0f7fc4",
}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _slices_argv(s8f, submission, output, *extra):
    return ["slices", "--public", str(s8f.public), "--answers", str(s8f.answers), "--submission", str(submission),
            "--output", str(output), *extra]  # fmt: skip


@pytest.fixture(scope="module")
def records(s8f_corpus):
    return record_columns(s8f_corpus)


def test_the_command_writes_the_dataframe_paths_bytes(s8f, s8f_answers, s8f_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "ledger.sqlite"))
    submission = tmp_path / "planted.json"
    submission.write_bytes(dumps(planted_submission(s8f_answers)))
    assert cli.main(_slices_argv(s8f, submission, tmp_path / "slices.csv")) == 0
    written = (tmp_path / "slices.csv").read_bytes()
    assert _sha(written) == S8F_PLANTED
    facts = slices.facts_frame(grade(s8f_answers, planted_submission(s8f_answers)).facts)
    assert frame_csv_bytes(slices.slice_table(facts, s8f_corpus)) == written  # the DataFrame path, same bytes


@pytest.mark.parametrize("name", sorted(INDEPENDENT))
def test_columns_and_dataframe_give_the_pinned_bytes_where_slices_are_judged(name, s8f_answers, s8f_corpus, records):
    one_each = {name: records[name] for name in records.columns}
    one_each["component"], one_each["component_size"] = records["number"], np.ones(len(records), dtype=np.int64)
    independent = RecordColumns(one_each)
    rows = grade(s8f_answers, cases.PLANTS[name](s8f_answers)).facts
    columns = slice_columns(prepare_rows(rows, independent, "facts"), independent, n_boot=2000, seed=5)
    fast = columns_csv_bytes(columns)
    assert _sha(fast) == INDEPENDENT[name]
    frame = slices.slice_table(slices.facts_frame(rows), s8f_corpus, records=independent.frame(), n_boot=2000, seed=5)
    assert frame_csv_bytes(frame) == fast
    if name == "no_enhancement":  # the weak test ran: the judged and weak slices of the multinomial draws
        assert int((~np.isnan(columns["p_value"])).sum()) == 38 and int(columns["weak"].sum()) == 2


def test_record_columns_are_the_record_table(s8f_corpus, s8f_answers):
    import pandas as pd

    table = slices.record_table(s8f_corpus, s8f_answers)
    pd.testing.assert_frame_equal(record_columns(s8f_corpus, s8f_answers).frame(), table, check_exact=True)
    assert list(table.columns)[-1] == "gold_facts" and table["component_size"].sum() > len(table)


def test_answers_bound_to_the_corpus_give_the_fields_the_text_gives(s8f_corpus, s8f_answers):
    """`microctx slices` reads references, duplicate targets and cue words from the answer bundle
    bound to the corpus instead of deriving them again: the same table as the derivation. A
    bundle bound to another corpus is not read (its planted reference is not in the table)."""
    import copy

    import pandas as pd

    derived = record_columns(s8f_corpus)
    read = record_columns(s8f_corpus, s8f_answers, gold_facts=False)
    pd.testing.assert_frame_equal(read.frame(), derived.frame(), check_exact=True)
    planted = copy.deepcopy(s8f_answers)
    planted["answers"][0]["references"] = [99999]
    row = list(derived["id"]).index(planted["answers"][0]["id"])
    assert list(record_columns(s8f_corpus, planted)["references"][row]) == [99999]  # read, not derived
    elsewhere = dict(planted, corpus_sha256="0" * 64)
    assert list(record_columns(s8f_corpus, elsewhere)["references"][row]) == list(derived["references"][row])


def test_a_bound_corpus_is_read_for_its_table_alone(s8f, s8f_corpus, s8f_answers, tmp_path):
    """`microctx slices` reads a public corpus bound to the answer bundle for the fields its record
    table needs, the texts' digests standing in for the texts (`bound_record_columns`): the same
    table as the corpus loaded whole. A file the bundle is not bound to is loaded and checked
    whole: a bad timestamp is named, and the digests are not read."""
    import pandas as pd
    from orjson import dumps as orjson_dumps
    from orjson import loads

    from microctx.contract.digests import sha256_hex
    from microctx.grading.records import bound_record_columns

    whole = record_columns(s8f_corpus, s8f_answers, gold_facts=False)
    bound = bound_record_columns(s8f.public, s8f_answers)
    pd.testing.assert_frame_equal(bound.frame(), whole.frame(), check_exact=True)
    document = loads(s8f.public.read_bytes())
    first, other = document["records"][0], document["records"][-1]
    assert whole["component"][0] != whole["component"][-1]
    first["title_sha256"] = other["title_sha256"]  # the digest says the titles are equal: one component
    changed = tmp_path / "public.json"
    changed.write_bytes(orjson_dumps(document))
    table = bound_record_columns(changed, dict(s8f_answers, corpus_sha256=sha256_hex(changed.read_bytes())))
    assert table["component"][0] == table["component"][-1]  # read as bound: the digests, not the texts
    first["created_at"] = "yesterday"
    changed.write_bytes(orjson_dumps(document))
    with pytest.raises(InputError, match="created_at"):
        bound_record_columns(changed, s8f_answers)  # not bound: checked whole
    with pytest.raises(InputError, match="created_at"):  # bound: checked all the same (test below)
        bound_record_columns(changed, dict(s8f_answers, corpus_sha256=sha256_hex(changed.read_bytes())))


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        (b'"state": "OPEN"', b'"state": "MERGED"', "state"),
        (b'"split": "test"', b'"split": "bogus"', "split"),
        (b'"created_at": "', b'"created_at": "yesterday", "was": "', "created_at"),
        (b'"closed_at": "', b'"closed_at": "2026-02-30T00:00:00Z", "was": "', "closed_at"),
        (b'"url": "', b'"url": 7, "was": "', "url"),
        (b'"title": "', b'"title": null, "was": "', "title"),
        (b'"number": 5', b'"number": 18446744073709551616', "number"),  # a float to orjson
        (b'"number": 5105,', b'"number": 9223372036854775808,', "number"),  # 2^63: was exit 70 (int64 overflow)
        (b'"schema": "fak-microcontext-corpus/1"', b'"schema": "fak-microcontext-corpus/9"', "schema"),
    ],
)
def test_a_bound_corpus_is_checked_as_a_whole_one(s8f, s8f_answers, tmp_path, monkeypatch, capsys, old, new, field):
    """A bundle names a file by its digest; it does not vouch for it: a crafted pair (a public
    corpus with a third state, a split of its own, a bad timestamp..., and a bundle naming its
    digest) was read for the table alone and sliced (exit 0, a look recorded), where every whole
    reader refuses the corpus. Now it is refused as `load_corpus` refuses it: exit 2, the file,
    record and field named, nothing written, no look."""
    from orjson import dumps as orjson_dumps

    from microctx.contract.digests import sha256_hex
    from microctx.corpus.public import load_corpus
    from microctx.grading import ledger

    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "ledger.sqlite"))
    text = s8f.public.read_bytes()
    assert old in text
    public, answers, out = tmp_path / "public.json", tmp_path / "answers.json", tmp_path / "s.csv"
    public.write_bytes(text.replace(old, new, 1))
    answers.write_bytes(orjson_dumps(dict(s8f_answers, corpus_sha256=sha256_hex(public.read_bytes()))))
    with pytest.raises(InputError) as whole:
        load_corpus(public)
    argv = ["slices", "--public", str(public), "--answers", str(answers), "--submission", str(s8f.answers),
            "--output", str(out)]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.strip().endswith(str(whole.value)) and field in err, err
    assert not out.exists() and ledger.entries() == []


@pytest.mark.parametrize("writer", ["edit", "truncate"])
def test_a_bound_corpus_rewritten_while_read_is_read_as_hashed(s8f, s8f_answers, tmp_path, monkeypatch, writer):
    """The reviewer's race: the file was mapped, hashed on one thread and decoded from the mapping,
    so a writer rewriting it in place between the two had its records trusted under the old
    digest (a tune record read as test), and a truncation killed the process (SIGBUS). The bytes
    hashed are now the bytes parsed: the table is the one of the bytes the bundle is bound to."""
    import msgspec

    from microctx.grading import records as records_module
    from microctx.grading.records import bound_record_columns

    public = tmp_path / "public.json"
    public.write_bytes(s8f.public.read_bytes())
    at = public.read_bytes().index(b'"split": "tune"')
    real = msgspec.json.decode

    def racing_decode(buf, **kw):  # a writer acting after the hash began, before the decode
        with open(public, "r+b") as handle:
            if writer == "truncate":
                handle.truncate(100)
            else:
                handle.seek(at)
                handle.write(b'"split": "test"')
        return real(buf, **kw)

    monkeypatch.setattr(records_module.msgspec.json, "decode", racing_decode)
    table = bound_record_columns(public, s8f_answers)
    gold = {a["id"]: a["split"] for a in s8f_answers["answers"]}
    assert [gold[i] for i in table["id"]] == list(table["split"])  # every split as the bundle has it


def test_a_bad_corpus_is_named_before_bad_answers(s8f, tmp_path, monkeypatch, capsys):
    """The answers are read before the corpus (its reading needs their digest), and a bad corpus
    is still the error named when both are bad, as when the corpus was read first."""
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path / "ledger.sqlite"))
    public, answers = tmp_path / "public.json", tmp_path / "answers.json"
    public.write_text("{}")
    answers.write_text("[]")
    argv = ["slices", "--public", str(public), "--answers", str(answers), "--submission", str(s8f.answers),
            "--output", str(tmp_path / "s.csv")]  # fmt: skip
    assert cli.main(argv) == 2
    assert str(public) in capsys.readouterr().err
    public.write_bytes(s8f.public.read_bytes())
    assert cli.main(argv) == 2
    assert str(answers) in capsys.readouterr().err


def test_formula_text_in_a_slice_name_is_written_as_text_by_both_paths(s8f_answers, s8f_corpus, records):
    sub = planted_submission(s8f_answers)
    sub["answers"][0]["labels"] = [*sub["answers"][0]["labels"], '=HYPERLINK("http://x")']  # a false positive label
    rows = grade(s8f_answers, sub).facts
    fast = columns_csv_bytes(slice_columns(prepare_rows(rows, records, "facts"), records, n_boot=200))
    frame = frame_csv_bytes(slices.slice_table(slices.facts_frame(rows), s8f_corpus, n_boot=200))
    assert fast == frame
    assert b'label,"\'=HYPERLINK(""http://x"")",' in fast


def test_facts_of_another_corpus_name_the_record(s8f_answers, records):
    rows = grade(s8f_answers, planted_submission(s8f_answers)).facts
    moved = [dataclasses.replace(next(r for r in rows if r.kind == "label"), record_id="elsewhere/1")]
    with pytest.raises(InputError, match="elsewhere/1"):
        prepare_rows(moved, records, "facts")


def _imports_after(code: str) -> set[str]:
    """The modules loaded once `code` ran in a fresh interpreter (printed after a marker line, so
    the command's own output is not read as module names)."""
    code += "\nimport sys; print('MODULES'); print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split("MODULES\n", 1)[1].split())


def test_slices_and_grade_commands_leave_out_what_they_do_not_need(s8f, s8f_answers, tmp_path):
    submission = tmp_path / "planted.json"
    submission.write_bytes(dumps(planted_submission(s8f_answers)))
    env = f"import os; os.environ['MICROCTX_LEDGER'] = {str(tmp_path / 'l.sqlite')!r}\nfrom microctx import cli\n"
    argv = _slices_argv(s8f, submission, tmp_path / "s.csv", "--n-boot", "300")
    loaded = _imports_after(env + f"assert cli.main({argv!r}) == 0")
    assert "numpy" in loaded and "microctx.grading.table" in loaded
    assert not {"pandas", "scipy.special", "pyarrow"} & loaded  # scipy's ufuncs alone (grading.special)
    assert "numpy.ma" not in loaded  # np.unique's masked-array check imports it (12 ms): `stats.distinct`
    assert "microctx.corpus.public" not in loaded  # a bound corpus is read for its record table alone (5-8 ms)
    grade_argv = ["grade", "--answers", str(s8f.answers), "--submission", str(submission), "--output", str(tmp_path / "g.json")]
    loaded = _imports_after(env + f"cli.main({grade_argv!r})")
    assert not {"numpy", "microctx.semantic.grade", "microctx.candidates.registry"} & loaded


def test_the_weak_test_runs_without_scipy_stats(s8f):
    """Judging slices (here every record its own component: 38 judged) needs two tails of
    scipy.stats (`grading.discrete`), not its 0.6 s import."""
    code = (
        "import numpy as np\nfrom microctx.contract.schemas import load_answers\n"
        "from microctx.contract.score import grade\nfrom microctx.corpus.public import load_corpus\n"
        "from microctx.grading.counts import prepare_rows\nfrom microctx.grading.examples import planted_submission\n"
        "from microctx.grading.records import RecordColumns, record_columns\nfrom microctx.grading.table import slice_columns\n"
        f"answers = load_answers({str(s8f.answers)!r})\nrecords = record_columns(load_corpus({str(s8f.public)!r}))\n"
        "one = {name: records[name] for name in records.columns}\none['component'] = records['number']\n"
        "records = RecordColumns(one)\nrows = grade(answers, planted_submission(answers)).facts\n"
        "table = slice_columns(prepare_rows(rows, records, 'facts'), records, n_boot=300)\n"
        "assert (~np.isnan(table['p_value'])).sum() > 10"
    )
    assert "scipy.stats" not in _imports_after(code)


def test_special_gives_scipys_own_functions():
    code = (
        "import sys\nfrom microctx.grading.special import betaincinv, stdtr, stdtrit\n"
        "assert 'scipy.special' not in sys.modules\n"
        "values = (betaincinv(2.5, 3.0, 0.025), stdtr(3.0, -1.2), stdtrit(4.0, 0.9))\n"
        "import scipy.special as s\n"
        "assert s.betaincinv is betaincinv and s.stdtr is stdtr and s.stdtrit is stdtrit\n"
        "assert values == (s.betaincinv(2.5, 3.0, 0.025), s.stdtr(3.0, -1.2), s.stdtrit(4.0, 0.9))\n"
        "import scipy.stats\nprint(repr(float(scipy.stats.t.ppf(0.9, 4))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1.533206274058944"


def test_special_never_shows_a_stand_in_while_other_threads_run():
    """With other threads alive (a kernel's, a Dask worker's) the package is imported as usual: a
    thread importing a submodule (`scipy.special._basic`) while the stand-in sat in sys.modules
    found it as the parent and failed on a half-made module (the reviewer's race). A finder
    records every scipy.special module asked for while the package is a stand-in: none is."""
    code = (
        "import sys, threading\n"
        "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
        "seen = []\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        package = sys.modules.get('scipy.special')\n"
        "        if name.startswith('scipy.special.') and package is not None and package.__spec__.loader is None:\n"
        "            seen.append(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Watch())\n"
        "from microctx.grading.special import betaincinv\n"
        "import scipy.special as s\n"
        "assert s.betaincinv is betaincinv and hasattr(s, 'gamma')\n"
        "print(seen)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"  # no module was ever loaded under a stand-in


def test_the_bound_corpus_types_take_the_contracts_splits_and_states():
    """The bound fast path (`records._Bound`) types `split` and `state` as literals: they must be
    the contract's own values (a split or state added there and not here would send every bound
    corpus to the slow path, or one dropped there would still be accepted here)."""
    from typing import get_args, get_type_hints

    from microctx.contract.schemas import STATES
    from microctx.contract.split import SPLITS
    from microctx.grading import records

    hints = get_type_hints(records._Bound)
    assert get_args(hints["split"]) == SPLITS and get_args(hints["state"]) == STATES
