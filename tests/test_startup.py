"""Start-up (issue 24): a command builds only its own group of parsers, with the same help as the
whole parser, and loads only what it needs; the CSV writer escapes only chunks that need it."""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from microctx._io.csvout import csv_bytes, escape_cell
from microctx.cli import COMMAND_GROUPS, build_parser


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


def _helps(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, str]:
    """Every parser's help under `parser`, nested ones (`report grade`, `serve admin`) included."""
    out = {prefix: parser.format_help()}
    for name, child in _subparsers(parser).items():
        out.update(_helps(child, f"{prefix} {name}".strip()))
    return out


def test_every_command_is_in_one_group_in_help_order():
    assert list(_subparsers(build_parser())) == [c for commands in COMMAND_GROUPS.values() for c in commands]


def test_a_command_alone_has_the_help_of_the_whole_parser():
    whole = _helps(build_parser())
    for command in _subparsers(build_parser()):
        alone = _helps(build_parser(command))
        mine = {k: v for k, v in alone.items() if k == command or k.startswith(command + " ")}
        assert mine == {k: v for k, v in whole.items() if k == command or k.startswith(command + " ")}, command
        assert len(alone) < len(whole) or command in ("report", "sweep"), command  # built alone (or with its group)
    assert alone[""].splitlines()[0] == whole[""].splitlines()[0]  # the top usage line


def test_grade_builds_only_its_group():
    code = (
        "import sys\nfrom microctx.cli import build_parser\nbuild_parser('grade')\n"
        "print(sorted(m for m in sys.modules if m.startswith('microctx.')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "microctx.cli.core" in loaded
    for other in (
        "microctx.cli.reports",
        "microctx.cli.run",
        "microctx.grading.frontier",
        "microctx.service",
        "microctx.semantic",
    ):
        assert f"'{other}" not in loaded, other


def _escaped_everywhere(header, rows) -> bytes:
    """The writer before chunks were checked: every cell through escape_cell."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([escape_cell(h) for h in header])
    writer.writerows([[escape_cell(v) for v in row] for row in rows])
    return buffer.getvalue().encode()


CELL = st.none() | st.integers(-5, 5) | st.booleans() | st.text(alphabet="ab=+-@\t\r\n',\" ", max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(CELL, min_size=1, max_size=4), max_size=6))
def test_csv_chunks_escape_exactly_as_every_cell_escaped(rows):
    assert csv_bytes(["a", "b"], rows) == _escaped_everywhere(["a", "b"], rows)


def test_a_formula_cell_is_still_escaped():
    assert csv_bytes(["x"], [["ok"], ["=HYPERLINK(1)"], [-1]]) == b"x\nok\n'=HYPERLINK(1)\n-1\n"
