"""Typed records of what microctx writes of its own, and one reader per record.

Each record is a msgspec `Struct` beside its schema id (`microctx.contract.schemas`):

- `RunManifest` (microctx-run/2): `<S without .json>.run.json` beside a candidate's submission;
- `SweepResult` (microctx-sweep-result/1): one configuration of a sweep (`runs/<key>/result.json`);
- `Selected` (microctx-selected/1): a sweep's frozen choice (`selected.json`);
- `Evaluation` (microctx-evaluation/1): `microctx evaluate`'s outcome (`evaluation.json`);
- `ReportManifest` (microctx-report/1): `report.json` of a report folder, with its input digests;
- `LedgerEntry`: one look at the held-out answers (a row of the ledger).

A reader refuses a document of another schema, an unknown field and a field of the wrong type
with one InputError naming the file, the field and what was expected. Fields a hand-written
manifest may leave out default to null (a run manifest without `schema` is read as one of an
earlier runner: the ledger and the reports accept such files). Only the run manifest is read
before a candidate's code is trusted, so it stays importable without the sandbox or the runner.

`Configuration` is what a configuration digest is computed from (candidate, its code version,
its parameters and the isolation it ran in), as a type rather than as dict keys.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any, TypeVar

import msgspec
import msgspec.structs

from microctx.contract.costs import COUNTER_KEYS, MODEL_COUNTER_KEYS, MODEL_COUNTS
from microctx.contract.schemas import (
    EVALUATION_SCHEMA,
    REPORT_MANIFEST_SCHEMA,
    RESULT_SCHEMA,
    RUN_SCHEMAS,
    SELECTED_SCHEMA,
)
from microctx.errors import InputError

Record = TypeVar("Record", bound=msgspec.Struct)

_OPTIONS: dict[str, Any] = {"forbid_unknown_fields": True}


# The counters a candidate reports, one field per name of microctx.contract.costs (a non-negative
# integer, null: not reported; a model counter is absent unless reported).
_Count = Annotated[int, msgspec.Meta(ge=0)] | None
Counters = msgspec.defstruct(
    "Counters",
    [(key, _Count | msgspec.UnsetType, msgspec.UNSET) for key in COUNTER_KEYS + MODEL_COUNTER_KEYS],
    forbid_unknown_fields=True,
    module=__name__,
)


class RunManifest(msgspec.Struct, **_OPTIONS):
    """What one run of a candidate was and cost (written by microctx.candidates.runner)."""

    schema: str | None = None
    candidate: str | None = None
    kind: str | None = None
    entry: str | None = None
    version: str | None = None
    parameters: dict[str, Any] | None = None
    corpus_sha256: str | None = None
    devkit_sha256: str | None = None
    submission: str | None = None
    submission_sha256: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    isolation: str | None = None
    network: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None
    wall_seconds: float | None = None
    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    cost_source: dict[str, str] | None = None
    exit_status: int | None = None
    timed_out: bool | None = None
    timeout_seconds: float | None = None
    processes_refused: int | None = None
    memory_exceeded: bool | None = None
    counters: Counters | None = None  # type: ignore[valid-type]
    counters_problem: str | None = None
    self_reported: list[str] | None = None
    passed_env: list[str] | None = None
    cache_dir: str | None = None
    runner: dict[str, str] | None = None
    ok: bool | None = None
    error: str | None = None
    output_tail: str | None = None
    model_usage_check: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET  # only in record mode with a base_url
    # the runner's own findings, present when they apply (microctx.candidates.runner)
    project: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET  # a candidate project's folders
    isolation_allowed_by: str | msgspec.UnsetType = msgspec.UNSET
    gateway: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET  # the model gateway's counts and dollars
    cache_cleaned: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET

    def counter(self, key: str) -> int | None:
        """A counter the candidate reported (None: not reported, unknown)."""
        value = getattr(self.counters, key, None)
        return None if value is msgspec.UNSET else value

    def as_dict(self) -> dict[str, Any]:
        """The manifest as a JSON object, in the order it is written."""
        document: dict[str, Any] = msgspec.to_builtins(self)
        return document


class Configuration(msgspec.Struct, frozen=True):
    """What defines a configuration: its digest is the one grade, the reports and the ledger use."""

    candidate: str | None
    version: str | None
    parameters: dict[str, Any] | None
    isolation: str | None = None
    network: str | None = None
    allow_hosts: tuple[str, ...] = ()

    @classmethod
    def of(cls, manifest: RunManifest) -> Configuration:
        network = manifest.network or {}
        mode, hosts = network.get("mode"), network.get("allow_hosts") or ()
        return cls(
            manifest.candidate,
            manifest.version,
            manifest.parameters,
            manifest.isolation,
            mode if isinstance(mode, str) else None,
            tuple(str(h) for h in hosts) if isinstance(hosts, list) else (),
        )

    def digest(self) -> str:
        from microctx.contract.canonical import dumps
        from microctx.contract.digests import sha256_hex

        return sha256_hex(dumps(msgspec.to_builtins(self)))


def config_digest(manifest: RunManifest | dict[str, Any] | None) -> str | None:
    """A run manifest's configuration digest (`Configuration.digest`), None without a manifest."""
    if not manifest:
        return None
    record = manifest if isinstance(manifest, RunManifest) else as_record(manifest, RunManifest, "the run manifest")
    return Configuration.of(record).digest()


class CandidateDevkit(msgspec.Struct, **_OPTIONS):
    path: str
    splits: list[str]
    sha256: str


class SelectedProject(msgspec.Struct, **_OPTIONS):
    """A project candidate of a sweep (`[candidate] project = "candidate.toml"`): its file, the digest of
    what it is (microctx.candidates.project.project_digest) and its folders, absolute."""

    file: str
    digest: str
    code: list[str]
    data: list[str]
    venv: str | None
    interpreter: str | None


class Selected(msgspec.Struct, **_OPTIONS):
    """A sweep's frozen choice (selected.json, written by microctx.tuning)."""

    schema: str
    ok: bool
    sweep: dict[str, Any]
    candidate: dict[str, Any]
    sandbox: dict[str, Any] | None
    parameters: dict[str, Any] | None
    config_key: str | None
    config_digest: str | None
    corpus_sha256: str
    devkit_sha256: str
    candidate_devkit: CandidateDevkit
    selection: dict[str, Any]
    tune: dict[str, Any] | None
    reason: str
    project: SelectedProject | msgspec.UnsetType = msgspec.UNSET  # only for a project candidate

    def as_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = msgspec.to_builtins(self)
        return document


class SweepResult(msgspec.Struct, **_OPTIONS):
    """One configuration of a sweep (runs/<key>/result.json, files kept beside it)."""

    schema: str
    key: str
    index: int
    parameters: dict[str, Any]
    status: str
    error: str
    manifest: dict[str, Any] | None
    grade: dict[str, Any] | None
    metrics: dict[str, Any] | None
    task_seconds: float | None = None
    transient: bool | msgspec.UnsetType = msgspec.UNSET


class Evaluation(msgspec.Struct, **_OPTIONS):
    """`microctx evaluate`'s outcome (evaluation.json)."""

    schema: str
    selected: str
    selected_sha256: str
    config_key: str
    config_digest: str | None
    parameters: dict[str, Any]
    candidate_version: str | None
    run_version: str | None
    run_ok: bool
    error: str
    manifest: str
    grade: dict[str, Any] | None
    ledger: dict[str, Any] | None
    isolation: str | None = None
    isolation_warning: str | None = None  # set when a process-isolated look was allowed (not protected)

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


class ReportFile(msgspec.Struct, **_OPTIONS):
    path: str
    bytes: int
    sha256: str


class ReportManifest(msgspec.Struct, **_OPTIONS):
    """report.json of a report folder: what made it (the notebook and its parameters), the SHA-256
    of every input file it read (`inputs`: parameter -> digest, a list for a list of files, a
    name -> digest object for a folder), and every file it holds."""

    schema: str
    kind: str
    notebook: str
    parameters: dict[str, Any]
    inputs: dict[str, Any]
    charts: list[str]
    seconds: float
    files: list[ReportFile]
    statistics: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET

    def as_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = msgspec.to_builtins(self)
        return document


class LedgerEntry(msgspec.Struct, **_OPTIONS):
    """One look at the held-out answers (a row of microctx.grading.ledger; `summary` is the grade's
    summary as a JSON text)."""

    at: str
    answers_sha256: str
    submission_sha256: str | None
    candidate: str | None
    config_digest: str | None
    via: str
    summary: str
    marked: str | None = None  # a look set aside (microctx.grading.ledger.MARKS), not counted

    def as_dict(self) -> dict[str, Any]:
        return msgspec.structs.asdict(self)


_SCHEMAS: dict[type, tuple[str | None, ...]] = {
    RunManifest: (*RUN_SCHEMAS, None),
    Selected: (SELECTED_SCHEMA,),
    SweepResult: (RESULT_SCHEMA,),
    Evaluation: (EVALUATION_SCHEMA,),
    ReportManifest: (REPORT_MANIFEST_SCHEMA,),
}
_AT = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<where>[^`]*)`)?$", re.S)
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<name>[^`]*)`")
_MISSING = re.compile(r"Object missing required field `(?P<name>[^`]*)`")


def _field(where: str) -> str | None:
    text = where.lstrip(".")
    return text or None


def validation_error(path: object, error: msgspec.ValidationError, what: str) -> InputError:
    match = _AT.match(str(error))
    assert match is not None
    message, where = match["what"], _field(match["where"] or "")
    for pattern, said in ((_UNKNOWN, f"unknown field in {what}"), (_MISSING, "missing")):
        found = pattern.match(message)
        if found:
            name = found["name"] if where is None else f"{where}.{found['name']}"
            return InputError(path, said, field=name)
    expected = message.replace("Expected", "expected", 1).replace("`", "")
    return InputError(path, f"{expected} ({what})", field=where)


def as_record(document: object, kind: type[Record], path: object) -> Record:
    """`document` (parsed JSON) as the record `kind`, or an InputError naming `path` and the field."""
    what = f"a {kind.__name__} record"
    if not isinstance(document, dict):
        raise InputError(path, f"expected a JSON object ({what})")
    schemas = _SCHEMAS.get(kind)
    if schemas is not None and document.get("schema") not in schemas:
        known = " or ".join(s for s in schemas if s)
        raise InputError(path, f"expected schema {known}, got {document.get('schema')!r}", field="schema")
    try:
        return msgspec.convert(document, kind, strict=True)
    except msgspec.ValidationError as exc:
        raise validation_error(path, exc, what) from None


def read_record(path: str | os.PathLike[str], kind: type[Record]) -> Record:
    """Read one record file: unreadable JSON, another schema or a wrong field is an InputError."""
    from microctx._io.jsonio import read_json

    return as_record(read_json(path), kind, path)


# --- the run manifest -----------------------------------------------------------------------------


def manifest_path(submission: str | os.PathLike[str]) -> Path:
    """Where the run manifest goes beside a submission: `<S without .json>.run.json`."""
    text = os.fspath(submission)
    return Path((text[:-5] if text.endswith(".json") else text) + ".run.json")


def read_manifest_document(
    submission: str | os.PathLike[str], *, strict: bool = False, sha256: str | None = None
) -> dict[str, Any] | None:
    """The run manifest beside a submission as the JSON object it is, checked as a `RunManifest`
    (for callers that pass manifests on as documents); see `read_manifest`. A manifest whose
    `submission_sha256` differs from the file beside it (a run killed between its two renames),
    or from `sha256` (the digest of the bytes the caller read), is no manifest. Standard input
    (`-`) has none."""
    from microctx._io.jsonio import read_json

    path = manifest_path(submission)
    if os.fspath(submission) == "-" or not path.is_file():
        return None
    try:
        document = read_json(path)
        as_record(document, RunManifest, path)
        assert isinstance(document, dict)  # as_record refuses anything else
        if not _belongs(document, Path(submission), sha256):
            raise InputError(
                path, "does not belong to the submission beside it (its submission_sha256 differs): a run was cut off"
            )
    except InputError:
        if strict:
            raise
        return None
    return document


def _belongs(manifest: dict[str, Any], submission: Path, sha256: str | None) -> bool:
    """False when the manifest names a submission digest and the file beside it (the bytes read:
    `sha256`) has another one."""
    from microctx.contract.digests import file_sha256

    digest = manifest.get("submission_sha256")
    if sha256 is not None and isinstance(digest, str):
        return digest == sha256
    if not isinstance(digest, str) or not submission.is_file():
        return True
    try:
        return file_sha256(submission) == digest
    except (InputError, OSError):
        return False


def read_manifest(submission: str | os.PathLike[str], *, strict: bool = False, sha256: str | None = None) -> RunManifest | None:
    """The run manifest beside a submission (`manifest_path`), or None when there is none.

    An unreadable manifest (not JSON, not an object, another schema, an unknown field or one
    of the wrong type) raises InputError when `strict` (a report that shows its costs), and is
    taken as no manifest otherwise (the ledger: a look is recorded all the same, without the
    run's candidate and configuration)."""
    document = read_manifest_document(submission, strict=strict, sha256=sha256)
    return None if document is None else msgspec.convert(document, RunManifest, strict=True)


def _count(value: object) -> int | float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def model_counts(manifest: RunManifest | dict[str, Any]) -> dict[str, Any]:
    """A run's model calls and tokens, the runner's own count preferred to the candidate's.

    When the runner's proxy counted the calls (`model_usage_check` with `agree` true or false),
    its `model_calls` is used, and its tokens when it read every answered call's usage
    (`tokens_seen`); otherwise the candidate's self-reported counters (None when absent).
    Also `counts_source` ("runner", "runner calls, candidate tokens" or "candidate") and
    `counts_agree` (the check's `agree`: True, False, or None when there was no check or the
    traffic was opaque, HTTPS). With the model gateway (`gateway` in the manifest) its counts
    are used, `counts_source` "gateway", and `dollars` its dollars (else None)."""
    if isinstance(manifest, dict):
        manifest = as_record(manifest, RunManifest, "the run manifest")
    gateway = manifest.gateway
    if isinstance(gateway, dict) and all(_count(gateway.get(k)) is not None for k in MODEL_COUNTS):
        claimed = _count(manifest.counter("model_calls"))
        counts = {key: _count(gateway[key]) for key in MODEL_COUNTS}
        agree = None if claimed is None else claimed == counts["model_calls"]
        return {**counts, "counts_source": "gateway", "counts_agree": agree, "dollars": _count(gateway.get("dollars"))}
    counts = {key: _count(manifest.counter(key)) for key in MODEL_COUNTS}
    found = manifest.model_usage_check
    check: dict[str, Any] = found if isinstance(found, dict) else {}
    agree, runner = check.get("agree"), check.get("runner")
    source = "candidate"
    if isinstance(agree, bool) and isinstance(runner, dict) and _count(runner.get("model_calls")) is not None:
        counts["model_calls"] = _count(runner["model_calls"])
        source = "runner calls, candidate tokens"
        if check.get("tokens_seen") is True and all(_count(runner.get(k)) is not None for k in MODEL_COUNTS[1:]):
            counts.update({key: _count(runner[key]) for key in MODEL_COUNTS[1:]})
            source = "runner"
    return {**counts, "counts_source": source, "counts_agree": agree if isinstance(agree, bool) else None, "dollars": None}
