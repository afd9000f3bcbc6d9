"""Fact derivation from issue text, with the semantics of the RE2 patterns of the contract.

Python's `re` differs from RE2 in ways that matter here, each handled explicitly:
- RE2's `\\b`, `[:alnum:]` and `\\s` are ASCII-only and `\\s` excludes the vertical tab, so the
  patterns use re.ASCII and the class `[\\t\\n\\f\\r ]` instead of `\\s`.
- RE2's `(?i)` folds by Unicode simple case folding: `s` also matches U+017F (long s), `k` also
  matches U+212A (Kelvin sign). re.ASCII folds only ASCII, so those two are listed by hand,
  also inside the negated class before `#` (RE2 folds the class first, then negates it).
- Lower-casing for cue words maps one character to one (Go's strings.ToLower): `İ` becomes `i`,
  where Python's str.lower gives `i` plus a combining dot.

The matching runs on UTF-8 bytes: ASCII-only classes and boundaries mean the same on bytes as on
text, a non-ASCII character is never a word character, and lower-casing bytes touches only
ASCII, which is all the cue words and key words need (plus `İ`, rewritten by hand).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# R: (?i)(?:^|[^[:alnum:]_])#([0-9]{1,7})\b  -- kept for reference and tests; `references`
# finds the same matches faster: `#N` anywhere, then the character before it is checked. R's
# consumed preceding character only matters right after a match, where it is a digit and fails
# the check anyway.
REFERENCE = re.compile(r"(?:^|[^0-9A-Za-z_\u017f\u212a])#([0-9]{1,7})\b", re.ASCII)
_HASH_NUMBER = re.compile(rb"#([0-9]{1,7})\b")
_ASCII_WORD = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_LONG_S, _KELVIN = "\u017f".encode(), "\u212a".encode()  # (?i) folds them into the class

# D: (?i)\b(?:duplicate(?:s|d)?(?:\s+of)?|supersede[sd]?\s+by)\s+#([0-9]{1,7})\b
_WS = rb"[\t\n\f\r ]"

CUE_WORDS = ("conflict", "contradict", "disagree", "inconsistent", "mismatch")  # sorted
_CUE_BYTES = tuple((word, word.encode()) for word in CUE_WORDS)
_DOTTED_I = "\u0130".encode()  # İ: Go lower-cases it to i


def issue_text(title: str, body: str) -> str:
    """The text R and D are matched over."""
    return title + "\n" + body


def _dotted_i_to_i(lowered: bytes) -> bytes:
    """Finish Go's lower-casing of ASCII-lowered bytes as far as ASCII words can tell: İ to i."""
    # İ is 0xC4 0xB0; a one-byte search for its rare lead byte is far cheaper than a two-byte one
    return lowered.replace(_DOTTED_I, b"i") if b"\xc4" in lowered and _DOTTED_I in lowered else lowered


def _reference_matches(data: bytes) -> Iterator[re.Match[bytes]]:
    """The `#N` matches of R in `data`, in order (a match's span is the `#N`; N is never 0)."""
    if b"#" not in data:
        return
    word = _ASCII_WORD
    for m in _HASH_NUMBER.finditer(data):
        i = m.start()
        if i:
            before = data[i - 1]
            if before in word:
                continue
            # ſ and K end in bytes 0xBF and 0xAA
            if (before == 0xBF and data.endswith(_LONG_S, 0, i)) or (before == 0xAA and data.endswith(_KELVIN, 0, i)):
                continue
        if int(m.group(1)):
            yield m


def _references(data: bytes) -> list[int]:
    return sorted({int(m.group(1)) for m in _reference_matches(data)})


# D without (?i), for text lower-cased byte for byte (bytes.lower keeps every offset)
_S_LOWER = rb"(?:s|\xc5\xbf)"
_DUPLICATE_LOWER = re.compile(
    rb"\b(?:duplicate(?:"
    + _S_LOWER
    + rb"|d)?(?:"
    + _WS
    + rb"+of)?|"
    + _S_LOWER
    + rb"uper"
    + _S_LOWER
    + rb"ede(?:"
    + _S_LOWER
    + rb"|d)?"
    + _WS
    + rb"+by)"
    + _WS
    + rb"+#([0-9]{1,7})\b"
)


def _duplicate_matches(lowered: bytes) -> Iterator[re.Match[bytes]]:
    """The matches of D in `lowered` (a text lower-cased byte for byte: its offsets are the
    text's), in order; a match's target is never 0.

    Every match of D starts at "duplicate" or at the s (or ſ) before "uper", so D is tried only
    there, in order, resuming after each match as a left-to-right scan does. Trying the pattern
    at every offset of a long text costs far more than finding its few key words.
    """
    pos, end = 0, len(lowered)
    while True:
        start = lowered.find(b"duplicate", pos)
        if start < 0:
            start = end
        j = lowered.find(b"uper", pos + 1)
        while 0 <= j < start:
            if lowered[j - 1] == 0x73:  # s
                start = j - 1
            elif j - 2 >= pos and lowered[j - 2] == 0xC5 and lowered[j - 1] == 0xBF:  # ſ
                start = j - 2
            else:
                j = lowered.find(b"uper", j + 1)
                continue
            break
        if start >= end:
            return
        m = _DUPLICATE_LOWER.match(lowered, start)  # \b still sees the byte before `start`
        if m is None:
            pos = start + 1
        else:
            if int(m.group(1)):
                yield m
            pos = m.end()


def _duplicate_targets(lowered: bytes) -> list[int]:
    """Targets of D in a text; `lowered` is its `bytes.lower()` (same length, same offsets)."""
    return sorted({int(m.group(1)) for m in _duplicate_matches(lowered)})


def references(text: str) -> list[int]:
    """Every `#N` of pattern R, as sorted unique positive integers."""
    return _references(text.encode())


def duplicate_targets(text: str) -> list[int]:
    """Every target of pattern D, as sorted unique positive integers."""
    data = text.encode()
    return _duplicate_targets(data.lower()) if b"#" in data else []


def scope_contradictions(body: str) -> list[str]:
    """The cue words that occur as substrings of the lower-cased body, sorted."""
    lowered = _dotted_i_to_i(body.encode().lower())
    return [word for word, encoded in _CUE_BYTES if encoded in lowered]


def go_lower(text: str) -> str:
    """Lower-case one character to one character, as Go's strings.ToLower does."""
    return text.replace("\u0130", "i").lower() if not text.isascii() else text.lower()


def derive_utf8(title: bytes, body: bytes) -> tuple[list[int], list[int], list[str]]:
    """References, duplicate targets and cue words from UTF-8 title and body, lower-casing once."""
    lowered_body = body.lower()
    cue_body = _dotted_i_to_i(lowered_body)
    cues = [word for word, encoded in _CUE_BYTES if encoded in cue_body]
    text = title + b"\n" + body
    refs = _references(text)
    # a duplicate target is a reference too, so without references there is nothing to find
    dups = _duplicate_targets(title.lower() + b"\n" + lowered_body) if refs else []
    return refs, dups, cues


def spans_utf8(title: bytes, body: bytes) -> list[tuple[int, int, str]]:
    """Where `derive_utf8` finds what it derives, as byte spans (start, end, kind) of
    `title + b"\n" + body`, by the same matchers: "dup" a whole match of D, "ref" the `#N` of a
    match of R, "cue" each occurrence of a cue word in the body. Sorted by start, the longer
    first: a D match holds the R match of its `#N`; cue words overlap neither."""
    text = title + b"\n" + body
    found = [(m.start(), m.end(), "ref") for m in _reference_matches(text)]
    if found:
        found += [(m.start(), m.end(), "dup") for m in _duplicate_matches(text.lower())]
    lowered = body.lower()
    folded = _dotted_i_to_i(lowered)
    dotted = [i for i in range(len(lowered) - 1) if lowered[i : i + 2] == _DOTTED_I] if folded is not lowered else []
    start = len(title) + 1
    for _word, encoded in _CUE_BYTES:
        at = folded.find(encoded)
        while at >= 0:  # back to the body's offsets: each İ before a byte made it one shorter
            a, b = _unfold(at, dotted), _unfold(at + len(encoded), dotted)
            found.append((start + a, start + b, "cue"))
            at = folded.find(encoded, at + len(encoded))
    return sorted(found, key=lambda span: (span[0], -span[1]))


def _unfold(offset: int, dotted: list[int]) -> int:
    """An offset of the İ-folded bytes as an offset of the bytes (`dotted`: where each İ stood)."""
    for n, i in enumerate(dotted):
        if i - n >= offset:
            return offset + n
    return offset + len(dotted)


def derive(title: str, body: str) -> tuple[list[int], list[int], list[str]]:
    """References, duplicate targets and cue words of one issue."""
    return derive_utf8(title.encode(), body.encode())
