"""How results show themselves in a notebook: short reprs and small HTML views.

Typing a result in a JupyterLab cell must show what it is (counts, digests, a verdict, a few
rows), never the whole document. The helpers here build that HTML from plain Python values: no
pandas, no notebook machinery, so every stage can use them.

`Summary` is the one-line summary every result carries as `.summary`: a string that can also be
called (`result.summary()`), so both spellings read the same thing.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

MAX_ROWS = 5  # records shown in an HTML view
MAX_CELL = 80  # characters of a text cell


class Summary(str):
    """A one-line summary; `s()` returns the string itself (older code called `summary()`)."""

    __slots__ = ()

    def __call__(self) -> str:
        return str(self)


def short(text: object, limit: int = MAX_CELL) -> str:
    """`text` on one line, cut to `limit` characters with an ellipsis."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def short_digest(digest: str) -> str:
    """`0740c911…f173827`: enough of a SHA-256 to recognise it."""
    return digest if len(digest) <= 16 else f"{digest[:8]}…{digest[-7:]}"


def verdict_html(ok: bool, yes: str = "passed", no: str = "failed") -> str:
    color = "#2e7d32" if ok else "#c62828"
    return f'<b style="color:{color}">{html.escape(yes if ok else no)}</b>'


def table_html(header: Sequence[str], rows: Iterable[Sequence[object]], *, total: int | None = None) -> str:
    """A small HTML table; `total` (the number of rows there are) adds a "first n of total" caption."""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(short(cell))}</td>" for cell in row) + "</tr>" for row in rows)
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    caption = ""
    if total is not None:
        shown = body.count("<tr>")
        caption = (
            f"<caption style='caption-side:bottom;text-align:left'>first {shown} of {total:,}</caption>" if shown < total else ""
        )
    return f'<table class="microctx-rows">{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def fields_html(items: Iterable[tuple[str, object]]) -> str:
    """A two-column key/value table; values are escaped unless already marked as HTML (`Markup`)."""
    cells = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
        f"{v if isinstance(v, Markup) else html.escape(str(v))}</td></tr>"
        for k, v in items
    )
    return f'<table class="microctx-fields">{cells}</table>'


class Markup(str):
    """A string that is already HTML (not escaped again by `fields_html`)."""

    __slots__ = ()


def card_html(title: str, *parts: str) -> str:
    """A titled block: the title, then each HTML part."""
    return (
        f'<div class="microctx-view"><div style="font-weight:bold;margin-bottom:4px">{html.escape(title)}</div>'
        + "".join(parts)
        + "</div>"
    )


def counts_text(counts: dict[str, int]) -> str:
    """`train 212 / tune 108 / test 680`"""
    return " / ".join(f"{k} {v:,}" for k, v in counts.items())
