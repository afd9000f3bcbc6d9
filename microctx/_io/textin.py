"""Reading text inputs at the edges (CSV files, JSON Lines): decoding and CSV rows whose errors name
the file, the record and the field.

A file that is not UTF-8, a CSV cell past the csv module's field limit, a row with fewer or more
cells than the header: each is an InputError (one line, exit 2), never a traceback. A UTF-8 byte
order mark (what spreadsheets put first in a "CSV UTF-8" file) is skipped.
"""

from __future__ import annotations

import csv
import io
import os

from microctx._io.jsonio import read_bytes
from microctx.errors import InputError

BOM = "\ufeff"


def decode_text(data: bytes, path: str | os.PathLike) -> str:
    """`data` as UTF-8 text (a leading byte order mark dropped), or an InputError naming the file
    and where the first byte that is not UTF-8 is."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not valid UTF-8: byte {data[exc.start]:#04x} at offset {exc.start}") from None
    return text[1:] if text.startswith(BOM) else text


def read_text(path: str | os.PathLike) -> str:
    """The input's text (see `microctx._io.jsonio.read_bytes` and `decode_text`)."""
    return decode_text(read_bytes(path), path)


def read_csv_rows(path: str | os.PathLike, required: tuple[str, ...], *, text: str | None = None) -> list[tuple[int, dict]]:
    """The rows of the CSV file `path` (or of `text`, read from it) as (line number, row), every
    column of `required` in its header (in any order, more allowed); each row has exactly the
    header's cells. Anything else is an InputError naming the file, the line and the field."""
    reader = csv.DictReader(io.StringIO(read_text(path) if text is None else text, newline=""))
    try:
        header = reader.fieldnames
    except csv.Error as exc:
        raise InputError(path, f"not valid CSV: {exc}", record=1) from None
    if header is None or not set(required) <= set(header):
        raise InputError(path, f"expected the CSV header {','.join(required)}", field="header")
    rows: list[tuple[int, dict]] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return rows
        except csv.Error as exc:
            raise InputError(path, f"not valid CSV: {exc}", record=reader.reader.line_num) from None
        line = reader.line_num
        if None in row:
            raise InputError(path, f"{len(header) + len(row[None])} cells, the header has {len(header)}", record=line)
        short = [name for name, value in row.items() if value is None]
        if short:
            raise InputError(
                path, f"missing: the row has fewer cells than the header ({len(header)})", record=line, field=short[0]
            )
        rows.append((line, row))
