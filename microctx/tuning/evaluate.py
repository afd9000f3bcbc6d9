"""Evaluate a frozen configuration: run it once on the public corpus and grade it on test.

`microctx evaluate DIR/selected.json --public P --answers A --out DIR2` is the one look at the
held-out answers that a sweep's protocol allows: the configuration was chosen on tune (see
`microctx.tuning.sweep`), and this run uses exactly it, the candidate seeing the same devkit
it saw in the sweep (`DIR/candidate-devkit.json`, checked against its digest). The grade is
recorded in the held-out ledger before it is written.

The candidate runs first, in the sandbox, and the answers are opened only afterwards, in a
separate step: nothing of the answers is read while the candidate runs, and a sandboxed candidate
sees neither this process nor its command line (its own pid namespace, no host `/proc`). A
configuration whose `[sandbox]` says `isolation = "process"` would run the candidate as a child
of this process, whose command line names the answer bundle: it is refused unless the caller
passes `allow_process=True` (`--allow-process-isolation`), and then the manifest
(`isolation_allowed_by`) and `evaluation.json` (`isolation`, `isolation_warning`) say so.

DIR2 gets `submission.json`, `submission.run.json`, `grade.json`, `grade.facts.csv` and
`evaluation.json` (the selection's digest, the ledger entry and counts), published as one set (the
runner stages its two files in it: after a kill all five are old or all new; an error before the
end publishes none). A failed run writes the manifest and `evaluation.json` only, and nothing is
graded: the same set removes an earlier evaluation's submission (when it provably is one, see
`runner.remove_stale_submission`), grade and fact table, so the folder holds the whole earlier
evaluation or the whole failed one, even after a kill.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from microctx.candidates.sandbox import SandboxSettings
from microctx.contract.canonical import dumps
from microctx.contract.digests import file_sha256
from microctx.contract.schemas import EVALUATION_SCHEMA
from microctx.errors import InputError

if TYPE_CHECKING:
    from microctx._io.atomic import AtomicOutputs

__all__ = ["EVALUATION_SCHEMA", "MARKER", "evaluate_selected", "load_selected", "selected_project", "selected_sandbox"]
MARKER = "evaluation.json"


def load_selected(path: str | os.PathLike) -> dict:
    from microctx._io.jsonio import read_json
    from microctx.tuning.sweep import SELECTED_SCHEMA

    document = read_json(path)
    if not isinstance(document, dict) or document.get("schema") != SELECTED_SCHEMA:
        raise InputError(path, f"not a sweep's selected.json (schema {SELECTED_SCHEMA})", field="schema")
    if not document.get("ok") or document.get("parameters") is None:
        raise InputError(path, f"the sweep selected no configuration: {document.get('reason', '')}", field="ok")
    for key in ("candidate", "config_key", "corpus_sha256", "candidate_devkit"):
        if key not in document:
            raise InputError(path, "missing", field=key)
    _check_selected_types(path, document)
    from microctx.contract.records import Selected, as_record

    as_record(document, Selected, path)  # and the rest of the record: no unknown field, none of a wrong type
    return document


_SELECTED_TYPES: dict[str, tuple[type | tuple[type, ...], str]] = {  # field: (types, what) of a selected.json a sweep writes
    "parameters": (dict, "an object"),
    "config_key": (str, "a string"),
    "corpus_sha256": (str, "a string"),
    "candidate": (dict, "an object"),
    "candidate.name": (str, "a string"),
    "candidate.entry": (str, "a string"),
    "candidate.kind": (str, "a string"),
    "candidate.timeout": ((int, float, type(None)), "a number or null"),
    "candidate_devkit": (dict, "an object"),
    "candidate_devkit.path": (str, "a string"),
    "candidate_devkit.sha256": (str, "a string"),
}


def _check_selected_types(path, document: dict) -> None:
    """Every field evaluate uses has the type a sweep writes: else one line naming the field."""
    from microctx._io.paths import inside

    for field, (types, what) in _SELECTED_TYPES.items():
        head, _, tail = field.partition(".")
        value = document.get(head) if not tail else document[head].get(tail)
        if (
            (tail and tail == "timeout" and tail not in document[head])
            or isinstance(value, types)
            and not isinstance(value, bool)
        ):
            continue
        raise InputError(path, f"expected {what}, got {type(value).__name__}", field=field)
    inside(Path(path).parent, document["candidate_devkit"]["path"])  # never a devkit outside the sweep folder


def selected_sandbox(path, document: dict) -> tuple[SandboxSettings | None, tuple[str, ...]]:
    """(SandboxSettings or None, pass_env) from selected.json's `sandbox` (what the sweep ran with)."""
    recorded = document.get("sandbox")
    if recorded is None:
        return None, ()
    if not isinstance(recorded, dict):
        raise InputError(path, "expected an object", field="sandbox")
    options = {k: v for k, v in recorded.items() if k != "pass_env"}
    pass_env = recorded.get("pass_env") or []
    if not isinstance(pass_env, list) or not all(isinstance(n, str) for n in pass_env):
        raise InputError(path, "expected a list of names", field="sandbox.pass_env")
    try:
        options["allow_hosts"] = tuple(options.get("allow_hosts") or ())
        if isinstance(options.get("gateway"), dict):
            from microctx.candidates.settings import GatewaySettings

            options["gateway"] = GatewaySettings(**options["gateway"])
        return SandboxSettings(**options), tuple(pass_env)
    except TypeError as exc:
        raise InputError(path, f"not sandbox settings: {exc}", field="sandbox") from None
    except InputError as exc:
        raise InputError(path, exc.message, field="sandbox") from None


PROCESS_WARNING = (
    "process isolation, allowed by --allow-process-isolation: the candidate ran as a child of the evaluating "
    "process and could read the answers' path from its command line; this look is not protected"
)


def _check_isolation(selected_path: Path, sandbox: SandboxSettings | None, allow_process: bool) -> str | None:
    """The warning to record when the configuration runs without the sandbox; refused unless allowed."""
    if sandbox is None or sandbox.isolation != "process":
        return None
    if not allow_process:
        raise InputError(
            selected_path,
            'isolation = "process" would run the candidate as a child of the process that holds the answers; '
            "evaluate refuses it (pass --allow-process-isolation to accept an unprotected look)",
            field="sandbox.isolation",
        )
    return PROCESS_WARNING


def _check_evaluation_inputs(
    selected_path: Path, selected: dict, public: Path, answers: Path, out: Path
) -> tuple[Path, str | None]:
    """(the candidate's devkit, the corpus SHA-256) once the corpus, answers, devkit and --out are usable."""
    from microctx._io.sets import is_our_output

    corpus_sha256 = file_sha256(public) if public.is_file() else None
    if corpus_sha256 != selected["corpus_sha256"]:
        raise InputError(public, f"the configuration was chosen on corpus {selected['corpus_sha256']}, this is {corpus_sha256}")
    if not answers.is_file():
        raise InputError(answers, "not an existing file")
    devkit = selected_path.parent / selected["candidate_devkit"]["path"]
    if not devkit.is_file() or file_sha256(devkit) != selected["candidate_devkit"]["sha256"]:
        raise InputError(devkit, "missing or changed since the sweep (its SHA-256 differs from selected.json's)")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not is_our_output(out / MARKER))):
        raise InputError(out, f"exists and is not an evaluation folder (no {MARKER}); choose another --out or empty it")
    return devkit, corpus_sha256


def selected_project(path, document: dict):
    """The project candidate of selected.json (a `Project`), or None: its candidate.toml read again and
    checked (no answers in its folders), refused when what it is changed since the sweep chose it."""
    from microctx.candidates.project import load_candidate_file, project_digest
    from microctx.contract.records import Selected, SelectedProject, as_record

    recorded = as_record(document, Selected, path).project
    if document["candidate"]["kind"] != "project":
        return None
    if not isinstance(recorded, SelectedProject):
        raise InputError(path, "a project candidate needs its project record", field="project")
    found = load_candidate_file(recorded.file)
    if project_digest(recorded.file, found.project) != recorded.digest:
        raise InputError(
            recorded.file,
            "the project changed since the sweep chose it (its digest differs from selected.json's project.digest); "
            "sweep again to evaluate this code",
        )
    return found.project


def _run_selected(
    selected: dict, public: Path, submission: Path, devkit: Path, timeout, sandbox, pass_env, warning, project, files
) -> dict:
    """Run the frozen configuration once, isolation and network as in the sweep; its manifest. The
    submission and manifest are staged in `files` (evaluate's one set), not published by the run."""
    from microctx.candidates.runner import run_candidate

    cand = selected["candidate"]
    name, cmd = (cand["name"], cand["entry"]) if cand["kind"] in ("command", "project") else (cand["entry"], None)
    return run_candidate(
        name,
        public,
        submission,
        devkit=devkit,
        params=selected["parameters"],
        timeout=timeout if timeout is not None else cand.get("timeout"),
        cmd=cmd,
        sandbox=sandbox,
        pass_env=pass_env,
        note={"isolation_allowed_by": "--allow-process-isolation"} if warning else None,
        project=project,
        into=files,
    )  # the answers are not opened before it ends


def _grade_and_record(
    outcome: dict,
    manifest: dict,
    answers: Path,
    submission: Path,
    out: Path,
    corpus_sha256: str | None,
    candidate: str,
    files: AtomicOutputs,
) -> None:
    """The separate step, after the candidate is gone: open the answers, grade, record the look (into
    `outcome`); the grade and its fact table are staged in `files` (published with evaluation.json)."""
    from microctx.contract.facts import write_grade
    from microctx.contract.schemas import read_answers, read_submission
    from microctx.contract.score import grade
    from microctx.grading.ledger import looks_line, record_look

    gold, answers_sha256 = read_answers(answers)  # the ledger records the digests of the bytes graded
    if gold["corpus_sha256"] != corpus_sha256:
        raise InputError(
            answers, f"the answers are bound to corpus {gold['corpus_sha256']}, not {corpus_sha256}", field="corpus_sha256"
        )
    given, submission_sha256 = read_submission(files.staged_path(submission))  # staged, not yet published
    result = grade(gold, given)
    look = record_look(
        answers_sha256=answers_sha256,
        submission_sha256=submission_sha256,
        candidate=candidate,
        config_digest=outcome["config_digest"],
        via="evaluate",
        grade=result.grade,
    )
    write_grade(result, out / "grade.json", into=files)
    outcome.update(grade=result.grade, ledger=look, summary=result.summary(), look_line=looks_line(look))


def evaluate_selected(selected_path, public, answers, out, *, timeout: float | None = None, allow_process: bool = False) -> dict:
    """Run the frozen configuration once, then (only then) open the answers, grade it on test and
    record the look; returns the outcome."""
    from microctx._io.atomic import AtomicOutputs
    from microctx.candidates.runner import manifest_path
    from microctx.grading.ledger import config_digest

    selected_path = Path(selected_path)
    selected = load_selected(selected_path)
    sandbox, pass_env = selected_sandbox(selected_path, selected)
    warning = _check_isolation(selected_path, sandbox, allow_process)
    project = selected_project(selected_path, selected)
    public, answers, out = Path(public), Path(answers), Path(out)
    devkit, corpus_sha256 = _check_evaluation_inputs(selected_path, selected, public, answers, out)
    out.mkdir(parents=True, exist_ok=True)

    cand = selected["candidate"]
    submission = out / "submission.json"
    with AtomicOutputs() as files:  # submission, manifest, grade, fact table, evaluation.json: one set, old or new under a kill
        manifest = _run_selected(selected, public, submission, devkit, timeout, sandbox, pass_env, warning, project, files)
        outcome: dict = {
            "schema": EVALUATION_SCHEMA,
            "selected": str(selected_path),
            "selected_sha256": file_sha256(selected_path),
            "config_key": selected["config_key"],
            "config_digest": config_digest(manifest),  # the one configuration digest: grade, reports and the ledger use it too
            "parameters": selected["parameters"],
            "candidate_version": cand.get("version"),
            "run_version": manifest.get("version"),
            "run_ok": manifest["ok"],
            "error": manifest["error"],
            "manifest": str(manifest_path(submission)),
            "grade": None,
            "ledger": None,
            "isolation": manifest["isolation"],
            "isolation_warning": warning,
        }
        if manifest["ok"]:
            _grade_and_record(outcome, manifest, answers, submission, out, corpus_sha256, cand["name"], files)
        else:  # no grade: an earlier evaluation's must not stand beside this one
            from microctx.contract.facts import facts_path

            files.remove(out / "grade.json")
            files.remove(facts_path(out / "grade.json"))
        files.write(out / MARKER, dumps({k: v for k, v in outcome.items() if k not in ("summary", "look_line")}))
    return outcome
