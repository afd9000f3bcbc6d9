"""Fact derivation from issue text, with the semantics of the RE2 patterns of the contract.

Python's `re` differs from RE2 in three ways that matter here, each handled explicitly:
- RE2's `\\b`, `[:alnum:]` and `\\s` are ASCII-only and `\\s` excludes the vertical tab, so the
  patterns use re.ASCII and the class `[\\t\\n\\f\\r ]` instead of `\\s`.
- RE2's `(?i)` folds by Unicode simple case folding: `s` also matches U+017F (long s), `k` also
  matches U+212A (Kelvin sign). re.ASCII folds only ASCII, so those two are listed by hand,
  also inside the negated class before `#` (RE2 folds the class first, then negates it).
- Lower-casing for cue words maps one character to one (Go's strings.ToLower): `İ` becomes `i`,
  where Python's str.lower gives `i` plus a combining dot.
"""

from __future__ import annotations

import re

# R: (?i)(?:^|[^[:alnum:]_])#([0-9]{1,7})\b
REFERENCE = re.compile(r"(?:^|[^0-9A-Za-z_\u017f\u212a])#([0-9]{1,7})\b", re.ASCII)
# The same matches, found faster: `#N` anywhere, then the character before it is checked. R's
# consumed preceding character only matters right after a match, where it is a digit and fails
# the check anyway, so the two find the same numbers.
_HASH_NUMBER = re.compile(r"#([0-9]{1,7})\b", re.ASCII)
_WORD_BEFORE = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_\u017f\u212a")

# D: (?i)\b(?:duplicate(?:s|d)?(?:\s+of)?|supersede[sd]?\s+by)\s+#([0-9]{1,7})\b
_S = "[s\u017f]"
_WS = "[\t\n\f\r ]"
DUPLICATE = re.compile(
    rf"\b(?:duplicate(?:{_S}|d)?(?:{_WS}+of)?|{_S}uper{_S}ede(?:{_S}|d)?{_WS}+by){_WS}+#([0-9]{{1,7}})\b",
    re.ASCII | re.IGNORECASE,
)

CUE_WORDS = ("conflict", "contradict", "disagree", "inconsistent", "mismatch")  # sorted


def issue_text(title: str, body: str) -> str:
    """The text R and D are matched over."""
    return title + "\n" + body


def _numbers(pattern: re.Pattern, text: str) -> list[int]:
    return sorted({n for n in map(int, pattern.findall(text)) if n > 0})


def references(text: str) -> list[int]:
    """Every `#N` of pattern R, as sorted unique positive integers."""
    if "#" not in text:
        return []
    found = {int(m.group(1)) for m in _HASH_NUMBER.finditer(text)
             if m.start() == 0 or text[m.start() - 1] not in _WORD_BEFORE}
    found.discard(0)
    return sorted(found)


def duplicate_targets(text: str, lowered: str | None = None) -> list[int]:
    """Every target of pattern D, as sorted unique positive integers.

    `lowered` may pass `go_lower(text)` when the caller has it already.
    """
    if "#" not in text:
        return []
    # D needs one of its key words; most texts have none, and the check is far cheaper than D.
    if lowered is None:
        lowered = go_lower(text)
    if "\u017f" in lowered:
        lowered = lowered.replace("\u017f", "s")
    if "duplicate" not in lowered and "upersede" not in lowered:
        return []
    return _numbers(DUPLICATE, text)


def go_lower(text: str) -> str:
    """Lower-case one character to one character, as Go's strings.ToLower does."""
    if text.isascii():
        return text.lower()
    return text.replace("\u0130", "i").lower()


def scope_contradictions(body: str) -> list[str]:
    """The cue words that occur as substrings of the lower-cased body, sorted."""
    lowered = go_lower(body)
    return [word for word in CUE_WORDS if word in lowered]


def derive(title: str, body: str) -> tuple[list[int], list[int], list[str]]:
    """References, duplicate targets and cue words of one issue, lower-casing its text once.

    go_lower maps one character to one, so the body's part of the lower-cased text starts right
    after the title and the newline.
    """
    text = issue_text(title, body)
    lowered = go_lower(text)
    start = len(title) + 1
    cues = [word for word in CUE_WORDS if lowered.find(word, start) >= 0]
    return references(text), duplicate_targets(text, lowered), cues
