"""Output sets under a real kill between two steps (issue 23): renames, and the removals a set makes.

Each command runs in a child process that SIGKILLs itself just before its Nth step, a rename or
the removal of an earlier output (MICROCTX_KILL_AT_RENAME=N, see microctx._io.renames; one case
uses strace's own injection), for every N until the command runs to the end. After each kill, a microctx reader (which finishes a
committed set first, microctx._io.sets.settle) must see exactly the old set or exactly the new
one, and the next command must leave no litter (`.mcx-*` temporaries, backups, journals, staging).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from microctx._io import sets
from microctx._io.renames import KILL_ENV

ROOT = Path(__file__).resolve().parents[1]
RAW = ROOT / "tests" / "data" / "synthetic-raw.json"
TRIO = ("public.json", "answers.json", "report.json")


def cli(*argv, kill_at: int | str | None = None, prefix: tuple = ()) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(KILL_ENV, None)
    if kill_at is not None:
        env[KILL_ENV] = str(kill_at)
    command = [*prefix, sys.executable, "-m", "microctx", *map(str, argv)]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def contents(folder: Path, names) -> dict[str, bytes]:
    for name in names:
        sets.settle(folder / name)  # what every microctx reader does before reading
    return {name: (folder / name).read_bytes() for name in names if (folder / name).exists()}


def litter(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".mcx-*"))


def freeze(folder: Path, source: str, **kw) -> subprocess.CompletedProcess:
    paths = [a for name in TRIO for a in (f"--{name[:-5]}", folder / name)]
    return cli("freeze", RAW, *paths, "--source", source, **kw)


def by_bytes(old: dict, new: dict):
    return lambda got: "old" if got == old else "new" if got == new else None


def kill_every_step(run, folder: Path, old: dict, new: dict, names, limit: int = 40, classify=None) -> int:
    """Run `run(kill_at=N)` on a fresh copy of the old set for N = 1, 2, ... until it finishes;
    after each kill the set read back is old or new, whole (`classify`, by default byte for byte);
    returns the number of kills."""
    classify = classify or by_bytes(old, new)
    template = folder.parent / (folder.name + "-old")
    shutil.copytree(folder, template)
    seen = set()
    for n in range(1, limit):
        shutil.rmtree(folder)
        shutil.copytree(template, folder)
        done = run(kill_at=n)
        if done.returncode in (0, 1):  # finished (grade: 1 is a grade below the quality bar)
            assert classify(contents(folder, names)) == "new"
            assert seen == {"old", "new"}, seen  # killed before the commit: old; after it: new
            return n - 1
        assert done.returncode == -signal.SIGKILL, done.stderr
        kind = classify(contents(folder, names))
        assert kind is not None, f"kill before step {n}: a mixed set"
        seen.add(kind)
    raise AssertionError("the command never finished")


def test_freeze_trio_is_old_or_new_after_a_kill_at_any_rename(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    expected = tmp_path / "expected"
    expected.mkdir()
    assert freeze(expected, "new").returncode == 0
    new = contents(expected, TRIO)
    assert freeze(folder, "old").returncode == 0
    old = contents(folder, TRIO)
    assert old != new
    kills = kill_every_step(lambda kill_at: freeze(folder, "new", kill_at=kill_at), folder, old, new, TRIO)
    assert kills == 4  # three files and the journal
    # a killed freeze leaves litter; the next command into the folder removes it
    shutil.rmtree(folder)
    shutil.copytree(tmp_path / "out-old", folder)
    assert freeze(folder, "new", kill_at=3).returncode == -signal.SIGKILL
    assert litter(folder) and (folder / sets.JOURNAL).exists()
    assert freeze(folder, "third").returncode == 0
    assert litter(folder) == []


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_freeze_killed_by_strace_between_renames(tmp_path):
    """The issue's own injection: strace SIGKILLs the process at its 2nd rename (the first file is
    in place, the journal already committed the set): a reader sees the whole new set."""
    folder = tmp_path / "out"
    folder.mkdir()
    assert freeze(folder, "old").returncode == 0
    expected = tmp_path / "expected"
    expected.mkdir()
    assert freeze(expected, "new").returncode == 0
    strace = ("strace", "-f", "-qq", "-o", os.devnull, "-e", "inject=rename:signal=SIGKILL:when=2")
    done = freeze(folder, "new", prefix=strace)
    assert done.returncode != 0
    assert contents(folder, TRIO) == contents(expected, TRIO)


def perfect_and_spoiled(tmp_path: Path) -> Path:
    """Two submissions of the synthetic test answers in `tmp_path`: `perfect.json` and
    `spoiled.json` (every label dropped); returns the answer bundle."""
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers

    answers = ROOT / "tests" / "data" / "synthetic-answers.json"
    document = load_answers(answers)
    perfect = {
        "schema": "fak-microcontext-submission/1",
        "corpus_sha256": document["corpus_sha256"],
        "answers": [a for a in document["answers"] if a["split"] == "test"],
    }
    spoiled = {**perfect, "answers": [{**a, "labels": []} for a in perfect["answers"]]}
    (tmp_path / "perfect.json").write_bytes(dumps(perfect))
    (tmp_path / "spoiled.json").write_bytes(dumps(spoiled))
    return answers


def test_grade_and_fact_table_are_old_or_new_after_a_kill(tmp_path):
    answers = perfect_and_spoiled(tmp_path)
    folder = tmp_path / "g"
    folder.mkdir()
    names = ("grade.json", "grade.facts.csv")

    def grade(submission: str, out: Path, kill_at=None):
        return cli(
            "grade", "--answers", answers, "--submission", tmp_path / submission, "--output", out / "grade.json", kill_at=kill_at
        )

    expected = tmp_path / "expected"
    expected.mkdir()
    grade("spoiled.json", expected)
    new = contents(expected, names)
    grade("perfect.json", folder)
    old = contents(folder, names)
    assert len(new) == len(old) == 2 and old != new
    kills = kill_every_step(lambda kill_at: grade("spoiled.json", folder, kill_at), folder, old, new, names)
    assert kills >= 3  # two files and the journal (the ledger may rename too)


SWAP = """
import sys
from pathlib import Path
from microctx._io.atomic import staged_folder
with staged_folder(Path(sys.argv[1]), "report.json") as staging:
    for name in ("a.txt", "b.txt"):
        (staging / name).write_text(sys.argv[2])
    (staging / "report.json").write_text('{"schema": "microctx-report/1", "tag": "%s"}' % sys.argv[2])
"""


def test_a_report_folder_is_old_or_new_after_a_kill_and_the_staging_is_cleaned(tmp_path):
    """The swap every report and the demo use (reports.staged_folder): one exchange of two folders."""
    out = tmp_path / "rep"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", SWAP, out, "old"], env=env, check=True)
    done = subprocess.run([sys.executable, "-c", SWAP, out, "new"], env={**env, KILL_ENV: "1"})
    assert done.returncode == -signal.SIGKILL
    assert (out / "a.txt").read_text() == (out / "b.txt").read_text() == "old"
    assert litter(tmp_path)  # the staging folder of the killed run
    subprocess.run([sys.executable, "-c", SWAP, out, "third"], env=env, check=True)
    assert (out / "a.txt").read_text() == "third" and litter(tmp_path) == []


@pytest.mark.slow
def test_report_corpus_killed_at_its_swap_keeps_the_old_report(tmp_path):
    public = ROOT / "tests" / "data" / "synthetic-public.json"
    out = tmp_path / "rep"
    assert cli("report", "corpus", "--public", public, "--out", out).returncode == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    done = cli("report", "corpus", "--public", public, "--out", out, kill_at="exchange")
    assert done.returncode == -signal.SIGKILL
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert litter(tmp_path)  # the finished staging folder of the killed report
    assert cli("report", "corpus", "--public", public, "--out", out).returncode == 0
    assert litter(tmp_path) == []


PLANTED = ROOT / "tests" / "candidates" / "planted_sweep.py"


@pytest.mark.slow
def test_sweep_outputs_are_old_or_new_after_a_kill(tmp_path, s8f):
    from microctx.candidates.devkit import make_devkit
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.corpus.public import load_corpus

    devkit = tmp_path / "devkit.json"
    devkit.write_bytes(dumps(make_devkit(load_answers(s8f.answers), corpus=load_corpus(s8f.public))))

    def sweep(grid: str, out: Path, kill_at=None):
        spec = tmp_path / "s.toml"
        spec.write_text(
            f'[candidate]\nname = "planted"\nfunction = "{PLANTED}:run"\n[grid]\n{grid}\n[select]\nmetric = "f1"\nrule = "max"\n'
        )
        return cli("sweep", spec, "--public", s8f.public, "--devkit", devkit, "--out", out, "--workers", "1", kill_at=kill_at)

    names = ("sweep.csv", "selected.json")
    folder, expected = tmp_path / "sw", tmp_path / "expected"
    assert sweep("miss = [6]", folder).returncode == 0
    old = contents(folder, names)
    shutil.copytree(folder, expected)
    assert sweep("miss = [6, 0]", expected).returncode == 0
    new = contents(expected, names)

    def classify(got: dict) -> str | None:
        """Old byte for byte, or new: two rows, the selected row's key the one selected.json names
        (timings differ from run to run, so the new set is recognised by its consistency)."""
        if got == old:
            return "old"
        rows = list(csv.DictReader(io.StringIO(got["sweep.csv"].decode())))
        selected = json.loads(got["selected.json"])
        chosen = [r["key"] for r in rows if r["selected"] == "True"]
        consistent = len(rows) == 2 == selected["sweep"]["configurations"] and chosen == [selected["config_key"]]
        return "new" if consistent else None

    assert classify(old) == "old" and classify(new) == "new"
    kill_every_step(lambda kill_at: sweep("miss = [6, 0]", folder, kill_at), folder, old, new, names, classify=classify)


INNER_SET = """
import sys
from pathlib import Path
from microctx._io.atomic import AtomicOutputs
with AtomicOutputs() as out:  # what a report's kernel does: grade.json and its fact table
    out.write(Path(sys.argv[1]) / "grade.json", b"{}")
    out.write(Path(sys.argv[1]) / "grade.facts.csv", b"h\\n")
"""


def test_a_set_published_inside_a_staging_folder_by_another_process_does_not_wait(tmp_path):
    """The staging folder's "still being built" lock is not the folder lock a publisher takes."""
    from microctx._io.atomic import staged_folder

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with staged_folder(tmp_path / "rep", "report.json") as staging:
        subprocess.run([sys.executable, "-c", INNER_SET, staging], env=env, check=True, timeout=60)
        (staging / "report.json").write_text('{"schema": "microctx-report/1"}')
    assert sorted(p.name for p in (tmp_path / "rep").iterdir()) == ["grade.facts.csv", "grade.json", "report.json"]
    assert litter(tmp_path) == []


EVALUATION = ("evaluation.json", "grade.json", "grade.facts.csv", "submission.json", "submission.run.json")


def _sweeps_to_evaluate(tmp_path: Path, s8f, misses):
    """A one-configuration sweep of the planted candidate per `miss` (folder `sw<miss>`); returns
    `evaluate(miss, out, kill_at=None)`, which evaluates the selection of `sw<miss>`."""
    from microctx.candidates.devkit import make_devkit
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.corpus.public import load_corpus

    devkit = tmp_path / "devkit.json"
    devkit.write_bytes(dumps(make_devkit(load_answers(s8f.answers), corpus=load_corpus(s8f.public))))
    for miss in misses:
        spec = tmp_path / f"s{miss}.toml"
        spec.write_text(
            f'[candidate]\nname = "planted"\nfunction = "{PLANTED}:run"\n[grid]\nmiss = [{miss}]\n'
            '[select]\nmetric = "f1"\nrule = "max"\n'
        )
        done = cli("sweep", spec, "--public", s8f.public, "--devkit", devkit, "--out", tmp_path / f"sw{miss}", "--workers", "1")
        assert done.returncode == 0, done.stderr

    def evaluate(miss, out: Path, kill_at=None):
        selected = tmp_path / f"sw{miss}" / "selected.json"
        return cli("evaluate", selected, "--public", s8f.public, "--answers", s8f.answers, "--out", out, kill_at=kill_at)

    return evaluate


def test_evaluate_grade_and_evaluation_are_old_or_new_after_a_kill(tmp_path, s8f):
    """evaluation.json names the grade beside it (grade.json and its fact table) and the run it
    graded (submission.json and its manifest): one set of five. They were published apart, so a
    re-evaluation killed between them left the new grade.json, or the new run, under the old
    evaluation.json (another configuration, another exact count)."""
    evaluate = _sweeps_to_evaluate(tmp_path, s8f, (6, 0))
    folder, expected = tmp_path / "ev", tmp_path / "expected"
    names = EVALUATION
    assert evaluate(6, folder).returncode in (0, 1)
    old = contents(folder, names)
    shutil.copytree(folder, expected)
    assert evaluate(0, expected).returncode in (0, 1)
    new = contents(expected, names)
    assert len(old) == len(new) == len(names)
    assert old["grade.json"] != new["grade.json"] and old["submission.json"] != new["submission.json"]

    def classify(got: dict) -> str | None:
        """Old byte for byte, or new: the new submission, grade and fact table under a manifest and
        an evaluation.json of the new configuration (their look and times differ from run to run)
        naming that submission and that grade."""
        if got == old:
            return "old"
        if set(got) != set(names):
            return None
        evaluation, manifest = json.loads(got["evaluation.json"]), json.loads(got["submission.run.json"])
        same = all(got[name] == new[name] for name in names[1:4])
        agree = evaluation["grade"] == json.loads(got["grade.json"]) and evaluation["parameters"] == {"miss": 0}
        run = (
            manifest["parameters"] == {"miss": 0}
            and manifest["submission_sha256"] == hashlib.sha256(got["submission.json"]).hexdigest()
        )
        return "new" if same and agree and run else None

    assert classify(new) == "new"
    kills = kill_every_step(lambda kill_at: evaluate(0, folder, kill_at), folder, old, new, names, classify=classify)
    assert kills >= 6  # five files and the journal, one set (the ledger may rename too)
    # an error after the run (answers of another corpus, found when they are opened) publishes none of the five
    wrong = ROOT / "tests" / "data" / "synthetic-answers.json"
    selected = tmp_path / "sw0" / "selected.json"
    done = cli("evaluate", selected, "--public", s8f.public, "--answers", wrong, "--out", tmp_path / "err")
    assert done.returncode == 2 and "bound to corpus" in done.stderr, done.stderr
    assert sorted(p.name for p in (tmp_path / "err").iterdir()) == []


def _failed(got: dict, error: str) -> bool:
    """The failed run's manifest alone (its submission gone), saying why and that it removed the
    earlier submission."""
    manifest = json.loads(got["submission.run.json"])
    return manifest["ok"] is False and error in manifest["error"] and "removed the earlier submission.json" in manifest["error"]


def test_a_failed_run_over_an_earlier_submission_is_old_or_new_after_a_kill(tmp_path):
    """`microctx run` failing over an earlier submission of the same candidate removes it (it must
    not pass for this run's result) in the set that publishes the failed run's manifest. It was
    removed before the set was published: a kill in between left the earlier manifest without its
    submission."""
    public = ROOT / "tests" / "data" / "synthetic-public.json"

    def run(out: Path, *params, kill_at=None):
        submission = out / "submission.json"
        return cli("run", f"{PLANTED}:run", "--public", public, "--submission", submission, *params, kill_at=kill_at)

    names = ("submission.json", "submission.run.json")
    folder, expected = tmp_path / "run", tmp_path / "expected"
    folder.mkdir()
    assert run(folder).returncode == 0
    old = contents(folder, names)
    shutil.copytree(folder, expected)
    assert run(expected, "--param", "fail=true").returncode == 1
    new = contents(expected, names)
    assert len(old) == 2 and list(new) == ["submission.run.json"]

    def classify(got: dict) -> str | None:
        if got == old:
            return "old"
        return "new" if list(got) == ["submission.run.json"] and _failed(got, "planted failure") else None

    assert classify(new) == "new"
    kills = kill_every_step(
        lambda kill_at: run(folder, "--param", "fail=true", kill_at=kill_at), folder, old, new, names, classify=classify
    )
    assert kills == 3  # the journal, the manifest, the removal of the submission
    assert litter(folder) == []
    # a reader killed while it finishes the committed set (before its own removal step) leaves the
    # journal, and the next reader finishes the set
    shutil.rmtree(folder)
    shutil.copytree(tmp_path / "run-old", folder)
    assert run(folder, "--param", "fail=true", kill_at=2).returncode == -signal.SIGKILL  # committed, nothing renamed
    settle = f"from microctx._io import sets; sets.settle({str(folder / 'submission.json')!r})"
    env = {**os.environ, "PYTHONPATH": str(ROOT), KILL_ENV: "2"}
    assert subprocess.run([sys.executable, "-c", settle], env=env).returncode == -signal.SIGKILL
    assert (folder / sets.JOURNAL).exists() and (folder / "submission.json").exists()
    assert classify(contents(folder, names)) == "new" and not (folder / sets.JOURNAL).exists()


def test_a_failed_re_evaluation_leaves_the_earlier_evaluation_or_the_failed_one_whole(tmp_path, s8f):
    """A re-evaluation whose run fails publishes the failed run's manifest and evaluation.json, and
    removes in the same set the earlier submission, grade and fact table: after a kill at any step
    the folder holds the earlier evaluation whole, or the failed one whole. The runner removed the
    submission before the set was published, so a kill in between left the earlier evaluation
    without its submission (its manifest's digest matching no file); the earlier grade.json
    stayed beside the failed evaluation.json."""
    evaluate = _sweeps_to_evaluate(tmp_path, s8f, (6,))
    shutil.copytree(tmp_path / "sw6", tmp_path / "swfail")
    selected = json.loads((tmp_path / "swfail" / "selected.json").read_bytes())
    selected["parameters"] = {"miss": 6, "fail": True}  # the configuration crashes at its one look
    (tmp_path / "swfail" / "selected.json").write_text(json.dumps(selected))
    folder, expected = tmp_path / "ev", tmp_path / "expected"
    assert evaluate(6, folder).returncode in (0, 1)
    old = contents(folder, EVALUATION)
    shutil.copytree(folder, expected)
    assert evaluate("fail", expected).returncode == 1
    new = contents(expected, EVALUATION)
    assert len(old) == len(EVALUATION) and sorted(new) == ["evaluation.json", "submission.run.json"]

    def classify(got: dict) -> str | None:
        if got == old:
            return "old"
        if sorted(got) != ["evaluation.json", "submission.run.json"]:
            return None
        evaluation = json.loads(got["evaluation.json"])
        failed = (
            evaluation["run_ok"] is False and evaluation["grade"] is None and evaluation["parameters"] == selected["parameters"]
        )
        return "new" if failed and _failed(got, "planted failure") else None

    assert classify(new) == "new"
    kills = kill_every_step(lambda kill_at: evaluate("fail", folder, kill_at), folder, old, new, EVALUATION, classify=classify)
    assert kills == 6  # the journal, two files, three removals (a failed run is no look: no ledger)
    assert litter(folder) == []


def test_grade_with_the_semantic_layer_is_old_or_new_after_a_kill(tmp_path, s8f):
    """`grade --semantic` wrote `<grade>.semantic.csv` after the grade's set was published, on its
    own: a kill (or a failure) between the two left the new grade beside the old submission's
    semantic table. Now the table is staged into the grade's set: the three are old or new."""
    from semantic_sim import adjudicate, good, simulate, truth_for

    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.semantic.freeze import write_semantic
    from microctx.semantic.items import init_folder

    study = init_folder(ROOT / "studies" / "s8f-conflicts.toml", s8f.public, s8f.answers, tmp_path / "study")
    truth = truth_for(study, 81)
    simulate(study, truth, {"ann": good(0.9), "ben": good(0.9), "cat": good(0.9)}, seed=82)
    adjudicate(study, truth, "simulated")
    semantic = tmp_path / "semantic.json"
    write_semantic(study.path, semantic, n_boot=50)
    document = load_answers(s8f.answers)
    perfect = {k: document[k] for k in ("corpus_sha256", "answers", "aggregates")}
    perfect["schema"] = "fak-microcontext-submission/1"
    spoiled = {**perfect, "answers": [{**a, "scope_contradictions": [], "duplicate_targets": []} for a in perfect["answers"]]}
    (tmp_path / "perfect.json").write_bytes(dumps(perfect))
    (tmp_path / "spoiled.json").write_bytes(dumps(spoiled))
    folder = tmp_path / "g"
    folder.mkdir()
    names = ("grade.json", "grade.facts.csv", "grade.semantic.csv")

    def grade(submission: str, out: Path, kill_at=None):
        argv = ["grade", "--answers", s8f.answers, "--submission", tmp_path / submission, "--output", out / "grade.json"]
        return cli(*argv, "--semantic", semantic, kill_at=kill_at)

    expected = tmp_path / "expected"
    expected.mkdir()
    grade("spoiled.json", expected)
    new = contents(expected, names)
    assert grade("perfect.json", folder).returncode == 0
    old = contents(folder, names)
    assert len(new) == len(old) == 3 and all(old[n] != new[n] for n in names)
    kills = kill_every_step(lambda kill_at: grade("spoiled.json", folder, kill_at), folder, old, new, names)
    assert kills >= 4  # three files and the journal
    # --output naming the --semantic input (its grade would replace semantic.json): refused
    before = semantic.read_bytes()
    argv = ["grade", "--answers", s8f.answers, "--submission", tmp_path / "perfect.json", "--output", semantic]
    done = cli(*argv, "--semantic", semantic)
    assert done.returncode == 2 and "--output is the same file as the input --semantic" in done.stderr, done.stderr
    assert semantic.read_bytes() == before


def test_ctrl_c_between_two_steps_of_a_set_leaves_it_whole(tmp_path):
    """Ctrl-C (SIGINT, a KeyboardInterrupt) between two renames of a committed set: the `finally`
    that tidies up removed the journal and the temporary files not yet renamed, so the folder
    kept a mix (a new grade beside the old fact table) that no reader could finish. Now Ctrl-C is
    held back while the set's steps run: the command ends interrupted (130) with the set new."""
    answers = perfect_and_spoiled(tmp_path)
    names = ("grade.json", "grade.facts.csv")

    def grade(submission: str, out: Path, kill_at=None):
        argv = ["grade", "--answers", answers, "--submission", tmp_path / submission, "--output", out / "grade.json"]
        return cli(*argv, kill_at=kill_at)

    expected = tmp_path / "expected"
    expected.mkdir()
    grade("spoiled.json", expected)
    new = contents(expected, names)
    folder = tmp_path / "g"
    for step in (2, 3):  # the first rename is the journal's (the commit); 2 and 3 are the set's files
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        grade("perfect.json", folder)
        done = grade("spoiled.json", folder, kill_at=f"{step}:INT")
        assert done.returncode == 130 and "interrupted" in done.stderr, (done.returncode, done.stderr)
        assert (folder / sets.JOURNAL).exists() is False
        assert {n: (folder / n).read_bytes() for n in names} == new, f"Ctrl-C before step {step}: a mixed set"
        assert litter(folder) == []


ROLL_BACK = """
import errno, os, signal, sys
from pathlib import Path
from microctx._io import atomic
from microctx.errors import InputError

folder, kill_at = Path(sys.argv[1]), int(sys.argv[2])
count = 0
real_replace, real_unlink = os.replace, os.unlink


def step():  # every rename and unlink the process makes, counted at the os level (as strace would)
    global count
    count += 1
    if count == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)


def replace(src, dst, *args, **kw):
    step()
    if Path(dst).name == "c" and Path(src).name.endswith(".tmp"):
        raise OSError(errno.EIO, "planted")
    return real_replace(src, dst, *args, **kw)


def unlink(path, *args, **kw):
    step()
    return real_unlink(path, *args, **kw)


os.replace, os.unlink = replace, unlink
try:
    with atomic.AtomicOutputs() as out:
        for name in ("a", "d", "b", "c"):  # d is new; writing c fails once a, d and b are in place
            out.write(folder / name, b"new " + name.encode())
        out.remove(folder / "e")
except InputError:
    sys.exit(2)
"""


def test_a_kill_while_a_failed_set_is_put_back_leaves_the_old_set_or_the_new_one(tmp_path):
    """A planted fault: the set replaces a and b, makes d, removes e, and writing c fails after a,
    d and b are in place, so the set is put back. A kill at any rename or unlink of that roll-back
    (counted at the os level) must leave the old set or the new one whole. The roll-back used to
    restore the files one by one under the committed journal: killed half-way, the next reader
    rolled the new set forward over a half-restored old one (b old, a, c and d new)."""
    folder = tmp_path / "set"
    folder.mkdir()
    for name in ("a", "b", "c", "e"):
        (folder / name).write_bytes(b"old " + name.encode())
    names = ("a", "b", "c", "d", "e")
    old = contents(folder, names)
    new = {n: b"new " + n.encode() for n in ("a", "b", "c", "d")}
    template = tmp_path / "template"
    shutil.copytree(folder, template)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen = []
    for n in range(1, 40):
        shutil.rmtree(folder)
        shutil.copytree(template, folder)
        done = subprocess.run([sys.executable, "-c", ROLL_BACK, str(folder), str(n)], env=env, capture_output=True, timeout=60)
        got = contents(folder, names)
        assert got in (old, new), f"killed at step {n}: a mixed set {got}"
        seen.append("old" if got == old else "new")
        if done.returncode == 2:  # ran to the end: the fault, then the whole roll-back
            assert got == old and litter(folder) == []
            break
        assert done.returncode == -signal.SIGKILL, done.stderr
    else:
        raise AssertionError("the set never finished")
    # killed before the journal: old; after it, before the roll-back's own journal: new; then old
    assert seen[0] == "old" and "new" in seen and seen[-3:] == ["old"] * 3, seen


def test_the_clean_up_spares_a_committed_set_whose_other_folder_is_not_held(tmp_path):
    """A set over two folders, killed after its journal was committed: a clean-up of one folder
    alone (a report's staging clean-up takes that folder's lock only) used to remove that folder's
    temporary file as a dead command's litter, and the next reader finished the set with it
    missing: a mixed set."""
    one, two = tmp_path / "one", tmp_path / "two"
    for folder in (one, two):
        folder.mkdir()
        (folder / "out").write_bytes(b"old")
    script = (
        "import sys; from pathlib import Path; from microctx._io import atomic\n"
        "with atomic.AtomicOutputs() as out:\n"
        "    for f in sys.argv[1:]: out.write(Path(f) / 'out', b'new')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), KILL_ENV: "3"}  # two journals, then killed at the first file
    done = subprocess.run([sys.executable, "-c", script, str(one), str(two)], env=env, capture_output=True)
    assert done.returncode == -signal.SIGKILL and litter(one) and litter(two)
    from microctx._io.paths import locked_folders

    with locked_folders([one]):
        sets.tidy(one)
    assert contents(one, ["out"]) == {"out": b"new"} and contents(two, ["out"]) == {"out": b"new"}
    assert not [name for name in litter(one) + litter(two) if name.endswith((".tmp", ".json"))]  # backups: the next publish's


ROLL_BACK_TWO = ROLL_BACK.replace(
    "folder, kill_at = Path(sys.argv[1]), int(sys.argv[2])",
    "one, two, kill_at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])",
).replace(
    """        for name in ("a", "d", "b", "c"):  # d is new; writing c fails once a, d and b are in place
            out.write(folder / name, b"new " + name.encode())
        out.remove(folder / "e")""",
    """        for folder, name in ((one, "a"), (two, "b"), (two, "c")):  # writing c fails once a and b are in place
            out.write(folder / name, b"new " + name.encode())""",
)


def test_a_kill_between_two_folders_journals_of_a_roll_back_leaves_the_old_set(tmp_path):
    """The roll-back of a set over two folders rewrites each folder's journal in turn. Killed
    between the two, one folder's journal said "put back" and the other's still "new": each copy
    differed from the other, so every reader ignored both and the set stayed mixed for good
    (a and b new, c old). A roll-back's journal names the journal it undoes; readers go by it."""
    assert "one, two, kill_at" in ROLL_BACK_TWO and '(one, "a")' in ROLL_BACK_TWO
    one, two = tmp_path / "one", tmp_path / "two"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen = []
    for n in range(1, 40):
        for folder in (one, two):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
        for folder, name in ((one, "a"), (two, "b"), (two, "c")):
            (folder / name).write_bytes(b"old " + name.encode())
        args = [sys.executable, "-c", ROLL_BACK_TWO, str(one), str(two), str(n)]
        done = subprocess.run(args, env=env, capture_output=True, timeout=60)
        got = {**contents(two, ["b", "c"]), **contents(one, ["a"])}
        assert got in ({k: b"old " + k.encode() for k in "abc"}, {k: b"new " + k.encode() for k in "abc"}), (n, got)
        seen.append(got["a"][:3].decode())
        if done.returncode == 2:
            break
        assert done.returncode == -signal.SIGKILL, done.stderr
    else:
        raise AssertionError("the set never finished")
    assert "new" in seen and seen[-1] == "old", seen
