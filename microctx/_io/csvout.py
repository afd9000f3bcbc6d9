"""Every CSV microctx writes, through one writer: text cells a spreadsheet could run as a formula
are written as text.

A cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return is a formula to Excel,
LibreOffice and Google Sheets (`=HYPERLINK(...)` in a candidate's version, a grid value, a label);
such a text cell is written with a leading `'`, which spreadsheets read as "this is text" and do
not show. A text cell that already starts with `'` followed by one of those characters gets one
more `'`, so `unescape_cell` gives back exactly what was written. Numbers (int, float, bool) are
written as they are: `-0.5` is a number, not a formula. Every other cell is unchanged, so a
table without such text (the s8f fact table) is byte for byte what csv.writer gives.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def escape_cell(value: Any) -> Any:
    """`value` as a CSV cell: text that a spreadsheet would run gets a leading `'`; None is ""."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_START) or (value.startswith("'") and value[1:2] and value[1:].startswith(FORMULA_START)):
        return "'" + value
    return value


def unescape_cell(value: Any) -> Any:
    """The text `escape_cell` was given (the inverse on strings; anything else unchanged)."""
    if isinstance(value, str) and value.startswith("'") and value[1:].startswith((*FORMULA_START, "'")):
        rest = value[1:]
        if rest.startswith(FORMULA_START) or (rest.startswith("'") and rest[1:].startswith(FORMULA_START)):
            return rest
    return value


def csv_bytes(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> bytes:
    """A CSV table (header, then rows; `\\n` line ends) with every cell through `escape_cell`."""
    return b"".join(csv_chunks(header, rows))


def csv_chunks(header: Sequence[str], rows: Iterable[Sequence[Any]], rows_per_chunk: int = 10_000) -> Iterator[bytes]:
    """The bytes of `csv_bytes(header, rows)` in chunks of `rows_per_chunk` rows (a large table is
    never held whole, as text or as bytes). A chunk is written as it is first; only when some cell
    of it may start with a formula character (`_MAYBE_FORMULA`, a superset) is it written again
    with every cell through `escape_cell`, which leaves every other cell as csv writes it (None
    as "")."""
    head = _csv_text([[escape_cell(h) for h in header]])
    iterator = iter(rows)
    while True:
        batch = list(islice(iterator, rows_per_chunk))
        text = _csv_text(batch)
        if _MAYBE_FORMULA.search(text):
            text = _csv_text([[escape_cell(v) for v in row] for row in batch])
        yield (head + text).encode()
        if len(batch) < rows_per_chunk:
            return
        head = ""


# where a cell's text may start with a formula character or `'`: at a line's start or after a
# comma, after the opening quote of a quoted cell (a cell starting with `\r` is quoted)
_MAYBE_FORMULA = re.compile("(?:^|,)\"?[=+\\-@\t\r']", re.M)


def _csv_text(rows: Iterable[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    return buffer.getvalue()


def frame_csv_bytes(frame: Any) -> bytes:
    """A pandas DataFrame as CSV (no index, `\\n` line ends, floats at full precision), its text
    cells through `escape_cell`; numeric columns are written by pandas as they are."""
    escaped = frame.copy()
    for column in escaped.columns:
        if escaped[column].dtype.kind == "O":  # object and pandas' string dtypes ("str")
            escaped[column] = escaped[column].map(escape_cell)
    return escaped.to_csv(index=False, lineterminator="\n").encode()


def columns_csv_bytes(columns: dict[str, Any]) -> bytes:
    """A table of columns (name -> numpy array or list) as CSV, byte for byte as `frame_csv_bytes`
    writes the same table as a DataFrame, without pandas: float arrays as numpy's shortest repr
    (as pandas writes them; NaN empty), int and bool arrays as Python writes them, every other
    cell (text) through `escape_cell`."""
    cells = []
    for values in columns.values():
        kind = getattr(getattr(values, "dtype", None), "kind", "O")
        if kind == "f":
            text = values.astype(str)
            text[values != values] = ""  # NaN
            cells.append(text.tolist())
        elif kind in "biu":
            cells.append(values.tolist())
        else:
            cells.append([escape_cell(v) for v in values])
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([escape_cell(h) for h in columns])
    writer.writerows(zip(*cells, strict=True))
    return buffer.getvalue().encode()


def unescape_frame(frame: Any) -> Any:
    """A DataFrame read from one of our CSVs with its text cells as they were before escaping."""
    for column in frame.columns:
        if frame[column].dtype.kind == "O":  # object and pandas' string dtypes ("str")
            frame[column] = frame[column].map(unescape_cell)
    return frame
