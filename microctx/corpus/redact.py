"""Redaction: an ordered list of case-insensitive pattern -> literal replacement rules.

Rules come from a TOML file:

    [[rule]]
    pattern = "internal\\.example\\.com"
    replacement = "[redacted:public-corpus]"

and are applied to every title, then every body, rule after rule. There are no rules by default.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from microctx.errors import InputError

MARKER = "[redacted:public-corpus]"


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern
    replacement: str


@dataclass
class Scrubbed:
    title: str
    body: str
    matches: int  # matches replaced in title and body
    touched: bool  # body had a match, or title/body now carries the marker


def load_rules(path: str | os.PathLike) -> list[Rule]:
    """Read a TOML redaction map (`[[rule]]` tables with `pattern` and `replacement`)."""
    import tomllib

    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
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
            compiled = re.compile(table["pattern"], re.IGNORECASE)
        except re.error as exc:
            raise InputError(path, f"invalid regular expression: {exc}", record=f"rule {i}", field="pattern") from None
        rules.append(Rule(compiled, table["replacement"]))
    return rules


def _toml_type(value: object) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean", int: "an integer", float: "a float"}.get(
        type(value), type(value).__name__
    )


def _literal(text: str) -> Callable[[re.Match[str]], str]:
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
