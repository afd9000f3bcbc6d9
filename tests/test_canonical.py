"""Canonical JSON bytes and timestamps, as the published artifacts write them."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from microctx.contract.canonical import dumps, iter_dumps
from microctx.contract.timestamps import parse_timestamp, utc_second


def test_escapes_and_layout():
    value = {"b": '<a & b> \u2028\u2029 \x0c\x01\x7f é 日 "q" \\', "a": [], "c": {}, "d": None, "e": [1, True]}
    assert (
        dumps(value)
        == (
            '{\n  "b": "\\u003ca \\u0026 b\\u003e \\u2028\\u2029 \\f\\u0001\x7f é 日 \\"q\\" \\\\",\n'
            '  "a": [],\n  "c": {},\n  "d": null,\n  "e": [\n    1,\n    true\n  ]\n}\n'
        ).encode()
    )


@given(
    st.lists(
        st.dictionaries(st.sampled_from(["x", "y<", "z"]), st.text(max_size=20) | st.integers(-(2**63), 2**63 - 1) | st.none()),
        max_size=5,
    ),
    st.text(max_size=10),
)
def test_streamed_chunks_equal_whole_document(items, head):
    document = {"schema": head, "records": items, "tail": {"k": [head]}}
    assert b"".join(iter_dumps(document, "records")) == dumps(document)
    assert json.loads(dumps(document)) == document


@pytest.mark.parametrize(
    "text,canonical",
    [
        ("2026-08-10T05:11:04Z", "2026-08-10T05:11:04Z"),
        ("2026-08-10T05:11:04+00:00", "2026-08-10T05:11:04Z"),
        ("2026-08-10T05:11:04-00:00", "2026-08-10T05:11:04Z"),
        ("2026-08-10T07:11:04+02:00", "2026-08-10T07:11:04+02:00"),
        ("2026-08-10T05:11:04.500000000Z", "2026-08-10T05:11:04.5Z"),
        ("2026-08-10T05:11:04.000Z", "2026-08-10T05:11:04Z"),
        ("2026-08-10t05:11:04.123456789z", "2026-08-10T05:11:04.123456789Z"),
    ],
)
def test_timestamps_keep_offset_and_trim_fraction(text, canonical):
    assert parse_timestamp(text).text == canonical


def test_instants_compare_across_offsets():
    a = parse_timestamp("2026-08-10T07:11:04.9+02:00")
    b = parse_timestamp("2026-08-10T05:11:04Z")
    assert a.instant_ns - b.instant_ns == 900_000_000
    assert utc_second(a.instant_ns) == "2026-08-10T05:11:04Z"  # frozen_at: UTC, fraction truncated


@pytest.mark.parametrize(
    "text",
    [
        "2026-08-10 05:11:04Z",
        "2026-02-30T00:00:00Z",
        "2026-08-10T24:00:00Z",
        "2026-08-10T05:11:04",
        "2026-08-10T05:11:04+24:00",
        "2026-08-10T05:11:04.1234567890Z",
    ],
)
def test_invalid_timestamps(text):
    with pytest.raises(ValueError):
        parse_timestamp(text)
