"""Fact derivation follows RE2's semantics (CONTRACT §4), also on non-ASCII text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from microctx.contract.patterns import (
    REFERENCE,
    derive,
    duplicate_targets,
    go_lower,
    references,
    scope_contradictions,
)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("see #12 and #7.", [7, 12]),
        ("#1#2", [1]),  # the character before # is consumed: no overlap
        ("#5 #5 #0 #000", [5]),  # unique, positive
        ("abc#3 _#4 9#5", []),  # an ASCII letter, digit or underscore before # blocks it
        ("é#6 ü#7 日#8 —#9", [6, 7, 8, 9]),  # non-ASCII letters are not [:alnum:] in RE2
        ("\u212a#10 \u017f#11", []),  # but (?i) folds K (Kelvin) and ſ (long s) into the class
        ("#12é #13_ #14x", [12]),  # \b after the digits is ASCII: é ends a word, _ and x do not
        ("#12345678 #1234567", [1234567]),  # at most seven digits, then a boundary
        ("#\uff11\uff12 #\u0663", []),  # full-width and Arabic-Indic digits are not [0-9]
        ("(#21) [#22] x/#23", [21, 22, 23]),
    ],
)
def test_references(text, expected):
    assert references(text) == expected


@pytest.mark.parametrize(
    "text,expected",
    [
        ("Duplicate of #40", [40]),
        ("duplicates #41, DUPLICATED #42", [41, 42]),
        ("duplicate\x0bof #43", []),  # \v is not \s in RE2
        ("duplicate \x0b#44", []),
        ("duplicate\tof\n\f\r #45", [45]),
        ("superseded by #46; Supersedes  by #47; supersede by #48", [46, 47, 48]),
        ("Superſeded by #49", [49]),  # (?i) folds ſ with s
        ("ſupersedes by #50", []),  # but \b before ſ needs an ASCII word character next to it
        ("noduplicate of #51", []),  # \b before duplicate
        ("duplicate of #\uff15\uff12", []),  # full-width digits
        ("duplicate of #53é", [53]),
        ("title duplicate of", []),
    ],
)
def test_duplicate_targets(text, expected):
    assert duplicate_targets(text) == expected


def test_duplicate_can_span_title_and_body():
    refs, dups, cues = derive("Closing: duplicate of", "#60 covers it")
    assert (refs, dups, cues) == ([60], [60], [])


@pytest.mark.parametrize(
    "body,expected",
    [
        ("A CONFLICT and a Mismatch", ["conflict", "mismatch"]),
        ("\u0130NCONS\u0130STENT results", ["inconsistent"]),  # Go lower-cases İ to i
        ("D\u0130SAGREE", ["disagree"]),
        ("contradiction", ["contradict"]),  # substring
        ("con\u200bflict", []),
        ("ＣＯＮＦＬＩＣＴ", []),  # full-width letters stay full-width
    ],
)
def test_scope_contradictions(body, expected):
    assert scope_contradictions(body) == expected


def test_cue_words_read_body_only():
    assert derive("conflict in title", "nothing here")[2] == []


def test_go_lower_is_one_to_one():
    assert go_lower("\u0130X\u212a") == "ixk"
    assert len(go_lower("\u0130" * 5)) == 5


_alphabet = st.sampled_from(list("#0123456789 aZ_\n\t\x0b-é\u017f\u212a\u0130日１") + ["duplicate", " of ", "superseded by "])


@settings(max_examples=300, deadline=None)
@given(st.lists(_alphabet, max_size=30).map("".join))
def test_references_match_the_reference_pattern(text):
    """The fast scanner finds exactly what pattern R (translated to Python) finds."""
    expected = sorted({int(n) for n in REFERENCE.findall(text)} - {0})
    assert references(text) == expected


_DUP_TEXT = re.compile(
    r"\b(?:duplicate(?:[s\u017f]|d)?(?:[\t\n\f\r ]+of)?|[s\u017f]uper[s\u017f]ede(?:[s\u017f]|d)?[\t\n\f\r ]+by)"
    r"[\t\n\f\r ]+#([0-9]{1,7})\b",
    re.ASCII | re.IGNORECASE,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_alphabet, max_size=30).map("".join))
def test_duplicates_on_bytes_match_the_pattern_on_text(text):
    expected = sorted({int(n) for n in _DUP_TEXT.findall(text)} - {0})
    assert duplicate_targets(text) == expected
