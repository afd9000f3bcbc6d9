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
refused with a line naming the rule.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from microctx.errors import InputError

MARKER = "[redacted:public-corpus]"


PATTERN_MEMORY = 8 << 20  # bytes RE2 may use for one compiled pattern


@dataclass(frozen=True)
class Rule:
    pattern: Any  # an re2 pattern (same subn as re's)
    replacement: str


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


def load_rules(path: str | os.PathLike) -> list[Rule]:
    """Read a TOML redaction map (`[[rule]]` tables with `pattern` and `replacement`)."""
    import tomllib

    from microctx._io.jsonio import read_bytes

    data = read_bytes(path)
    try:
        document = tomllib.loads(data.decode())
    except RecursionError:
        raise InputError(path, "not valid TOML: nested too deeply") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"not valid TOML: {exc}") from None
    extra = set(document) - {"rule"}
    if extra:
        raise InputError(path, f"unknown top-level keys {sorted(extra)}; expected [[rule]] tables")
    tables = document.get("rule", [])
    if not isinstance(tables, list):
        raise InputError(path, f"expected [[rule]] tables, got {_toml_type(tables)}", field="rule")
    rules = []
    for i, table in enumerate(tables):
        if not isinstance(table, dict):
            raise InputError(path, f"expected a table with pattern and replacement, got {_toml_type(table)}", record=f"rule {i}")
        extra = set(table) - {"pattern", "replacement"}
        if extra:
            raise InputError(path, f"unknown keys {sorted(extra)}; a rule has pattern and replacement", record=f"rule {i}")
        for key in ("pattern", "replacement"):
            if not isinstance(table.get(key), str):
                raise InputError(path, "expected a string", record=f"rule {i}", field=key)
        try:
            compiled = compile_pattern(table["pattern"])
        except Exception as exc:  # re2.error, and a pattern over its memory limit
            reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
            raise InputError(
                path, f"invalid regular expression (RE2, linear time): {reason}", record=f"rule {i}", field="pattern"
            ) from None
        rules.append(Rule(compiled, table["replacement"]))
    return rules


def _toml_type(value: object) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer", float: "a float"}.get(
        type(value), type(value).__name__
    )


def _literal(text: str) -> Callable[[Any], str]:
    """A replacement function, so the replacement text is literal (no group references)."""
    return lambda _match: text


def scrub(title: str, body: str, rules: Sequence[Rule]) -> Scrubbed:
    """Apply every rule to the title, then every rule to the body."""
    matches = body_matches = 0
    for rule in rules:
        title, n = rule.pattern.subn(_literal(rule.replacement), title)
        matches += n
    for rule in rules:
        body, n = rule.pattern.subn(_literal(rule.replacement), body)
        body_matches += n
    touched = body_matches > 0 or MARKER in title or MARKER in body
    return Scrubbed(title, body, matches + body_matches, touched)
