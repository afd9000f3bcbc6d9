"""The documentation against the code: every `microctx COMMAND ... --option` written in the README
or docs/ names a command and options that the CLI's parser has, and the README stays a front door
(at most about 150 lines, linking only to pages that exist)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _commands() -> dict[str, set[str]]:
    """'grade' -> its options; 'report grade' -> its options (subcommands of subcommands too)."""
    from microctx.cli import build_parser

    found: dict[str, set[str]] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    key = f"{prefix} {name}".strip()
                    found[key] = {s for a in child._actions for s in a.option_strings}
                    walk(child, key)

    walk(build_parser(), "")
    return found


def _invocations() -> list[tuple[str, str]]:
    """(page, command line) for each `microctx ...` written as a command (code blocks and spans)."""
    lines = []
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"(?m)(?:^\s{4}|`)(microctx [^`\n#]*)", text):
            lines.append((page.name, match.group(1)))
    return lines


def test_every_documented_option_exists():
    commands = _commands()
    wrong = []
    for page, line in _invocations():
        words = line.split()[1:]
        if not words or not re.fullmatch(r"[a-z][a-z-]*", words[0]) or words[0] not in commands:
            continue  # `microctx.grade(...)`, prose
        key, depth = words[0], 1
        while depth < len(words) and f"{key} {words[depth]}" in commands:  # `serve admin add-team`: as deep as it goes
            key, depth = f"{key} {words[depth]}", depth + 1
        known = commands[key]
        if depth < len(words) and words[depth].isupper() and any(k.startswith(key + " ") for k in commands):
            # `microctx report KIND ...`: an option every kind has
            known = set.intersection(*(v for k, v in commands.items() if k.startswith(key + " ")))
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line):
            if option not in known and key != "lab":  # lab passes unknown options to JupyterLab
                wrong.append(f"{page}: `microctx {key}` has no {option}")
    assert not wrong, "\n".join(sorted(set(wrong)))


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+)", text):
        if not target.startswith("http"):
            assert (ROOT / target).is_file(), target
