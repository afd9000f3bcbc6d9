"""exact-sql: the fair SQL/search baseline, answered by DuckDB over the public corpus.

The public record carries state and labels, so an exact query projects them; references and
duplicate targets come from DuckDB's `regexp_extract_all` with the contract's RE2 patterns
(DuckDB's regular expressions are RE2, the engine the patterns were written for); cue words by
containment in `lower(body)` (DuckDB lower-cases one code point to one, as Go does: `İ` -> `i`);
aggregates by GROUP BY and ORDER BY ... LIMIT 10 on instants, ties broken by the higher number.

Timestamps: DuckDB's TIMESTAMPTZ holds microseconds, so the sort adds the fraction's digits
(padded to nanoseconds) as a second key; an instant is then compared exactly.

Counters: `tool_calls` is the number of SQL statements DuckDB executed; no model is called.
"""

from __future__ import annotations

from pathlib import Path

from microctx.contract.digests import file_sha256
from microctx.contract.patterns import CUE_WORDS
from microctx.contract.schemas import SUBMISSION_SCHEMA

REFERENCE_RE2 = r"(?i)(?:^|[^[:alnum:]_])#([0-9]{1,7})\b"
DUPLICATE_RE2 = r"(?i)\b(?:duplicate(?:s|d)?(?:\s+of)?|supersede[sd]?\s+by)\s+#([0-9]{1,7})\b"

_RECORD_TYPE = (
    "STRUCT(id VARCHAR, split VARCHAR, number BIGINT, title VARCHAR, body VARCHAR, "
    "created_at VARCHAR, updated_at VARCHAR, state VARCHAR, labels VARCHAR[], closed_at VARCHAR)[]"
)


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _numbers(column: str, pattern: str) -> str:
    """SQL: the sorted unique positive integers captured by `pattern` in `column`."""
    return (
        f"list_sort(list_distinct(list_filter(list_transform(regexp_extract_all({column}, {_sql_string(pattern)}, 1), "
        f"lambda x: CAST(x AS BIGINT)), lambda x: x > 0)))"
    )


def _instant_order(column: str) -> str:
    """SQL ORDER BY keys for an RFC 3339 column, latest first, exact to the nanosecond."""
    fraction = f"rpad(coalesce(nullif(regexp_extract({column}, '\\.([0-9]+)', 1), ''), ''), 9, '0')"
    return f"CAST({column} AS TIMESTAMPTZ) DESC, {fraction} DESC, number DESC"


LOAD_SQL = """
CREATE TABLE records AS
SELECT rec.id, rec.split, rec.number, rec.title, rec.body, rec.created_at, rec.updated_at, rec.state, rec.labels
FROM (SELECT unnest(records) AS rec FROM read_json({path}, columns = {{records: '{record_type}'}},
                                                    maximum_object_size = {max_size}))
"""

ANSWERS_SQL = f"""
SELECT id, split, state, coalesce(labels, []::VARCHAR[]) AS labels,
       {_numbers("title || chr(10) || body", REFERENCE_RE2)} AS refs,
       {_numbers("title || chr(10) || body", DUPLICATE_RE2)} AS dups,
       list_filter([{", ".join(f"CASE WHEN contains(lower(body), '{w}') THEN '{w}' END" for w in CUE_WORDS)}],
                   lambda w: w IS NOT NULL) AS cues
FROM records
ORDER BY number
"""

STATE_COUNTS_SQL = "SELECT state, count(*) FROM records GROUP BY state ORDER BY state"
LABEL_COUNTS_SQL = """
SELECT label, count(*) FROM (SELECT unnest(labels) AS label FROM records) GROUP BY label ORDER BY label
"""
NEWEST_SQL = f"SELECT id FROM records ORDER BY {_instant_order('created_at')} LIMIT 10"
UPDATED_SQL = f"SELECT id FROM records ORDER BY {_instant_order('updated_at')} LIMIT 10"


def answer_corpus(public_path: str, *, threads: int = 1) -> tuple[dict, int]:
    """Run the queries over a public corpus file; returns (submission dict, statements executed)."""
    import duckdb

    path = Path(public_path)
    con = duckdb.connect(
        config={"threads": int(threads), "autoload_known_extensions": False, "autoinstall_known_extensions": False}
    )
    statements = 0

    def query(sql: str) -> list[tuple]:
        nonlocal statements
        statements += 1
        return con.execute(sql).fetchall()

    query(LOAD_SQL.format(path=_sql_string(str(path)), record_type=_RECORD_TYPE, max_size=max(path.stat().st_size + 1, 16 << 20)))
    answers = [
        {
            "id": rid,
            "split": split,
            "state": state,
            "labels": labels,
            "references": refs,
            "duplicate_targets": dups,
            "scope_contradictions": cues,
        }
        for rid, split, state, labels, refs, dups, cues in query(ANSWERS_SQL)
    ]
    aggregates = {
        "state_counts": dict(query(STATE_COUNTS_SQL)),
        "label_counts": dict(query(LABEL_COUNTS_SQL)),
        "newest_issue_ids": [rid for (rid,) in query(NEWEST_SQL)],
        "most_recently_updated_issue_ids": [rid for (rid,) in query(UPDATED_SQL)],
    }
    con.close()
    digest = file_sha256(path)
    return {"schema": SUBMISSION_SCHEMA, "corpus_sha256": digest, "answers": answers, "aggregates": aggregates}, statements


def run(public_path: str, output_path: str, *, devkit_path: str | None = None, params: dict | None = None) -> dict:
    """Candidate entry point (see microctx.candidates.registry): write the submission, return the counters."""
    from microctx.contract.canonical import dumps

    submission, statements = answer_corpus(public_path, **(params or {}))
    Path(output_path).write_bytes(dumps(submission))  # in the run folder; the runner publishes it atomically
    return {"model_calls": 0, "tool_calls": statements, "input_tokens": 0, "output_tokens": 0}
