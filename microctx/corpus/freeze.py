"""Freezing a raw export into the three s8f artifacts: public corpus, answer bundle, report.

`freeze` is pure: issues in, documents and digests out. `write_frozen` writes the three files
atomically. Nothing is returned (or written) unless all six leak checks and the blind oracle
pass.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from heapq import nlargest
from operator import attrgetter

from microctx._io.atomic import AtomicOutputs
from microctx._io.jsonio import gc_paused
from microctx._version import __version__
from microctx.contract.canonical import iter_dumps
from microctx.contract.digests import digest_chunks, sha256_hex
from microctx.contract.patterns import derive_utf8
from microctx.contract.schemas import ANSWERS_SCHEMA, CORPUS_SCHEMA, REPORT_COUNTS, REPORT_SCHEMA
from microctx.contract.score import grade_counts
from microctx.contract.split import assign_splits
from microctx.contract.timestamps import utc_second
from microctx.corpus.export import RawIssue
from microctx.corpus.redact import MARKER, Rule, scrub
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
class Frozen:
    """The three documents of a freeze (all leak checks and the blind oracle passed, or there
    would be no Frozen); `write(public, answers, report)` writes them. `hubs`: (issue number,
    in-corpus references) of every record referencing more than HUB_REFERENCES in-corpus issues,
    most first (not part of any artifact)."""

    public: dict
    answers: dict
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

    passed = ok

    @property
    def summary(self) -> Summary:
        r = self.report
        checks = r.get("leak_checks") or {}
        return Summary(
            f"{r['records']:,} records (train {r['train_records']:,} / tune {r['tune_records']:,} / "
            f"test {r['test_records']:,}); {sum(v is True for v in checks.values())}/{len(checks)} leak checks pass; "
            f"public {short_digest(self.public_sha256)}, answers {short_digest(self.answers_sha256)}"
        )

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


def public_record(issue: RawIssue, split: str, title_sha256: str | None = None, body_sha256: str | None = None) -> dict:
    """The public record of an issue; pass the text digests when they are already computed."""
    labels = sorted([name for name in issue.labels if name]) if issue.labels else None
    closed_at = issue.closed_at
    return {
        "id": f"issue-{issue.number}",
        "split": split,
        "number": issue.number,
        "title": issue.title,
        "body": issue.body,
        "created_at": issue.created_at.text,
        "updated_at": issue.updated_at.text,
        "url": issue.url,
        "state": issue.state,
        "labels": labels or None,
        "closed_at": closed_at.text if closed_at else None,
        "title_sha256": title_sha256 or sha256_hex(issue.title.encode()),
        "body_sha256": body_sha256 or sha256_hex(issue.body.encode()),
    }


def answer_record(record: dict, refs: list[int], dups: list[int], cues: list[str]) -> dict:
    return {
        "id": record["id"],
        "split": record["split"],
        "state": record["state"],
        "labels": record["labels"] or [],
        "references": refs,
        "duplicate_targets": dups,
        "scope_contradictions": cues,
    }


def top_ten_ids(instants_and_numbers: Iterable[tuple[int, int]]) -> list[str]:
    """Ten ids by instant, latest first; ties by the higher issue number (numbers are unique)."""
    return [f"issue-{number}" for _, number in nlargest(10, instants_and_numbers)]


def aggregates(issues: Sequence[RawIssue], public_records: Sequence[dict]) -> dict:
    """State and label counts over every record; newest and most recently updated top ten."""
    states: dict[str, int] = {}
    labels: dict[str, int] = {}
    for record in public_records:
        states[record["state"]] = states.get(record["state"], 0) + 1
        for name in record["labels"] or ():
            labels[name] = labels.get(name, 0) + 1
    return {
        "state_counts": dict(sorted(states.items())),
        "label_counts": dict(sorted(labels.items())),
        "newest_issue_ids": top_ten_ids((i.created_at.instant_ns, i.number) for i in issues),
        "most_recently_updated_issue_ids": top_ten_ids((i.updated_at.instant_ns, i.number) for i in issues),
    }


def freeze(issues: Sequence[RawIssue], source: str, rules: Sequence[Rule] = (), isolate_hubs: bool = False) -> Frozen:
    """Scrub, split and derive; run the leak checks and the blind oracle.

    `isolate_hubs` (off by default, so published corpora stay byte-identical): a hub record's
    references stay facts in its answer but do not merge components for the split, so one issue
    listing `#1 ... #199` cannot pull every record into one split.
    Raises ContractError when a leak check or the oracle fails: nothing is to be written then;
    when no test record is left, the error says so and names the record that joined most.
    """
    frozen = build(issues, source, rules, isolate_hubs)
    if frozen.report["test_records"] == 0:
        raise ContractError(_no_test_record(frozen))
    checks = frozen.report["leak_checks"]
    failed = sorted(name for name, ok in checks.items() if not ok)
    if failed:
        raise ContractError(f"leak checks failed: {', '.join(failed)}; nothing was written")
    return frozen


def _no_test_record(frozen: Frozen) -> str:
    if frozen.hubs:
        number, count = frozen.hubs[0]
        cause = (
            f"issue #{number} references {count} in-corpus issues and joins them into one component; "
            "freeze with --isolate-hubs to keep its references as facts without merging"
        )
    else:
        cause = "every split component hashed to train or tune"
    return f"no test record is left ({frozen.report['records']} records): {cause}; nothing was written"


def build(issues: Sequence[RawIssue], source: str, rules: Sequence[Rule] = (), isolate_hubs: bool = False) -> Frozen:
    """The three documents of `freeze`, with the leak checks recorded but not enforced."""
    with gc_paused():
        return _build(issues, source, rules, isolate_hubs)


def find_hubs(numbers: Sequence[int], references: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
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


@dataclass
class _Derived:
    """What one pass over the sorted issues yields: the scrubbed issues, their answers' text
    facts, their text digests and the scrub counts."""

    issues: list[RawIssue]
    refs: list[list[int]]
    dups: list[list[int]]
    cues: list[list[str]]
    title_digests: list[str]
    body_digests: list[str]
    scrubbed_records: int = 0
    scrubbed_matches: int = 0


def _scrub_and_derive(issues: Sequence[RawIssue], rules: Sequence[Rule]) -> _Derived:
    """Sort by number, apply the redaction rules, and derive each issue's text facts and digests."""
    out = _Derived(sorted(issues, key=_NUMBER), [], [], [], [], [])
    marker = MARKER.encode()
    for index, issue in enumerate(out.issues):
        if rules:
            result = scrub(issue.title, issue.body, rules, record=f"number {issue.number}")
            out.scrubbed_matches += result.matches
            out.scrubbed_records += result.touched
            if result.title is not issue.title or result.body is not issue.body:
                issue = out.issues[index] = RawIssue(
                    issue.number,
                    result.title,
                    result.body,
                    issue.state,
                    issue.labels,
                    issue.created_at,
                    issue.updated_at,
                    issue.closed_at,
                    issue.url,
                )
        # str.encode keeps no copy inside the str (unlike orjson, see canonical._uncached)
        title, body = issue.title.encode(), issue.body.encode()
        if not rules:  # what scrub reports without rules: the text already carries the marker
            out.scrubbed_records += marker in title or marker in body
        ref, dup, cue = derive_utf8(title, body)
        out.refs.append(ref)
        out.dups.append(dup)
        out.cues.append(cue)
        out.title_digests.append(sha256_hex(title))
        out.body_digests.append(sha256_hex(body))
    return out


def _build(issues: Sequence[RawIssue], source: str, rules: Sequence[Rule], isolate_hubs: bool = False) -> Frozen:
    derived = _scrub_and_derive(issues, rules)
    issues = derived.issues
    numbers = [i.number for i in issues]
    hubs = find_hubs(numbers, derived.refs)
    split_refs: Sequence[Sequence[int]] = derived.refs
    if isolate_hubs and hubs:
        isolated = {number for number, _ in hubs}
        split_refs = [[] if n in isolated else refs for n, refs in zip(numbers, derived.refs)]
    # Identical texts have identical digests: grouping by digest is grouping by text, without
    # hashing every title and body again.
    splits = assign_splits(numbers, derived.title_digests, derived.body_digests, split_refs)
    del numbers, split_refs
    records = [public_record(i, splits[i.number], t, b) for i, t, b in zip(issues, derived.title_digests, derived.body_digests)]
    del splits
    derived.title_digests = derived.body_digests = []

    public = {
        "schema": CORPUS_SCHEMA,
        "source": source,
        "frozen_at": utc_second(max(i.updated_at.instant_ns for i in issues)),
        "records": records,
    }
    public_sha, found = digest_chunks(iter_dumps(public, "records", copy_keys=_TEXT_KEYS), PRESERVED_KEYS + DERIVED_KEYS)

    answer_list = [answer_record(*item) for item in zip(records, derived.refs, derived.dups, derived.cues)]
    answers = {
        "schema": ANSWERS_SCHEMA,
        "corpus_sha256": public_sha,
        "answers": answer_list,
        "aggregates": aggregates(issues, records),
    }
    derived.refs = derived.dups = []
    derived.cues = []
    answers_sha, _ = digest_chunks(iter_dumps(answers, "answers"))

    oracle = grade_counts(answers, answers)
    checks = leak_checks(records, found, _text_contains(public, answers_sha), oracle)
    report = _report(public_sha, answers_sha, records, answer_list, derived, checks, oracle, source, len(rules))
    return Frozen(public, answers, report, public_sha, answers_sha, hubs)


def _report(
    public_sha: str,
    answers_sha: str,
    records: list[dict],
    answer_list: list[dict],
    derived: _Derived,
    checks: dict,
    oracle: dict,
    source: str,
    n_rules: int,
) -> dict:
    """The corpus report: digests, counts, leak checks, the blind oracle grade, provenance."""
    counts = {s: 0 for s in ("train", "tune", "test")}
    states = {"OPEN": 0, "CLOSED": 0}
    for r in records:
        counts[r["split"]] += 1
        if r["state"] in states:
            states[r["state"]] += 1
    edges = {"references": 0, "duplicate_targets": 0, "scope_contradictions": 0}
    for a in answer_list:
        edges["references"] += len(a["references"])
        edges["duplicate_targets"] += len(a["duplicate_targets"])
        edges["scope_contradictions"] += len(a["scope_contradictions"])
    return {
        "schema": REPORT_SCHEMA,
        "corpus_sha256": public_sha,
        "answers_sha256": answers_sha,
        "records": len(records),
        "train_records": counts["train"],
        "tune_records": counts["tune"],
        "test_records": counts["test"],
        "open_records": states["OPEN"],
        "closed_records": states["CLOSED"],
        "reference_edges": edges["references"],
        "duplicate_edges": edges["duplicate_targets"],
        "scope_contradictions": edges["scope_contradictions"],
        "scrubbed_records": derived.scrubbed_records,
        "scrubbed_matches": derived.scrubbed_matches,
        "leak_checks": checks,
        "blind_oracle_grade": oracle,
        "question_slices": QUESTION_SLICES,
        "provenance": [
            f"source: {source}",
            f"frozen by microctx {__version__} with {n_rules} redaction rules",
            "candidate input keeps source state, labels and closure time; derived relation, cue and aggregate answers live only in the answer bundle",
            "splits group identical titles, identical bodies and in-corpus reference components before hashing the smallest issue number",
        ],
    }


_NUMBER = attrgetter("number")
_TEXT_KEYS = ("title", "body")


def _text_contains(public: dict, needle: str) -> bool:
    """Whether any string of the public corpus contains `needle`.

    For a hex digest this is the same as searching the file's bytes: JSON escaping leaves hex
    digits alone, and the digest cannot span two strings or sit in a key or a number.
    """
    if needle in public["source"] or needle in public["frozen_at"]:
        return True
    for r in public["records"]:
        for value in r.values():
            if isinstance(value, str) and needle in value:
                return True
    return False


def leak_checks(
    records: Sequence[dict], public_keys_found: set[bytes], answer_digest_in_public: bool, oracle: dict
) -> dict[str, bool]:
    """The six leak checks of the contract, keyed in sorted order."""
    ids: dict[str, set[str]] = {}
    titles: dict[str, set[str]] = {}
    bodies: dict[str, set[str]] = {}
    for r in records:
        ids.setdefault(r["split"], set()).add(r["id"])
        titles.setdefault(r["split"], set()).add(r["title_sha256"])
        bodies.setdefault(r["split"], set()).add(r["body_sha256"])

    def disjoint(groups: dict[str, set[str]]) -> bool:
        sets = list(groups.values())
        return all(not (a & b) for i, a in enumerate(sets) for b in sets[i + 1 :])

    checks = {
        "answer_digest_absent_from_public": not answer_digest_in_public,
        "disjoint_train_tune_test_content": disjoint(titles) and disjoint(bodies),
        "disjoint_train_tune_test_ids": disjoint(ids),
        "oracle_blind_run_exact": bool(oracle["quality_pass"]) and oracle["exact_records"] == oracle["test_records"],
        "public_omits_derived_answer_fields": not any(k in public_keys_found for k in DERIVED_KEYS),
        "public_preserves_source_state_labels_closed_at": all(k in public_keys_found for k in PRESERVED_KEYS),
    }
    return checks


def write_frozen(
    frozen: Frozen, public_path: str | os.PathLike, answers_path: str | os.PathLike, report_path: str | os.PathLike
) -> None:
    """Write the three artifacts together, atomically."""
    from microctx.contract.canonical import dumps

    with AtomicOutputs() as out:
        out.write(public_path, iter_dumps(frozen.public, "records", copy_keys=_TEXT_KEYS))
        out.write(answers_path, iter_dumps(frozen.answers, "answers"))
        out.write(report_path, dumps(frozen.report))
