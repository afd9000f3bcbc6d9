"""Redaction: an ordered list of case-insensitive pattern -> literal replacement rules.

Rules come from a TOML file:

    [[rule]]
    pattern = "internal\\.example\\.com"
    replacement = "[redacted:public-corpus]"

and are applied to every title, then every body, rule after rule. There are no rules by default.

Patterns are compiled with RE2 (`google-re2`), the linear-time engine the contract's patterns
follow: matching a body costs time in proportion to its length whatever the pattern, so a rule
such as `(a+)+$` cannot hang a freeze on an issue body anyone can write (ReDoS); a pattern RE2
cannot compile (a back-reference, a look-around) or whose program needs more than 8 MiB is
refused with a line naming the rule. A rule may match at most MAX_MATCHES times in one title
or body (a body written to be nothing but matches would otherwise grow by the replacement's
length each time); past it the freeze stops with a line naming the record and the rule.

The map is a declared type (`RedactionMap`), read through `microctx.contract.declared` like
SWEEP.toml: a wrong key or type is one line naming the file, the key and what was expected.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec

from microctx.errors import InputError

MARKER = "[redacted:public-corpus]"


PATTERN_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern


MAX_MATCHES = 10_000  # matches of one rule in one title or body; past it the freeze stops (exit 2)
MAX_REPLACEMENT = 1_000  # characters of a replacement: with MAX_MATCHES, bounds how much a body can grow


@dataclass(frozen=True)
class Rule:
    pattern: Any  # an re2 pattern (same subn as re's)
    replacement: str
    source: str = "the redaction rules"  # the map's file, for messages


def compile_pattern(text: str) -> Any:
    """`text` compiled case-insensitively with RE2, or re2.error (with no log line on stderr)."""
    import re2

    options = re2.Options()
    options.case_sensitive = False
    options.max_mem = PATTERN_MEMORY
    options.log_errors = False
    return re2.compile(text, options)


@dataclass
class Scrubbed:
    title: str
    body: str
    matches: int  # matches replaced in title and body
    touched: bool  # body had a match, or title/body now carries the marker


class RuleTable(msgspec.Struct, forbid_unknown_fields=True):
    """One `[[rule]]` table of the map, as declared."""

    pattern: str
    replacement: Annotated[str, msgspec.Meta(max_length=MAX_REPLACEMENT)]


class RedactionMap(msgspec.Struct, forbid_unknown_fields=True):
    """The redaction map file: `[[rule]]` tables, in order (none: no rules)."""

    rule: list[RuleTable] = msgspec.field(default_factory=list)


WHAT = "the redaction map: [[rule]] tables with a pattern and a replacement string"


def load_rules(path: str | os.PathLike[str]) -> list[Rule]:
    """Read a TOML redaction map (`[[rule]]` tables with `pattern` and `replacement`) through the
    declared-configuration path (`microctx.contract.declared`): every problem is one InputError
    naming the file, the key (`rule[0].pattern`) and what was expected."""
    from microctx.contract.declared import load_declared

    document: RedactionMap = load_declared(path, RedactionMap, WHAT)[0]
    rules = []
    for i, table in enumerate(document.rule):
        try:
            compiled = compile_pattern(table.pattern)
        except Exception as exc:  # re2.error, and a pattern over its memory limit
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise InputError(
                path, f"invalid regular expression (RE2, linear time): {reason}", field=f"rule[{i}].pattern"
            ) from None
        rules.append(Rule(compiled, table.replacement, os.fspath(path)))
    return rules


def _literal(text: str) -> Callable[[Any], str]:
    """A replacement function, so the replacement text is literal (no group references)."""
    return lambda _match: text


def _apply(rule: Rule, index: int, text: str, record: object) -> tuple[str, int]:
    """`text` with `rule` applied, and its number of matches; past MAX_MATCHES an InputError naming
    the record and the rule's pattern (RE2 stops scanning at the first match past the limit)."""
    replaced, n = rule.pattern.subn(_literal(rule.replacement), text, count=MAX_MATCHES + 1)
    if n > MAX_MATCHES:
        raise InputError(
            rule.source,
            f"the pattern matches more than {MAX_MATCHES:,} times in one title or body, past the limit per body; "
            "narrow the pattern",
            record=record,
            field=f"rule[{index}].pattern",
        )
    return replaced, n


def scrub(title: str, body: str, rules: Sequence[Rule], record: object = None) -> Scrubbed:
    """Apply every rule to the title, then every rule to the body; `record` names the issue in
    the error a rule matching past MAX_MATCHES times in one text raises."""
    matches = body_matches = 0
    for index, rule in enumerate(rules):
        title, n = _apply(rule, index, title, record)
        matches += n
    for index, rule in enumerate(rules):
        body, n = _apply(rule, index, body, record)
        body_matches += n
    touched = body_matches > 0 or MARKER in title or MARKER in body
    return Scrubbed(title, body, matches + body_matches, touched)
