"""Canonical JSON bytes and SHA-256 digests, byte-compatible with the published s8f artifacts.

The published tool wrote JSON as Go's encoder does: two-space indentation, `"key": value`,
a final newline, raw UTF-8, HTML-safe escapes for `<`, `>`, `&`, and escaped U+2028/U+2029.
orjson writes the same layout except for those five escapes, which are patched in here.
Key order is the order of the dicts handed in: callers build dicts in contract order and sort
maps themselves.
"""

from __future__ import annotations

import hashlib
from typing import Iterable, Iterator

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
    for raw, escaped in _ESCAPES:
        if raw in data:
            data = data.replace(raw, escaped)
    return data


def dumps(value: object) -> bytes:
    """The canonical bytes of a JSON value, final newline included."""
    return _escape(orjson.dumps(value, option=orjson.OPT_INDENT_2)) + b"\n"


def iter_dumps(document: dict, list_key: str) -> Iterator[bytes]:
    """The canonical bytes of `document` in chunks, one per item of `document[list_key]`.

    Joining the chunks gives exactly `dumps(document)`; streaming them keeps a large corpus
    from being held twice in memory. Chunks split only between items, never inside a string.
    """
    items = document[list_key]
    if not items:
        yield dumps(document)
        return
    shell = dict(document)
    shell[list_key] = [_PLACEHOLDER]
    head, tail = dumps(shell).split(_PLACEHOLDER_JSON)
    yield head + b"[\n"
    last = len(items) - 1
    for i, item in enumerate(items):
        chunk = b"    " + _escape(orjson.dumps(item, option=orjson.OPT_INDENT_2)).replace(b"\n", b"\n    ")
        yield chunk + (b",\n" if i < last else b"\n")
    yield b"  ]" + tail


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest_chunks(chunks: Iterable[bytes], needles: Iterable[bytes] = ()) -> tuple[str, set[bytes]]:
    """SHA-256 of the concatenated chunks, and which needles occur in them.

    Needles are looked for within chunks; `iter_dumps` never splits a key or a string, so a
    needle that is a quoted key or a digest is found whenever it occurs in the whole text.
    """
    digest = hashlib.sha256()
    wanted = list(needles)
    found: set[bytes] = set()
    for chunk in chunks:
        digest.update(chunk)
        for needle in wanted:
            if needle not in found and needle in chunk:
                found.add(needle)
    return digest.hexdigest(), found
