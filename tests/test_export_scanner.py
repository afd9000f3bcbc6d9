"""The record-by-record export reader yields exactly what parsing the whole file yields."""

from __future__ import annotations

import io

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from microctx._io.jsonscan import IrregularJSON, _scan_array, iter_json_array, read_object_streaming

# Strings full of the characters an object end is looked for by, to plant false candidates.
tricky = st.lists(st.sampled_from(list('}],{[" \\\n:ab') + ["é", '"body"', "},{", "}]"]), max_size=12).map("".join)
record = st.fixed_dictionaries(
    {
        "body": tricky,
        "labels": st.lists(st.fixed_dictionaries({"name": tricky}), max_size=3),
        "number": st.integers(1, 10**6),
    },
    optional={"title": tricky, "nested": st.dictionaries(tricky, tricky, max_size=2)},
)


def scan(data: bytes, block: int, batch: int) -> list:
    return list(_scan_array(io.BytesIO(data), block, batch))


@settings(max_examples=200, deadline=None)
@given(st.lists(record, max_size=12), st.booleans(), st.integers(1, 64), st.integers(1, 200))
def test_scanner_equals_whole_parse(items, indent, block, batch):
    data = orjson.dumps(items, option=orjson.OPT_INDENT_2 if indent else 0)
    assert scan(data, block, batch) == items


@pytest.mark.parametrize("data", [b'[{"a": 1}] x', b'[{"a": 1},]', b'[{"a": "\xff"}]', b'[{"a": 1}', b"[1]", b"{}", b""])
def test_irregular_input_is_left_to_the_whole_parse(data):
    with pytest.raises(IrregularJSON):
        scan(data, 4, 8)


def test_object_with_a_large_array_last(tmp_path, s8f):
    path = tmp_path / "public.json"
    path.write_bytes(open(s8f.public, "rb").read())
    assert read_object_streaming(path, "records") == orjson.loads(path.read_bytes())


@pytest.mark.parametrize(
    "document",
    [
        {"schema": "x", "records": [{"a": 1}], "after": 1},  # a key after the array
        {"records": {"a": 1}},  # not an array
        {"schema": "x"},  # no such key
    ],
)
def test_object_layouts_left_to_the_whole_parse(tmp_path, document):
    path = tmp_path / "doc.json"
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    with pytest.raises(IrregularJSON):
        read_object_streaming(path, "records")


def test_items_holding_many_item_like_objects_are_read_in_linear_work(monkeypatch):
    """The reviewer's slow export: an item holding a list of thousands of objects that start with
    the items' first key made every one of their ends a candidate, each try re-parsing the batch
    (more than 10 minutes for 4.8 MB). After a few misses the objects' ends are found by a scan:
    the same items, with a bounded number of parses."""
    from microctx._io import jsonscan

    items = [{"number": i, "nested": [{"number": j, "body": '},{"number":'} for j in range(3000)]} for i in range(40)]
    data = orjson.dumps(items)
    parses = []
    real = orjson.loads
    monkeypatch.setattr(jsonscan.orjson, "loads", lambda b: parses.append(len(b)) or real(b))
    assert scan(data, 1 << 16, 1 << 12) == items
    assert len(parses) < 60, len(parses)  # about one parse per item (275,355 before, 15 GB parsed)


@settings(max_examples=100, deadline=None)
@given(st.lists(record, min_size=1, max_size=30), st.sampled_from([0, orjson.OPT_INDENT_2]), st.integers(1, 64))
def test_scanning_after_the_first_miss_equals_whole_parse(items, indent, batch):
    """The scan the reader falls back to gives what the whole parse gives (here it starts at the
    first candidate end that does not parse)."""
    from microctx._io import jsonscan

    data = orjson.dumps(items, option=indent)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonscan, "_MAX_MISSES", 1)
        assert scan(data, 16, batch) == items


def test_the_stream_parses_items_as_deep_as_the_file(tmp_path):
    """An item nested to the parser's limit (1,024 levels) in the file: the stream parsed its
    batch one level shallower than the file (an object stream's items two), so it took what a
    whole parse refuses. Now the stream refuses it too (IrregularJSON: the caller's whole parse
    names it), also once it scans object by object; one level less is read by both."""
    from microctx._io.jsonscan import ObjectStream

    def deep(levels: int) -> bytes:  # an item `levels` deep in a top-level array
        return b'{"a": ' + b"[" * (levels - 2) + b"]" * (levels - 2) + b"}"

    nested = b'{"n": [{"a": 1}, {"a": 2}]}'  # ends as items do: 8 of them switch to the scan
    for limit, prefix, suffix, read in (
        (1025, b"[", b"]", lambda p: list(iter_json_array(p))),  # the file 1,025 levels deep
        (1024, b'{"k": 1, "items": [', b"]}", lambda p: list(ObjectStream(p, "items").items())),
    ):
        for items in ([deep(limit)], [nested] * 9 + [deep(limit)]):
            path = tmp_path / "doc.json"
            path.write_bytes(prefix + b",\n".join(items) + suffix)
            with pytest.raises(orjson.JSONDecodeError):
                orjson.loads(path.read_bytes())
            with pytest.raises(IrregularJSON):
                read(path)
            path.write_bytes(prefix + b",\n".join(items[:-1] + [deep(limit - 1)]) + suffix)
            whole = orjson.loads(path.read_bytes())
            expected, got = (whole if prefix == b"[" else whole["items"]), read(path)
            assert len(got) == len(expected) and got[:-1] == expected[:-1] and list(got[-1]) == ["a"]
