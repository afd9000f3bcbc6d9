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
    return _numbers(REFERENCE, text) if "#" in text else []


def duplicate_targets(text: str) -> list[int]:
    """Every target of pattern D, as sorted unique positive integers."""
    return _numbers(DUPLICATE, text) if "#" in text else []


def go_lower(text: str) -> str:
    """Lower-case one character to one character, as Go's strings.ToLower does."""
    if text.isascii():
        return text.lower()
    return text.replace("\u0130", "i").lower()


def scope_contradictions(body: str) -> list[str]:
    """The cue words that occur as substrings of the lower-cased body, sorted."""
    lowered = go_lower(body)
    return [word for word in CUE_WORDS if word in lowered]
