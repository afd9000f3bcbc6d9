"""Freezing a raw export into the three s8f artifacts: public corpus, answer bundle, report.

`freeze_files` (the command) streams: issues in, one at a time, the three files out, atomically,
holding what the split needs and not the documents (see `freeze_stream`). `freeze` (notebooks)
makes the same bytes and returns the documents in memory; `write_frozen` writes them. Nothing is
returned (or written) unless all six leak checks and the blind oracle pass.
"""

from __future__ import annotations

import html
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from microctx._io.atomic import AtomicOutputs
from microctx._io.jsonio import gc_paused
from microctx._io.jsonscan import IrregularJSON, read_object_streaming
from microctx._io.paths import write_failure
from microctx._version import __version__
from microctx.contract.canonical import dumps, iter_dumps
from microctx.contract.schemas import REPORT_COUNTS, REPORT_SCHEMA
from microctx.contract.split import SPLITS
from microctx.corpus.export import RawIssue, with_export
from microctx.corpus.freeze_stream import FreezePass, Outputs, Tally, Written, file_contains, split_codes, write_documents
from microctx.corpus.freeze_stream import answer_record as answer_record  # the record shapes, still importable from here
from microctx.corpus.freeze_stream import public_record as public_record
from microctx.corpus.freeze_stream import top_ten_ids as top_ten_ids
from microctx.corpus.halves import HalvesFailed, export_filler
from microctx.corpus.redact import Rule
from microctx.display import MAX_ROWS, Markup, Summary, card_html, fields_html, short, short_digest, table_html, verdict_html
from microctx.errors import ContractError

PRESERVED_KEYS = (b'"state"', b'"labels"', b'"closed_at"')
DERIVED_KEYS = (b'"references"', b'"duplicate_targets"', b'"scope_contradictions"', b'"aggregates"')

QUESTION_SLICES = [
    "held-out state and label facts",
    "issue references and explicit duplicate targets",
    "contradiction/conflict cue words (lexical cues, not adjudicated contradiction)",
    "exhaustive state and label counts",
    "newest top-10 by creation",
    "most recently updated top-10",
]


HUB_REFERENCES = 50  # a record referencing more in-corpus issues than this is a hub (named in a warning)


@dataclass
class FreezeResult:
    """What a freeze made, besides the documents themselves: the report, the two digests, and
    `hubs`: (issue number, in-corpus references) of every record referencing more than
    HUB_REFERENCES in-corpus issues, most first (not part of any artifact)."""

    report: dict
    public_sha256: str
    answers_sha256: str
    hubs: list[tuple[int, int]] = field(default_factory=list)

    def hub_warnings(self) -> list[str]:
        """One line per hub record, for the freeze's output."""
        return [
            f"warning: issue #{number} references {count} in-corpus issues (more than {HUB_REFERENCES}): "
            "its references join their components into one split (see --isolate-hubs)"
            for number, count in self.hubs
        ]

    @property
    def ok(self) -> bool:
        """Every leak check and the blind oracle passed (freeze refuses otherwise)."""
        checks = self.report.get("leak_checks") or {}
        return bool(checks) and all(v is True for v in checks.values())

    @property
    def passed(self) -> bool:
        return self.ok

    @property
    def summary(self) -> Summary:
        r = self.report
        checks = r.get("leak_checks") or {}
        return Summary(
            f"{r['records']:,} records (train {r['train_records']:,} / tune {r['tune_records']:,} / "
            f"test {r['test_records']:,}); {sum(v is True for v in checks.values())}/{len(checks)} leak checks pass; "
            f"public {short_digest(self.public_sha256)}, answers {short_digest(self.answers_sha256)}"
        )


@dataclass
class Frozen(FreezeResult):
    """The three documents of a freeze, in memory (all leak checks and the blind oracle passed,
    or there would be no Frozen); `write(public, answers, report)` writes them."""

    public: dict = field(default_factory=dict, kw_only=True)
    answers: dict = field(default_factory=dict, kw_only=True)

    def write(self, public: str | os.PathLike, answers: str | os.PathLike, report: str | os.PathLike) -> None:
        """Write the three files together, atomically (parent folders are created)."""
        for path in (public, answers, report):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        write_frozen(self, public, answers, report)

    def __repr__(self) -> str:
        return f"Frozen({self.summary}, source={short(self.public.get('source', ''), 60)!r})"

    def _repr_html_(self) -> str:
        r = self.report
        counts = [(k.replace("_", " "), f"{r[k]:,}") for k in (*REPORT_COUNTS, "scrubbed_records") if isinstance(r.get(k), int)]
        checks = "".join(
            f"<li>{verdict_html(v is True, 'pass', 'FAIL')} {html.escape(k)}</li>"
            for k, v in sorted((r.get("leak_checks") or {}).items())
        )
        fields = fields_html(
            [
                ("public sha256", Markup(f"<code>{self.public_sha256}</code>")),
                ("answers sha256", Markup(f"<code>{self.answers_sha256}</code>")),
                ("source", short(self.public.get("source", ""))),
            ]
            + counts
            + [("leak checks", Markup(f"<ul style='margin:0'>{checks}</ul>"))]
        )
        records = self.public.get("records", [])
        rows = [(x["id"], x["split"], x["state"], x["title"]) for x in records[:MAX_ROWS]]
        return card_html(
            "Frozen corpus (nothing written yet: .write(public, answers, report))",
            fields,
            table_html(("id", "split", "state", "title"), rows, total=len(records)),
        )


def freeze(issues: Iterable[RawIssue], source: str, rules: Sequence[Rule] = (), isolate_hubs: bool = False) -> Frozen:
    """Scrub, split and derive; run the leak checks and the blind oracle.

    `isolate_hubs` (off by default, so published corpora stay byte-identical): a hub record's
    references stay facts in its answer but do not merge components for the split, so one issue
    listing `#1 ... #199` cannot pull every record into one split.
    Raises ContractError when a leak check or the oracle fails: nothing is to be written then;
    when no test record is left, the error says so and names the record that joined most.
    """
    frozen = build(issues, source, rules, isolate_hubs)
    _enforce(frozen)
    return frozen


def _enforce(frozen: FreezeResult) -> None:
    """ContractError unless a test record is left and every leak check passed."""
    if frozen.report["test_records"] == 0:
        raise ContractError(_no_test_record(frozen))
    checks = frozen.report["leak_checks"]
    failed = sorted(name for name, ok in checks.items() if not ok)
    if failed:
        raise ContractError(f"leak checks failed: {', '.join(failed)}; nothing was written")


def _no_test_record(frozen: FreezeResult) -> str:
    if frozen.hubs:
        number, count = frozen.hubs[0]
        cause = (
            f"issue #{number} references {count} in-corpus issues and joins them into one component; "
            "freeze with --isolate-hubs to keep its references as facts without merging"
        )
    else:
        cause = "every split component hashed to train or tune"
    return f"no test record is left ({frozen.report['records']} records): {cause}; nothing was written"


def find_hubs(numbers: Iterable[int], references: Iterable[Sequence[int]]) -> list[tuple[int, int]]:
    """(number, in-corpus references) of each record referencing more than HUB_REFERENCES
    in-corpus issues, most first."""
    present = set(numbers)
    hubs = []
    for number, refs in zip(numbers, references):
        if len(refs) > HUB_REFERENCES:
            count = sum(1 for r in set(refs) if r in present and r != number)
            if count > HUB_REFERENCES:
                hubs.append((number, count))
    return sorted(hubs, key=lambda h: (-h[1], h[0]))


def build(issues: Iterable[RawIssue], source: str, rules: Sequence[Rule] = (), isolate_hubs: bool = False) -> Frozen:
    """The three documents of `freeze`, in memory, with the leak checks recorded but not enforced."""
    with tempfile.TemporaryDirectory(prefix="microctx-freeze-") as folder:
        paths = (Path(folder) / "public.json", Path(folder) / "answers.json")
        with open(paths[0], "wb") as public, open(paths[1], "wb") as answers:
            result = _freeze_into(issues, source, rules, isolate_hubs, Outputs((public, answers), paths, paths[0]))
        return Frozen(
            result.report,
            result.public_sha256,
            result.answers_sha256,
            result.hubs,
            public=_read_document(paths[0]),
            answers=_read_document(paths[1]),
        )


def rebuild_digests(fill: Callable[[FreezePass], None], source: str, public_file: str | os.PathLike) -> FreezeResult:
    """What `build` reports of the issues `fill` reads into a freeze pass (digests, report, leak
    checks) without keeping or writing the documents: each is hashed as it is made.
    `public_file` stands for the public document where a leak check reads it back (verify: the
    file whose content is rebuilt)."""
    with open(os.devnull, "wb") as public, open(os.devnull, "wb") as answers:
        outputs = Outputs((public, answers), (os.devnull, os.devnull), public_file)
        return _freeze_into((), source, (), False, outputs, tempfile.gettempdir(), fill)


def _read_document(path: Path) -> dict:
    try:
        return read_object_streaming(path, "records")
    except IrregularJSON:  # the answer bundle: its list is not its last key
        return orjson.loads(path.read_bytes())


def freeze_files(
    issues: Iterable[RawIssue],
    source: str,
    paths: tuple[str | os.PathLike, str | os.PathLike, str | os.PathLike],
    rules: Sequence[Rule] = (),
    isolate_hubs: bool = False,
    fill: Callable[[FreezePass], None] | None = None,
) -> FreezeResult:
    """`freeze`, writing the public corpus, answer bundle and report to `paths` as it goes: all
    three published together, atomically, and only when every check passed (ContractError
    otherwise, nothing written). Memory holds what the split needs, not the documents. `fill`,
    when given, reads the issues into the freeze's pass instead of `issues`."""
    public_path, answers_path, report_path = paths
    with AtomicOutputs() as out:
        handles = (out.stage(public_path), out.stage(answers_path))
        outputs = Outputs(handles, (public_path, answers_path), out.staged_path(public_path))
        result = _freeze_into(issues, source, rules, isolate_hubs, outputs, fill=fill)
        _enforce(result)
        out.write(report_path, dumps(result.report))
    return result


def freeze_export(
    raw: str | os.PathLike,
    source: str,
    paths: tuple[str | os.PathLike, str | os.PathLike, str | os.PathLike],
    rules: Sequence[Rule] = (),
    isolate_hubs: bool = False,
) -> FreezeResult:
    """`freeze_files` of the raw export file `raw`: a large one read in two halves on two cores
    (see `halves`), any other (or when that fails) record by record in one process."""
    fill = export_filler(raw, rules)
    if fill is not None:
        try:
            return freeze_files((), source, paths, rules, isolate_hubs, fill=fill)
        except HalvesFailed:
            pass
    return with_export(raw, lambda issues: freeze_files(issues, source, paths, rules, isolate_hubs))


def _freeze_into(
    issues: Iterable[RawIssue],
    source: str,
    rules: Sequence[Rule],
    isolate_hubs: bool,
    outputs: Outputs,
    spill_folder: str | None = None,
    fill: Callable[[FreezePass], None] | None = None,
) -> FreezeResult:
    """Freeze `issues` into the two open outputs; the report, with the leak checks recorded but
    not enforced. The spill file is an unnamed file in `spill_folder` (default: beside the public
    output). `fill`, when given, reads the issues into the pass instead of `issues`."""
    folder = spill_folder or os.path.dirname(os.path.abspath(outputs.names[0]))
    with gc_paused(), tempfile.TemporaryFile(dir=folder, buffering=0) as spill:  # FreezePass writes in blocks
        fp = FreezePass(spill, rules, where=f"{folder}/ (the freeze's spill file)", folder=folder)
        if fill is not None:
            fill(fp)
        for issue in issues:
            fp.add(issue)
        fp.end_reading()
        n = len(fp.numbers)
        hubs = find_hubs(fp.numbers, (fp.references_of(i) for i in range(n)))
        codes = split_codes(fp, {number for number, _ in hubs} if isolate_hubs else set())
        repeated = n - len(set(fp.numbers))
        written = write_documents(fp, codes, source, outputs, PRESERVED_KEYS + DERIVED_KEYS, repeated)
        same_content = all(codes[i] == codes[fp.title_first[i]] == codes[fp.body_first[i]] for i in range(n))
    for handle, name in zip(outputs.handles, outputs.names):
        try:
            handle.flush()
        except OSError as exc:
            raise write_failure(name, exc) from None
    in_public = file_contains(outputs.public_file, written.answers_sha256.encode())
    checks = leak_checks(repeated == 0, same_content, written.public_keys_found, in_public, written.oracle)
    counts = {f"{name}_records": codes.count(i) for i, name in enumerate(SPLITS)}
    report = _report(written, fp.tally, n, counts, checks, source, len(rules))
    return FreezeResult(report, written.public_sha256, written.answers_sha256, hubs)


def _report(written: Written, tally: Tally, n: int, split_counts: dict, checks: dict, source: str, n_rules: int) -> dict:
    """The corpus report: digests, counts, leak checks, the blind oracle grade, provenance."""
    return {
        "schema": REPORT_SCHEMA,
        "corpus_sha256": written.public_sha256,
        "answers_sha256": written.answers_sha256,
        "records": n,
        "train_records": split_counts["train_records"],
        "tune_records": split_counts["tune_records"],
        "test_records": split_counts["test_records"],
        "open_records": tally.states.get("OPEN", 0),
        "closed_records": tally.states.get("CLOSED", 0),
        "reference_edges": tally.references,
        "duplicate_edges": tally.duplicate_targets,
        "scope_contradictions": tally.scope_contradictions,
        "scrubbed_records": tally.scrubbed_records,
        "scrubbed_matches": tally.scrubbed_matches,
        "leak_checks": checks,
        "blind_oracle_grade": written.oracle,
        "question_slices": QUESTION_SLICES,
        "provenance": [
            f"source: {source}",
            f"frozen by microctx {__version__} with {n_rules} redaction rules",
            "candidate input keeps source state, labels and closure time; derived relation, cue and aggregate answers live only in the answer bundle",
            "splits group identical titles, identical bodies and in-corpus reference components before hashing the smallest issue number",
        ],
    }


_TEXT_KEYS = ("title", "body")


def leak_checks(
    ids_disjoint: bool, content_disjoint: bool, public_keys_found: set[bytes], answer_digest_in_public: bool, oracle: dict
) -> dict[str, bool]:
    """The six leak checks of the contract, keyed in sorted order. `ids_disjoint`: no id is in two
    splits; `content_disjoint`: no title or body (digest) is in two splits."""
    return {
        "answer_digest_absent_from_public": not answer_digest_in_public,
        "disjoint_train_tune_test_content": content_disjoint,
        "disjoint_train_tune_test_ids": ids_disjoint,
        "oracle_blind_run_exact": bool(oracle["quality_pass"]) and oracle["exact_records"] == oracle["test_records"],
        "public_omits_derived_answer_fields": not any(k in public_keys_found for k in DERIVED_KEYS),
        "public_preserves_source_state_labels_closed_at": all(k in public_keys_found for k in PRESERVED_KEYS),
    }


def write_frozen(
    frozen: Frozen, public_path: str | os.PathLike, answers_path: str | os.PathLike, report_path: str | os.PathLike
) -> None:
    """Write the three artifacts together, atomically."""
    with AtomicOutputs() as out:
        out.write(public_path, iter_dumps(frozen.public, "records", copy_keys=_TEXT_KEYS))
        out.write(answers_path, iter_dumps(frozen.answers, "answers"))
        out.write(report_path, dumps(frozen.report))
