"""A freeze in one pass over its issues, its documents written from a spill file.

Each issue is scrubbed, derived, digested and serialized as it is read. Its public record and
its answer, less the id and split lines (the split waits for every record), go to a spill file.
Memory keeps only what the split, the report and the ordering need: each issue's number, the
first record with its title and with its body, its references, its place in the spill, and
counts. Then the split is computed, and the public corpus and the answer bundle are written in
issue-number order from the spill, hashed as they are written. The bytes are those of
`canonical.dumps` of the whole documents (tests compare them with the published files).
"""

from __future__ import annotations

import errno
import hashlib
import heapq
import os
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from heapq import nlargest
from typing import BinaryIO

import orjson

from microctx._io.paths import write_failure
from microctx.contract.canonical import document_parts, dumps, item_bytes, item_fields
from microctx.contract.digests import digest_chunks, sha256_hex
from microctx.contract.patterns import derive_utf8
from microctx.contract.schemas import ANSWERS_SCHEMA, CORPUS_SCHEMA
from microctx.contract.score import RecordScore, aggregate_error_rows, grade_document
from microctx.contract.split import SPLITS, linked_components, split_for_key
from microctx.contract.timestamps import utc_second
from microctx.corpus.export import RawIssue
from microctx.corpus.redact import MARKER, Rule, scrub

_BATCH = 256  # items per written chunk
_BLOCK = 1 << 20  # bytes per read when searching a written file
_SCORED = SPLITS.index(RecordScore().split)


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


@dataclass
class Tally:
    """The counts a freeze keeps while it reads its issues (the report's and the aggregates')."""

    states: dict[str, int] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    newest: list[tuple[int, int]] = field(default_factory=list)  # (created instant, number), ten latest
    updated: list[tuple[int, int]] = field(default_factory=list)  # (updated instant, number), ten latest
    latest_ns: int | None = None
    references: int = 0
    duplicate_targets: int = 0
    scope_contradictions: int = 0
    scrubbed_records: int = 0
    scrubbed_matches: int = 0

    def add(self, issue: RawIssue, labels: list[str] | None, refs: list, dups: list, cues: list) -> None:
        self.states[issue.state] = self.states.get(issue.state, 0) + 1
        for name in labels or ():
            self.labels[name] = self.labels.get(name, 0) + 1
        _keep_ten(self.newest, (issue.created_at.instant_ns, issue.number))
        _keep_ten(self.updated, (issue.updated_at.instant_ns, issue.number))
        if self.latest_ns is None or issue.updated_at.instant_ns > self.latest_ns:
            self.latest_ns = issue.updated_at.instant_ns
        self.references += len(refs)
        self.duplicate_targets += len(dups)
        self.scope_contradictions += len(cues)

    def merge(self, other: Tally) -> None:
        """Count `other`'s issues too, as if this tally had read them."""
        for mine, theirs in ((self.states, other.states), (self.labels, other.labels)):
            for name, count in theirs.items():
                mine[name] = mine.get(name, 0) + count
        for item in other.newest:
            _keep_ten(self.newest, item)
        for item in other.updated:
            _keep_ten(self.updated, item)
        if other.latest_ns is not None and (self.latest_ns is None or other.latest_ns > self.latest_ns):
            self.latest_ns = other.latest_ns
        self.references += other.references
        self.duplicate_targets += other.duplicate_targets
        self.scope_contradictions += other.scope_contradictions
        self.scrubbed_records += other.scrubbed_records
        self.scrubbed_matches += other.scrubbed_matches

    def aggregates(self) -> dict:
        """State and label counts over every record; newest and most recently updated top ten
        (by instant, latest first; ties by the higher issue number)."""
        return {
            "state_counts": dict(sorted(self.states.items())),
            "label_counts": dict(sorted(self.labels.items())),
            "newest_issue_ids": top_ten_ids(self.newest),
            "most_recently_updated_issue_ids": top_ten_ids(self.updated),
        }


def _keep_ten(heap: list[tuple[int, int]], item: tuple[int, int]) -> None:
    if len(heap) < 10:
        heapq.heappush(heap, item)
    elif item > heap[0]:
        heapq.heapreplace(heap, item)


class FreezePass:
    """What a freeze keeps of its issues while it reads them (see the module docstring)."""

    def __init__(
        self, spill: BinaryIO, rules: Iterable[Rule] = (), where: str | os.PathLike = "<spill>", folder: str | None = None
    ) -> None:
        self.spill, self.rules, self.where = spill, list(rules), where  # where: named by a write error
        self.folder = folder  # where the spill is (another pass's spill goes there too), if known
        self.numbers = array("Q")
        self.title_first = array("q")  # index of the first record with the same title
        self.body_first = array("q")
        self.ref_ends = array("q")  # self.refs[ref_ends[i - 1]:ref_ends[i]]: record i's references
        self.refs = array("Q")
        self.spill_at = array("q")  # record i: public fields, then answer fields, from spill_at[i]
        self.public_len = array("q")
        self.answer_len = array("q")
        self.tally = Tally()
        self._titles: dict[bytes, int] = {}
        self._bodies: dict[bytes, int] = {}
        self._offset = 0
        self._pending = bytearray()  # serialized records not yet in the spill

    def add(self, issue: RawIssue) -> None:
        """Scrub, derive, digest and spill one issue."""

        if self.rules:
            result = scrub(issue.title, issue.body, self.rules, record=f"number {issue.number}")
            self.tally.scrubbed_matches += result.matches
            self.tally.scrubbed_records += result.touched
            issue = RawIssue(
                issue.number, result.title, result.body, issue.state, issue.labels,
                issue.created_at, issue.updated_at, issue.closed_at, issue.url,
            )  # fmt: skip
        title, body = issue.title.encode(), issue.body.encode()
        if not self.rules:  # what scrub reports without rules: the text already carries the marker
            self.tally.scrubbed_records += _MARKER in title or _MARKER in body
        refs, dups, cues = derive_utf8(title, body)
        title_digest, body_digest = hashlib.sha256(title).digest(), hashlib.sha256(body).digest()
        index = len(self.numbers)
        self.numbers.append(issue.number)
        self.title_first.append(self._titles.setdefault(title_digest, index))
        self.body_first.append(self._bodies.setdefault(body_digest, index))
        self.refs.extend(refs)
        self.ref_ends.append(len(self.refs))
        record = public_record(issue, "", title_digest.hex(), body_digest.hex())
        answer = answer_record(record, refs, dups, cues)
        self.tally.add(issue, record["labels"], refs, dups, cues)
        for document in (record, answer):
            del document["id"], document["split"]
        public, answers = item_fields(record, _TEXT_KEYS), item_fields(answer)
        self._pending += public
        self._pending += answers
        if len(self._pending) >= _BLOCK:
            self._write_pending()
        self.spill_at.append(self._offset)
        self.public_len.append(len(public))
        self.answer_len.append(len(answers))
        self._offset += len(public) + len(answers)

    def absorb(self, other: FreezePass, other_spill: BinaryIO) -> None:
        """Take the issues `other` read (into `other_spill`, before its `end_reading`) as if this
        pass had read them after its own: records, references, first records of each title and
        body, counts, and the spilled bytes, copied to the end of this spill."""
        self._write_pending()
        base, refs_before, offset = len(self.numbers), len(self.refs), self._offset
        titles = (self.title_first, other.title_first, self._titles, other._titles)
        for firsts, their_firsts, mine, theirs in (titles, (self.body_first, other.body_first, self._bodies, other._bodies)):
            first_of = {local: mine.setdefault(digest, base + local) for digest, local in theirs.items()}
            firsts.extend(first_of[local] for local in their_firsts)
        self.numbers.extend(other.numbers)
        self.refs.extend(other.refs)
        self.ref_ends.extend(end + refs_before for end in other.ref_ends)
        self.spill_at.extend(at + offset for at in other.spill_at)
        self.public_len.extend(other.public_len)
        self.answer_len.extend(other.answer_len)
        self.tally.merge(other.tally)
        self._offset += _append_file(other_spill, self.spill, self.where)

    def references_of(self, index: int) -> array:
        return self.refs[self.ref_ends[index - 1] if index else 0 : self.ref_ends[index]]

    def flush_spill(self) -> None:
        """Write what is still pending to the spill (it then holds every record read so far)."""
        self._write_pending()

    def end_reading(self) -> None:
        """Drop what only the reading needed (the digests of titles and bodies)."""
        self._titles, self._bodies = {}, {}
        self._write_pending()

    def _write_pending(self) -> None:
        """Append the records serialized since the last block to the spill (an unbuffered file:
        nothing is left to flush when a write fails)."""
        data = memoryview(self._pending)
        try:
            while data:
                data = data[os.write(self.spill.fileno(), data) :]
        except OSError as exc:  # a full disk, most likely
            raise write_failure(self.where, exc) from None
        finally:
            data.release()
        self._pending = bytearray()


def _append_file(source: BinaryIO, target: BinaryIO, where: str | os.PathLike) -> int:
    """Append all of `source` to `target` (an unbuffered file, at its end), in the kernel where it
    can; the bytes appended."""
    size = os.fstat(source.fileno()).st_size
    done = 0
    try:
        while done < size:
            try:
                copied = os.copy_file_range(source.fileno(), target.fileno(), size - done, done)
            except OSError as exc:  # not across these file systems: through this process
                if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                copied = os.write(target.fileno(), os.pread(source.fileno(), min(_BLOCK, size - done), done))
            if copied == 0:
                break
            done += copied
    except OSError as exc:
        raise write_failure(where, exc) from None
    return done


_MARKER = MARKER.encode()
_TEXT_KEYS = ("title", "body")  # an issue list kept by the caller keeps no UTF-8 copies of them


def split_codes(fp: FreezePass, isolated: set[int]) -> bytearray:
    """Each record's split as an index into SPLITS (records of `isolated` numbers join no
    component through their references)."""
    numbers = fp.numbers

    def links() -> Iterator[tuple[int, int]]:
        for index, number in enumerate(numbers):
            for first in (fp.title_first[index], fp.body_first[index]):
                if first != index:
                    yield number, numbers[first]
            if number not in isolated:
                for ref in fp.references_of(index):
                    yield number, ref

    roots = linked_components(numbers, links())
    codes = {root: SPLITS.index(split_for_key(root)) for root in set(roots.values())}
    return bytearray(codes[roots[n]] for n in numbers)


@dataclass
class Written:
    """The digests of the two documents written, the public keys found, and the blind oracle."""

    public_sha256: str
    answers_sha256: str
    public_keys_found: set[bytes]
    oracle: dict


def write_documents(
    fp: FreezePass, codes: bytearray, source: str, outputs: Outputs, needles: Iterable[bytes], repeated: int
) -> Written:
    """Write the public corpus and the answer bundle from the spill, in issue-number order; grade
    the answers as written against themselves (the blind oracle; `repeated`: ids given twice)."""
    public, answers = outputs.handles
    order = sorted(range(len(fp.numbers)), key=fp.numbers.__getitem__)
    shell: dict[str, object] = {"schema": CORPUS_SCHEMA, "source": source, "frozen_at": utc_second(fp.tally.latest_ns or 0)}
    public_sha, found = digest_chunks(
        _written(public, outputs.names[0], _items(fp, codes, order, {**shell, "records": []}, "records", 0)), needles
    )
    tally = RecordScore()
    aggregates = fp.tally.aggregates()
    shell = {"schema": ANSWERS_SCHEMA, "corpus_sha256": public_sha, "answers": [], "aggregates": aggregates}
    answers_sha, _ = digest_chunks(_written(answers, outputs.names[1], _items(fp, codes, order, shell, "answers", 1, tally)))
    oracle = grade_document(public_sha, tally, 1 if aggregate_error_rows(aggregates, aggregates) else 0, repeated)
    return Written(public_sha, answers_sha, found, oracle)


def _written(handle: BinaryIO, name: str | os.PathLike, chunks: Iterable[bytes]) -> Iterator[bytes]:
    for chunk in chunks:
        try:
            handle.write(chunk)
        except OSError as exc:
            raise write_failure(name, exc) from None
        yield chunk


@dataclass
class Outputs:
    """The two open documents a freeze writes, the names a write error gives them, and where the
    public one can be read back (its file as written so far)."""

    handles: tuple[BinaryIO, BinaryIO]
    names: tuple[str | os.PathLike, str | os.PathLike]
    public_file: str | os.PathLike


def _items(
    fp: FreezePass, codes: bytearray, order: list[int], shell: dict, key: str, part: int, oracle: RecordScore | None = None
) -> Iterator[bytes]:
    """The canonical bytes of `shell` with its list `key` made of each record's spilled fields
    (`part` 0: public, 1: answer) in `order`; each answer is graded into `oracle` as written."""
    if not order:
        yield dumps({**shell, key: []})
        return
    head, tail = document_parts({**shell, key: [None]}, key)
    yield head
    names = [f'      "split": "{name}",\n'.encode() for name in SPLITS]
    for start in range(0, len(order), _BATCH):
        chunk = []
        batch = order[start : start + _BATCH]
        read = _reader(fp, batch)
        for index in batch:
            offset, length = fp.spill_at[index], fp.answer_len[index] if part else fp.public_len[index]
            fields = read(offset + fp.public_len[index] if part else offset, length)
            first = f'      "id": "issue-{fp.numbers[index]}",\n'.encode() + names[codes[index]]
            item = item_bytes(first, fields)
            if oracle is not None and codes[index] == _SCORED:  # the oracle skips the other splits' answers
                answer = orjson.loads(item)
                oracle.add(answer, answer)
            chunk.append(item)
        yield b",\n".join(chunk) + (b",\n" if start + _BATCH < len(order) else b"\n")
    yield tail


def _reader(fp: FreezePass, batch: list[int]) -> Callable[[int, int], bytes]:
    """Bytes of the spill by (offset, length) for the records of `batch`: from one read when they
    lie together in the spill (an export in number order, or in reverse), else one read each."""
    first = min(fp.spill_at[i] for i in batch)
    lengths = sum(fp.public_len[i] + fp.answer_len[i] for i in batch)
    top = max(fp.spill_at[i] + fp.public_len[i] + fp.answer_len[i] for i in batch)
    fd = fp.spill.fileno()
    if top - first != lengths:
        return lambda offset, length: os.pread(fd, length, offset)
    block = memoryview(os.pread(fd, lengths, first))
    return lambda offset, length: block[offset - first : offset - first + length].tobytes()


def file_contains(path: str | os.PathLike, needle: bytes) -> bool:
    """Whether the file's bytes contain `needle`, read a block at a time."""
    keep = len(needle) - 1
    carry = b""
    with open(path, "rb") as handle:
        while block := handle.read(_BLOCK):
            if needle in carry + block[: keep * 2] or needle in block:
                return True
            carry = block[-keep:] if keep else b""
    return False
