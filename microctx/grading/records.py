"""The one record table of grading: facts derived once per record, and the record to component index.

Everything a slice, a tune metric or the frontier groups by comes from the public text, derived
once here with the answers' own functions (`contract.patterns`, `contract.split.components`):
- `record_columns(corpus, answers=None) -> RecordColumns`: the same table as numpy columns (no
  pandas: the `microctx slices` path); `record_table` is its DataFrame. Given an answer bundle
  bound to the corpus, the derived fields are read from it (`derived_facts`), not derived again.
- `bound_record_columns(public_path, answers)`: the same table, reading only the fields it needs
  from a public file the bundle is bound to (the `microctx slices` path); any other file is
  loaded and checked whole.
- `record_table(corpus, answers=None) -> DataFrame`: one row per public record: id, number, split,
  state, labels, n_labels, body_length, body_length_bucket, has_references, n_references,
  cue_words, has_cue_word, component, component_size, public_facts (the record's gold facts as
  (kind, value) pairs, derived from the public text as the answers are), references and
  duplicate_targets (the derived numbers) and, given answers, gold_facts (their number, from
  the answers). The lab's explorer reads the same table (`microctx.lab.explorer`).
- `component_index(records, used)`: the one record -> component index (dense indices over the
  components that hold the `used` records; -1 elsewhere) every count of grading uses.
- `component_of(records)`: record id -> component root, for callers that hold ids only (sweeps).
- `load_facts(path)` / `facts_frame(rows)`: a grade's fact table as a DataFrame.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import msgspec
import numpy as np

from microctx._io.jsonio import gc_paused
from microctx.contract.facts import FACT_COLUMNS, FACT_KINDS, FactRow
from microctx.contract.patterns import derive
from microctx.contract.schemas import CORPUS_SCHEMA, MAX_NUMBER
from microctx.contract.score import record_facts
from microctx.contract.split import components
from microctx.contract.timestamps import is_timestamp
from microctx.errors import InputError
from microctx.grading.stats import distinct

if TYPE_CHECKING:
    import pandas as pd

    from microctx.corpus.public import Corpus

OUTCOMES = ("tp", "fp", "fn")
# (upper bound in characters, name); bodies longer than the last bound are ">8,000 chars"
BODY_LENGTH_BUCKETS = (
    (0, "empty"),
    (500, "1-500 chars"),
    (2000, "501-2,000 chars"),
    (8000, "2,001-8,000 chars"),
    (None, ">8,000 chars"),
)
WITH_REFERENCES, WITHOUT_REFERENCES = "with references", "without references"
# an answer's fields that the freeze derives from the public text (`patterns.derive`'s three lists)
REFS, DUPS, CUES = "references", "duplicate_targets", "scope_contradictions"


def load_facts(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a `<grade>.facts.csv`: columns record_id, split, kind, value, outcome, detail.

    Every cell stays a string (a label "None" or an empty detail is not turned into NaN).
    Raises InputError naming the file, row and field when the table is not that shape.
    """
    import pandas as pd

    from microctx._io.jsonio import open_input

    try:
        with open_input(path) as handle:  # a regular file under the input limit, its set settled
            frame = pd.read_csv(handle, dtype=str, keep_default_na=False, na_filter=False)
        from microctx._io.csvout import unescape_frame

        frame = unescape_frame(frame)
    except FileNotFoundError:
        raise InputError(path, "cannot read file: no such file") from None
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise InputError(path, f"not a readable CSV fact table: {exc}") from None
    if tuple(frame.columns) != FACT_COLUMNS:
        raise InputError(
            path, f"expected columns {', '.join(FACT_COLUMNS)}, got {', '.join(map(str, frame.columns))}", record="header"
        )
    _check_facts(frame, path)
    frame.attrs["path"] = os.fspath(path)
    return frame


def facts_frame(rows: Iterable[FactRow]) -> pd.DataFrame:
    """The fact table as a DataFrame from `GradeResult.facts` (FactRow objects)."""
    import pandas as pd

    data = [(r.record_id, r.split, r.kind, r.value, r.outcome, r.detail) for r in rows]
    return pd.DataFrame(data, columns=list(FACT_COLUMNS), dtype=str)


def _check_facts(frame: pd.DataFrame, path: object) -> None:
    scored = frame["kind"].isin(FACT_KINDS)
    bad_outcome = scored & ~frame["outcome"].isin(OUTCOMES)
    if bad_outcome.any():
        i = int(np.flatnonzero(bad_outcome.to_numpy())[0])
        raise InputError(
            path,
            f"expected one of tp, fp, fn, got {frame['outcome'].iat[i]!r}",
            record=f"row {i + 2} ({frame['record_id'].iat[i]})",
            field="outcome",
        )
    known = scored | frame["kind"].isin(("aggregate", "citation", "corpus"))
    if not known.all():
        i = int(np.flatnonzero(~known.to_numpy())[0])
        raise InputError(
            path, f"unknown fact kind {frame['kind'].iat[i]!r}", record=f"row {i + 2} ({frame['record_id'].iat[i]})", field="kind"
        )


def _body_length_bucket(length: int) -> str:
    for bound, name in BODY_LENGTH_BUCKETS:
        if bound is None or length <= bound:
            return name
    raise AssertionError("unreachable")


def _public_facts(state: str | None, labels: list[str], derived: tuple[list[int], list[int], list[str]]) -> list[tuple[str, str]]:
    """A record's gold facts derived from its public text, as the answers derive them: its
    state, labels, references, duplicate targets and cue words (`derived`: `patterns.derive` of
    its title and body), as (kind, value) pairs."""
    refs, dups, cues = derived
    facts = [("state", str(state))] if state is not None else []
    facts += [("label", str(x)) for x in labels]
    facts += [("ref", str(x)) for x in refs] + [("dup", str(x)) for x in dups]
    facts += [("contradiction", x) for x in cues]
    return facts


class RecordColumns:
    """The record table as numpy columns, in `record_table`'s column order: `table[name]` is a
    column (an array), `len(table)` the number of records, `columns` the names, `frame()` the
    DataFrame (`record_table`). Slices and counts read either this or the DataFrame. A column
    given in `lazy` (name -> function making it) is made when it is first read: `public_facts`,
    a list of pairs per record, is not read by `microctx slices` (0.5 s at 100,000 records)."""

    def __init__(self, columns: dict[str, np.ndarray | None], lazy: dict[str, Callable[[], np.ndarray]] | None = None):
        self._columns = columns
        self._lazy = dict(lazy or {})

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._lazy:
            self._columns[name] = self._lazy.pop(name)()
        column = self._columns[name]
        assert column is not None
        return column

    def __len__(self) -> int:
        return len(self["id"])

    @property
    def columns(self) -> list[str]:
        return list(self._columns)

    def frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame({name: list(v) if v.dtype == object else v for name, v in ((n, self[n]) for n in self.columns)})


def _objects(values: list[Any]) -> np.ndarray:
    """A 1-d object array of `values` (lists stay list elements, never a second axis)."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def record_columns(corpus: Corpus, answers: dict[str, Any] | None = None, *, gold_facts: bool = True) -> RecordColumns:
    """One row per public record with the columns slices group by, as numpy columns.

    Everything comes from the public text (references, duplicate targets and cue words via
    `patterns.derive`, once per record; split components via `split.components`), so no answers
    are needed. Given the answer bundle, `gold_facts` (the record's number of gold facts) is added
    (unless `gold_facts=False`), and when the bundle is bound to this corpus (`derived_facts`) the
    derived fields are read from it instead of derived again.
    """
    with gc_paused():  # many small objects, no cycles: no collection over the loaded corpus
        return _record_columns(corpus, answers, gold_facts)


def _record_columns(corpus: Corpus, answers: dict[str, Any] | None, gold_facts: bool) -> RecordColumns:
    records = corpus.records
    texts = _Texts(
        [r["id"] for r in records],
        [r["number"] for r in records],
        [r["split"] for r in records],
        [r["state"] for r in records],
        [r["labels"] for r in records],
        [len(r["body"]) for r in records],
        [r["title"] for r in records],
        [r["body"] for r in records],
    )
    return _columns(texts, derived_facts(corpus, answers), answers if gold_facts else None)


@dataclass
class _Texts:
    """The public fields a record table reads, one list each in corpus order (`titles` and
    `bodies`: anything equal exactly when the texts are, `split.components`)."""

    ids: list[str]
    numbers: list[int]
    splits: list[str]
    states: list[str]
    labels: list[list[str] | None]
    lengths: list[int]
    titles: list[str]
    bodies: list[str]


def _columns(
    texts: _Texts, derived: list[tuple[list[int], list[int], list[str]]], answers: dict[str, Any] | None
) -> RecordColumns:
    """The record table of `texts` and their derived facts (`gold_facts` from `answers` when given)."""
    refs = [d[0] for d in derived]
    numbers = texts.numbers
    roots = components(numbers, texts.titles, texts.bodies, refs)
    labels = [list(x or []) for x in texts.labels]
    lengths = texts.lengths
    cues = [d[2] for d in derived]
    component = np.array([roots[n] for n in numbers], dtype=np.int64)
    sizes = np.unique(component, return_inverse=True, return_counts=True)
    ids = _objects(texts.ids)
    columns = {
        "id": ids,
        "number": np.array(numbers, dtype=np.int64),
        "split": _objects(texts.splits),
        "state": _objects(texts.states),
        "labels": _objects(labels),
        "n_labels": np.array([len(x) for x in labels], dtype=np.int64),
        "body_length": np.array(lengths, dtype=np.int64),
        "body_length_bucket": _objects([_body_length_bucket(n) for n in lengths]),
        "has_references": np.array([bool(x) for x in refs], dtype=bool),
        "n_references": np.array([len(x) for x in refs], dtype=np.int64),
        "cue_words": _objects(cues),
        "has_cue_word": np.array([bool(x) for x in cues], dtype=bool),
        "component": component,
        "component_size": sizes[2][sizes[1]].astype(np.int64),
        "public_facts": None,  # made when read (`RecordColumns`)
        "references": _objects(refs),  # the explorer marks them (contract.patterns.spans_utf8)
        "duplicate_targets": _objects([d[1] for d in derived]),
    }
    if answers is not None:
        gold = {a["id"]: len(record_facts(a)) for a in answers["answers"]}
        columns["gold_facts"] = np.array([gold.get(i, 0) for i in ids], dtype=np.int64)
    states = texts.states
    public = lambda: _objects([_public_facts(s, x, d) for s, x, d in zip(states, labels, derived, strict=True)])  # noqa: E731
    return RecordColumns(columns, {"public_facts": public})


_Positive = Annotated[int, msgspec.Meta(gt=0, le=MAX_NUMBER)]


class _Bound(msgspec.Struct):
    """A public record as `check_corpus_record` accepts it, typed (the table reads the texts'
    digests in place of the texts; `_also_valid` checks the rest): a bound file
    that is not a valid corpus is read and refused whole, as `load_corpus` refuses it."""

    id: str
    number: _Positive
    split: Literal["train", "tune", "test"]
    state: Literal["OPEN", "CLOSED"]
    labels: list[str] | None
    body: str
    title: str
    url: str
    created_at: str
    updated_at: str
    closed_at: str | None
    title_sha256: str
    body_sha256: str


class _BoundCorpus(msgspec.Struct):
    schema: str  # CORPUS_SCHEMA (compared after decoding)
    source: str
    frozen_at: str
    records: list[_Bound]


def _also_valid(records: list[_Bound]) -> bool:
    """Every timestamp one `parse_timestamp` takes."""
    return all(
        is_timestamp(r.created_at) and is_timestamp(r.updated_at) and (r.closed_at is None or is_timestamp(r.closed_at))
        for r in records
    )


def bound_record_columns(public: str | os.PathLike[str], answers: dict[str, Any]) -> RecordColumns:
    """`record_columns(load_corpus(public), answers, gold_facts=False)`, cheaper when `answers`
    is bound to the file (its `corpus_sha256` is the file's digest): that file is then the one
    freeze wrote beside the bundle, so each record's title and body stand in as their digests
    (`title_sha256`, `body_sha256`, which freeze wrote from them) and its derived facts are read
    from the bundle (`derived_facts`). Each record is still checked as `load_corpus` checks it
    (typed decoding, `_also_valid`): a digest names a file, it does not vouch for it (a crafted
    bundle can name any file's), and a file that is not a valid corpus is refused whole.
    The file is read once into memory, and those very bytes are hashed on another thread while
    they are decoded (hashlib lets go of the GIL): a file changed on disk meanwhile cannot be
    parsed under another content's digest (a shared mapping could). At 100,000 records about
    1.5 s of CPU less. Any other file (or a record the bundle lacks) is loaded and checked whole
    (`load_corpus`), with its errors."""
    from microctx._io.jsonio import read_bytes

    data = read_bytes(public)  # one private copy: what is hashed is what is parsed
    digest: list[str] = []
    hashing = threading.Thread(target=lambda: digest.append(hashlib.sha256(data).hexdigest()))
    hashing.start()
    try:
        bound = msgspec.json.decode(data, type=_BoundCorpus) if answers.get("corpus_sha256") else None
        records = bound.records if bound is not None and bound.schema == CORPUS_SCHEMA else []
    except msgspec.MsgspecError:
        records = []
    finally:
        hashing.join()
    if records and answers["corpus_sha256"] == digest[0] and _also_valid(records):
        held = {a["id"]: a for a in answers["answers"]}
        if all(r.id in held for r in records):
            return _columns(_bound_texts(records), [_derived_of(held[r.id]) for r in records], None)
    from microctx._io.jsonio import parse_json
    from microctx.corpus.public import Corpus, check_corpus_document  # any other file: loaded and checked whole

    corpus = Corpus(check_corpus_document(parse_json(data, public), public), digest[0], os.fspath(public))
    return record_columns(corpus, answers, gold_facts=False)


def _bound_texts(records: list[_Bound]) -> _Texts:
    return _Texts(
        [r.id for r in records],
        [r.number for r in records],
        [r.split for r in records],
        [r.state for r in records],
        [r.labels for r in records],
        [len(r.body) for r in records],
        [r.title_sha256 for r in records],
        [r.body_sha256 for r in records],
    )


def _derived_of(answer: dict[str, Any]) -> tuple[list[int], list[int], list[str]]:
    return answer[REFS], answer[DUPS], answer[CUES]


def derived_facts(corpus: Corpus, answers: dict[str, Any] | None = None) -> list[tuple[list[int], list[int], list[str]]]:
    """Every record's references, duplicate targets and cue words, in corpus order.

    From the answer bundle when it is bound to this corpus (its `corpus_sha256` is the corpus's
    digest): the freeze wrote those fields with `patterns.derive` from this very text (`verify`
    derives them again and compares), so reading them gives the same lists without deriving
    (about 0.05 ms per record, 5 s at 100,000 records). Otherwise, and for a record the bundle
    lacks, derived from the public text.
    """
    records = corpus.records
    if answers is None or answers.get("corpus_sha256") != corpus.sha256:
        return [derive(r["title"], r["body"]) for r in records]
    held = {a["id"]: a for a in answers["answers"]}
    out: list[tuple[list[int], list[int], list[str]]] = []
    for r in records:  # the bundle's lists were checked by its schema (`schemas.load_answers`)
        a = held.get(r["id"])
        out.append(derive(r["title"], r["body"]) if a is None else (a[REFS], a[DUPS], a[CUES]))
    return out


def record_table(corpus: Corpus, answers: dict[str, Any] | None = None) -> pd.DataFrame:
    """`record_columns` as a DataFrame (the notebooks', the explorer's and the API's table)."""
    return record_columns(corpus, answers).frame()


def component_index(records: pd.DataFrame | RecordColumns, used: np.ndarray) -> tuple[np.ndarray, int]:
    """The record -> component index: (dense component index per record row, number of components).

    Only the components holding a `used` record (row indices, e.g. records with a scored fact)
    are indexed, in the order of their roots; every other record gets -1 (never counted).
    """
    component = np.asarray(records["component"])
    roots = distinct(component[np.asarray(used, dtype=np.int64)])
    index = np.full(len(records), -1, dtype=np.int64)
    if len(roots):
        pos = np.searchsorted(roots, component)
        hit = (pos < len(roots)) & (roots[np.minimum(pos, len(roots) - 1)] == component)
        index[hit] = pos[hit]
    return index, len(roots)


def component_of(records: pd.DataFrame | RecordColumns) -> dict[str, Any]:
    """Record id -> split component root (the split rule's unit), from the record table."""
    return dict(zip(records["id"], records["component"]))
