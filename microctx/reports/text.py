"""Text a report shows from data: safe Markdown (`md`), safe links (`safe_url`, `linked`), code
spans that cannot be broken out of (`code_span`), counts with their plural (`plural`).

Presentation only, below `tables` and `views` (both import from here; the notebooks call these
through `tables.md`, `tables.linked`, ... as before)."""

from __future__ import annotations

import re


def plural(count: int, noun: str) -> str:
    """ "1 look", "2 looks", "1,000 records": a count with its noun, plural when it is not one."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def code_span(value: object) -> str:
    """Text for inside a Markdown code span: no backtick to end it early, one line."""
    return " ".join(str(value).replace("`", "'").split())


def linked(table, column: str = "url", text: str = "record_id"):
    """The table as HTML with `text` linking to `column` (for the notebook to display)."""
    import html as html_lib

    from IPython.display import HTML

    shown = table.copy()
    if not shown.empty:
        links = [
            f'<a href="{html_lib.escape(safe_url(u), quote=True)}">{html_lib.escape(str(t))}</a>'
            for u, t in zip(shown[column], shown[text])
        ]
        shown = shown.drop(columns=[column])
        # every other cell comes from data (titles, values, details): escaped here, since the
        # table is rendered with escape=False for the links' sake
        for name in shown.columns:
            shown[name] = [html_lib.escape(str(v)) if v is not None and v == v else "" for v in shown[name]]
        shown[text] = links
    shown.columns = [html_lib.escape(str(c)) for c in shown.columns]
    return HTML(shown.to_html(escape=False, index=False, na_rep=""))


def safe_url(url: object) -> str:
    """`url` when it is an http(s) link, else "#" (a `javascript:` or `data:` link from data never goes live)."""
    text = str(url)
    return text if re.match(r"(?i)https?://", text) else "#"


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def md(value: object) -> str:
    """Text from data or the command line, safe inside a Markdown cell output: Markdown's
    punctuation is backslash-escaped and `<`, `>`, `&` become entities, so `<img onerror>` or
    `[x](javascript:...)` shows as text; line breaks become spaces."""
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", " ".join(str(value).split()))
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
