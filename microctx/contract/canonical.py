"""Canonical JSON bytes and SHA-256 digests, byte-compatible with the published s8f artifacts.

The published tool wrote JSON as Go's encoder does: two-space indentation, `"key": value`,
a final newline, raw UTF-8, HTML-safe escapes for `<`, `>`, `&`, and escaped U+2028/U+2029.
orjson writes the same layout except for those five escapes, which are patched in here.
Key order is the order of the dicts handed in: callers build dicts in contract order and sort
maps themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)
_PLACEHOLDER = "\x00microctx-items\x00"
_PLACEHOLDER_JSON = b'[\n    "\\u0000microctx-items\\u0000"\n  ]'


def _escape(data: bytes) -> bytes:
    for raw, escaped in _ESCAPES[:3]:
        if raw in data:
            data = data.replace(raw, escaped)
    # U+2028 and U+2029 end in bytes 0xA8 and 0xA9; one-byte searches are far cheaper than
    # three-byte ones on UTF-8 text, and most text holds neither byte.
    for raw, escaped in _ESCAPES[3:]:
        if raw[2] in data and raw in data:
            data = data.replace(raw, escaped)
    return data


def dumps(value: object) -> bytes:
    """The canonical bytes of a JSON value, final newline included."""
    return _escape(orjson.dumps(value, option=orjson.OPT_INDENT_2)) + b"\n"


def iter_dumps(
    document: dict[str, Any], list_key: str, batch_size: int = 100, copy_keys: tuple[str, ...] = ()
) -> Iterator[bytes]:
    """The canonical bytes of `document` in chunks, one per `batch_size` items of `document[list_key]`.

    Joining the chunks gives exactly `dumps(document)`; streaming them keeps a large corpus
    from being held twice in memory. Chunks split only between items, never inside a string.
    Items' non-ASCII strings under `copy_keys` are encoded from copies (see `_uncached`): pass
    the keys of large texts that stay in memory after encoding.
    """
    items = document[list_key]
    if not items:
        yield dumps(document)
        return
    head, tail = document_parts(document, list_key)
    yield head
    # A batch dumped as the only list of a one-key object comes out indented exactly as the
    # items of the document's list: strip the object's first line and its closing lines.
    cut_head, cut_tail = len(b'{\n  "": [\n'), -len(b"\n  ]\n}")
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        if copy_keys:
            batch = [_uncached(item, copy_keys) for item in batch]
        chunk = _escape(orjson.dumps({"": batch}, option=orjson.OPT_INDENT_2)[cut_head:cut_tail])
        yield chunk + (b",\n" if start + batch_size < len(items) else b"\n")
    yield tail


def document_parts(document: dict[str, Any], list_key: str) -> tuple[bytes, bytes]:
    """The canonical bytes of `document` before and after the items of its (non-empty) list
    `list_key`: head + the items joined by `,\\n` + `\\n` + tail is `dumps(document)`."""
    shell = dict(document)
    shell[list_key] = [_PLACEHOLDER]
    head, tail = dumps(shell).split(_PLACEHOLDER_JSON)
    return head + b"[\n", b"  ]" + tail


_ITEM_HEAD, _ITEM_TAIL = len(b'{\n  "": [\n    {\n'), -len(b"\n    }\n  ]\n}")


def item_fields(fields: dict[str, Any], copy_keys: tuple[str, ...] = ()) -> bytes:
    """The canonical lines of `fields` as the keys of an item of a document's list (indented six
    spaces, no braces, no final newline): `item_bytes` puts them into an item. Non-ASCII strings
    under `copy_keys` are encoded from copies (see `_uncached`)."""
    item = _uncached(fields, copy_keys) if copy_keys else fields
    return _escape(orjson.dumps({"": [item]}, option=orjson.OPT_INDENT_2)[_ITEM_HEAD:_ITEM_TAIL])


def item_bytes(first_lines: bytes, fields: bytes) -> bytes:
    """An item of a document's list, as `iter_dumps` writes it: `first_lines` (whole lines, each
    ending in `,\\n`, already canonical) then `fields` (from `item_fields`), in braces."""
    return b"    {\n" + first_lines + fields + b"\n    }"


def _uncached(item: object, keys: tuple[str, ...]) -> object:
    """`item`, with its non-ASCII strings under `keys` copied when it is a dict.

    orjson keeps a UTF-8 copy inside every non-ASCII str it encodes (CPython's UTF-8 cache),
    which would more than double the memory of a corpus's titles and bodies after one encode.
    Encoding short-lived copies leaves the originals as they were.
    """
    if type(item) is not dict:
        return item
    copy = None
    for key in keys:
        value = item.get(key)
        if type(value) is str and not value.isascii():
            if copy is None:
                copy = dict(item)
            copy[key] = "".join((value, ""))  # a new str object: join of two never returns an input
    return item if copy is None else copy
