"""Evaluate a frozen configuration: run it once on the public corpus and grade it on test.

`microctx evaluate DIR/selected.json --public P --answers A --out DIR2` is the one look at the
held-out answers that a sweep's protocol allows: the configuration was chosen on tune (see
`microctx.tuning.sweep`), and this run uses exactly it, the candidate seeing the same devkit
it saw in the sweep (`DIR/candidate-devkit.json`, checked against its digest). The grade is
recorded in the held-out ledger before it is written.

DIR2 gets `submission.json`, `submission.run.json`, `grade.json`, `grade.facts.csv` and
`evaluation.json` (the selection's digest, the ledger entry and counts). A failed run writes the
manifest and `evaluation.json` only, and nothing is graded.
"""

from __future__ import annotations

import os
from pathlib import Path

from microctx.candidates.sandbox import SandboxSettings
from microctx.contract.canonical import dumps
from microctx.contract.digests import file_sha256
from microctx.errors import InputError

EVALUATION_SCHEMA = "microctx-evaluation/1"
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
    return document


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
        return SandboxSettings(**options), tuple(pass_env)
    except TypeError as exc:
        raise InputError(path, f"not sandbox settings: {exc}", field="sandbox") from None
    except InputError as exc:
        raise InputError(path, exc.message, field="sandbox") from None


def evaluate_selected(selected_path, public, answers, out, *, timeout: float | None = None) -> dict:
    """Run the frozen configuration once, grade it on test, record the look; returns the outcome."""
    from microctx._io.atomic import atomic_write
    from microctx.candidates.runner import manifest_path, run_candidate
    from microctx.contract.facts import write_grade
    from microctx.contract.schemas import load_answers, load_submission
    from microctx.contract.score import grade
    from microctx.grading.ledger import config_digest, looks_line, record_look

    selected_path = Path(selected_path)
    selected = load_selected(selected_path)
    sandbox, pass_env = selected_sandbox(selected_path, selected)
    public, answers, out = Path(public), Path(answers), Path(out)
    corpus_sha256 = file_sha256(public) if public.is_file() else None
    if corpus_sha256 != selected["corpus_sha256"]:
        raise InputError(public, f"the configuration was chosen on corpus {selected['corpus_sha256']}, this is {corpus_sha256}")
    gold = load_answers(answers)
    if gold["corpus_sha256"] != corpus_sha256:
        raise InputError(
            answers, f"the answers are bound to corpus {gold['corpus_sha256']}, not {corpus_sha256}", field="corpus_sha256"
        )
    devkit = selected_path.parent / selected["candidate_devkit"]["path"]
    if not devkit.is_file() or file_sha256(devkit) != selected["candidate_devkit"]["sha256"]:
        raise InputError(devkit, "missing or changed since the sweep (its SHA-256 differs from selected.json's)")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise InputError(out, f"exists and is not an evaluation folder (no {MARKER}); choose another --out or empty it")
    out.mkdir(parents=True, exist_ok=True)

    cand = selected["candidate"]
    name, cmd = (cand["name"], cand["entry"]) if cand["kind"] == "command" else (cand["entry"], None)
    submission = out / "submission.json"
    manifest = run_candidate(
        name,
        public,
        submission,
        devkit=devkit,
        params=selected["parameters"],
        timeout=timeout if timeout is not None else cand.get("timeout"),
        cmd=cmd,
        sandbox=sandbox,
        pass_env=pass_env,
    )  # isolation and network as in the sweep
    digest = config_digest(manifest)  # the one configuration digest: grade, reports and the ledger use it too
    outcome: dict = {
        "schema": EVALUATION_SCHEMA,
        "selected": str(selected_path),
        "selected_sha256": file_sha256(selected_path),
        "config_key": selected["config_key"],
        "config_digest": digest,
        "parameters": selected["parameters"],
        "candidate_version": cand.get("version"),
        "run_version": manifest.get("version"),
        "run_ok": manifest["ok"],
        "error": manifest["error"],
        "manifest": str(manifest_path(submission)),
        "grade": None,
        "ledger": None,
    }
    if manifest["ok"]:
        result = grade(gold, load_submission(submission))
        look = record_look(
            answers_sha256=file_sha256(answers),
            submission_sha256=manifest["submission_sha256"],
            candidate=cand["name"],
            config_digest=digest,
            via="evaluate",
            grade=result.grade,
        )
        write_grade(result, out / "grade.json")
        outcome.update(grade=result.grade, ledger=look, summary=result.summary(), look_line=looks_line(look))
    atomic_write(out / MARKER, dumps({k: v for k, v in outcome.items() if k not in ("summary", "look_line")}))
    return outcome
