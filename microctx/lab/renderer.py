"""Notebook setup: charts that need no network, in JupyterLab and in exported HTML.

`notebook_setup()` registers and enables the altair renderer `microctx`: every altair chart a cell
returns is rendered by vl-convert (in the kernel, no browser, no network) to a PNG at twice its
size (less for a very large chart) shown at its own size, the way the packaged reports show theirs. The output is a plain image,
so JupyterLab shows it offline and `jupyter nbconvert --to html` inlines it as a data URI: no
`<script src="https://cdn.jsdelivr.net/...">` anywhere. Call it (or `%load_ext microctx`) once in a
kernel; importing microctx alone changes no renderer.

Charts whose point is interaction (a brush) are shown live with `microctx.charts.show_interactive`,
which embeds them with the vega libraries inlined (again no network).
"""

from __future__ import annotations

import base64
import sys

RENDERER = "microctx"
_registered = False


def offline_renderer(spec: dict, **_metadata) -> tuple[dict, dict]:
    """An altair renderer: the spec rendered by vl-convert to a PNG (the mimebundle and its metadata),
    shown at the chart's own size (rendered at up to twice it: `microctx.reports.figures.png_scale`)."""
    from microctx.reports.figures import Figure, render_spec

    figure = Figure(*render_spec(spec), "altair chart")
    title = spec.get("title")
    text = f"<altair chart{': ' + str(title) if isinstance(title, str) else ''} ({figure.width}x{figure.height})>"
    bundle = {"image/png": base64.b64encode(figure.data).decode(), "text/plain": text}
    return bundle, {"image/png": {"width": figure.width, "height": figure.height}}


def notebook_setup() -> str:
    """Enable the offline altair renderer (see the module docstring); returns its name."""
    global _registered
    import altair as alt

    if not _registered:
        alt.renderers.register(RENDERER, offline_renderer)
        _registered = True
    alt.renderers.enable(RENDERER)
    return RENDERER


def in_kernel() -> bool:
    """True inside a running IPython kernel (JupyterLab, papermill, nbclient)."""
    if "ipykernel" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None
