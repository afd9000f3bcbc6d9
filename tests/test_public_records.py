"""Public corpus records read back as raw issues: the quick check and the field-by-field one agree."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from microctx.corpus import public
from microctx.errors import InputError


@pytest.fixture(scope="module")
def records(s8f) -> list[dict]:
    return orjson.loads(Path(s8f.public).read_bytes())["records"]


def test_well_formed_records_give_the_same_issue_both_ways(records):
    for index, record in enumerate(records):
        quick = public._plain_record(record)
        assert quick is not None, record["id"]
        assert quick == public._checked_record(record, index, "public.json")
        assert quick == public.corpus_to_issues({"records": [record]})[0]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("number", 0, "expected a positive integer"),
        ("number", True, "expected a positive integer"),
        ("number", "5105", "expected a positive integer"),
        ("title", None, "expected a string"),
        ("body_sha256", 1, "expected a string"),
        ("state", "open", "expected OPEN or CLOSED"),
        ("split", "dev", "expected one of"),
        ("labels", ["bug", 1], "expected an array of strings or null"),
        ("labels", "bug", "expected an array of strings or null"),
        ("closed_at", 1, "expected a string or null"),
        ("created_at", "2024-02-30T00:00:00Z", "2024-02-30"),
        ("updated_at", "yesterday", "not an RFC 3339 timestamp"),
    ],
)
def test_a_planted_fault_is_named_by_its_field(records, field, value, message):
    record = {**records[0], field: value}
    assert public._plain_record(record) is None  # the quick check passes nothing it should not
    with pytest.raises(InputError) as caught:
        public.check_corpus_record(record, 7, "public.json")
    assert caught.value.field == field and message in caught.value.message
    assert caught.value.record == f"records[7] ({records[0]['id']})"


def test_a_missing_field_is_named(records):
    record = dict(records[0])
    del record["url"]
    assert public._plain_record(record) is None
    with pytest.raises(InputError) as caught:
        public.check_corpus_record(record, 0, "public.json")
    assert caught.value.field == "url"
