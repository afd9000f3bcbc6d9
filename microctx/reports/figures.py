"""How every chart looks and where it goes: one theme, the static renders a report carries, and
the figures for write-ups.

`render` draws a chart with vl-convert (no browser, no network) after `themed` gives it the one
theme (fonts, sizes, no frame) wherever the chart sets nothing itself: vega runs once, to an SVG
at the size the chart is shown, and the PNG is that SVG rasterised (at `png_scale`: twice the
size for sharp text, less for a chart so large that twice would pass `PNG_MAX_PIXELS`); `save`
writes `<name>.png`, `<name>.svg` and `<name>.pdf` (vector figures; the PDF at a text column's
width); `show` saves and returns what a notebook displays (`Figure`: the SVG and the PNG, so an
exported HTML report inlines the SVG where it is the smaller); `show_interactive` adds a
self-contained interactive page. The palette (split, status and paired-test colours, the row
height) is here too; the chart builders are named in `microctx.reports.charts`.
"""

from __future__ import annotations

import base64
import copy
import html
import json
import math
import os
import re
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from microctx._io.atomic import atomic_write
from microctx.contract.split import SPLITS
from microctx.reports import renderer

if TYPE_CHECKING:
    import altair as alt
    import pandas as pd

PNG_SCALE = 2  # PNGs are rendered at (at most) twice the chart's size and shown at half, for sharp text
PNG_MAX_PIXELS = 2_000_000  # a larger chart is rasterised at a smaller scale (never below 1): PNGs of sensible size
COLUMN_WIDTH_PT = 468.0  # a figure's width in a write-up: a 6.5-inch text column, in points
FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif"
THEME = {
    "font": FONT,
    "title": {"fontSize": 13, "fontWeight": "bold", "anchor": "start"},
    # labels that would overlap are thinned (greedy), never drawn over each other
    "axis": {
        "labelFontSize": 11,
        "titleFontSize": 11,
        "titleFontWeight": "normal",
        "grid": True,
        "gridOpacity": 0.5,
        "labelOverlap": "greedy",
        "labelSeparation": 3,
    },
    "legend": {"labelFontSize": 11, "titleFontSize": 11, "titleFontWeight": "normal"},
    "header": {"labelFontSize": 11, "titleFontSize": 12},
    "view": {"stroke": None},
}


# The palette of every chart (`microctx.reports.charts`).
# colour scales as Vega-Lite dicts: altair takes them as `scale=` (the same spec as alt.Scale)
SPLIT_COLORS = {"domain": list(SPLITS), "range": ["#4c78a8", "#f58518", "#54a24b"]}
# One colour meaning in every slice, comparison and grade chart: red = a finding that needs
# attention (a weak slice, a significant paired difference, a missed fact), blue = judged with no
# finding, grey = not judged (too little support, or too few components for an interval: hollow).
RED, BLUE, GREY, GREEN, ORANGE = "#e45756", "#4c78a8", "#bab0ac", "#54a24b", "#f58518"
BROWN = "#9d755d"  # not estimable: not judged like "too small", but a status of its own in every legend
STATUS_ORDER = ["judged", "weak", "too small", "not estimable"]
STATUS_COLORS = {"domain": STATUS_ORDER, "range": [BLUE, RED, GREY, BROWN]}
PAIRED_ORDER = ["significant", "not significant", "not judged"]
PAIRED_COLORS = {"domain": PAIRED_ORDER, "range": [RED, BLUE, GREY]}
ROW_HEIGHT = 14


def themed(spec: dict) -> dict:
    """`spec` with the one theme under its own config: what a chart sets itself wins."""

    def merge(base: dict, own: dict) -> dict:
        out = copy.deepcopy(base)
        for key, value in own.items():
            out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
        return out

    return {**spec, "config": merge(THEME, spec.get("config", {}))}


def render(chart: alt.TopLevelMixin | Spec) -> tuple[bytes, str]:
    """(PNG bytes, SVG text) of a chart (altair's or a `Spec`), rendered by vl-convert (no browser, no network)."""
    return _render_dict(_as_dict(chart))


def _as_dict(chart: alt.TopLevelMixin | Spec) -> dict:
    """The Vega-Lite document of an altair chart or a `Spec`."""
    return chart.spec if isinstance(chart, Spec) else chart.to_dict()


def _render_dict(spec: dict) -> tuple[bytes, str]:
    svg = _svg(spec)
    return _png(svg), svg


def _svg(spec: dict) -> str:
    """The chart's SVG: vega run by this kernel's renderer process (`renderer`), else here."""
    themed_spec = themed(spec)
    drawing = renderer.current()
    svg = drawing.svg(themed_spec) if drawing is not None else None
    if svg is None:
        import vl_convert as vlc

        svg = vlc.vegalite_to_svg(themed_spec)
    return svg


def _png(svg: str) -> bytes:
    """The SVG rasterised at `png_scale` (rasterising the SVG skips a second vega run)."""
    import vl_convert as vlc

    width, height = svg_size(svg)
    return vlc.svg_to_png(svg, scale=png_scale(width, height))


_WARM_SPEC = {
    "title": "warm",
    "data": {"values": [{"x": 0, "y": "a"}]},
    "mark": "point",
    "encoding": {"x": {"field": "x", "type": "quantitative"}, "y": {"field": "y", "type": "nominal"}},
}


def warm_renderer() -> None:
    """Start vl-convert's engine with a one-point chart in the theme, through SVG, PNG and PDF: the
    first render in a process costs about 0.35 s more than the next (a report kernel's renderer
    process does this as it starts, `microctx.reports.renderer`; the charts' bytes do not depend on it)."""
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(themed(_WARM_SPEC))
    vlc.svg_to_png(svg, scale=PNG_SCALE)
    vlc.svg_to_pdf(svg)


def png_scale(width: float, height: float) -> float:
    """The scale a chart shown at `width` x `height` pixels is rasterised at: PNG_SCALE, or less
    (at least 1) when PNG_SCALE would make more than PNG_MAX_PIXELS pixels."""
    return max(1.0, min(float(PNG_SCALE), math.sqrt(PNG_MAX_PIXELS / max(1.0, width * height))))


def render_spec(spec: dict) -> tuple[bytes, str]:
    """(PNG bytes, SVG text) of a Vega-Lite spec (the notebook renderer `microctx.notebook_setup()`
    shows the PNG at the SVG's size)."""
    return _render_dict(spec)


def save(chart: alt.TopLevelMixin | Spec, name: str, charts_dir: str | os.PathLike) -> tuple[bytes, str]:
    """Render a chart and write `<name>.png`, `<name>.svg` and `<name>.pdf` (the figure for a
    write-up: `column_pdf`) into `charts_dir`, each atomically. With a renderer process (a
    report's kernel), it writes the PDF while this process rasterises the PNG."""
    svg = _svg(_as_dict(chart))
    folder = Path(charts_dir)
    folder.mkdir(parents=True, exist_ok=True)
    pdf = folder / f"{name}.pdf"
    drawing = renderer.current()
    with drawing.pdf(svg, os.path.abspath(pdf)) if drawing is not None else nullcontext([False]) as written:
        png = _png(svg)
        atomic_write(folder / f"{name}.png", png)
        atomic_write(folder / f"{name}.svg", svg.encode())
    if not written[0]:
        atomic_write(pdf, column_pdf(svg))
    return png, svg


def svg_width(svg: str) -> float:
    """The width an SVG declares (vega writes it in pixels on the root element)."""
    return svg_size(svg)[0]


def svg_size(svg: str) -> tuple[float, float]:
    """(width, height) an SVG's root element declares, in pixels: the size a chart is shown at."""
    root = re.search(r"<svg[^>]*>", svg)
    sizes = [re.search(rf'\s{a}="([0-9.]+)', root.group(0)) if root else None for a in ("width", "height")]
    if not sizes[0] or not sizes[1]:
        raise ValueError("an SVG without a width and a height")
    return float(sizes[0].group(1)), float(sizes[1].group(1))


def column_pdf(svg: str, width_pt: float = COLUMN_WIDTH_PT) -> bytes:
    """The chart as a vector PDF at most `width_pt` points wide (a journal text column), fonts
    scaled with it; a chart narrower than the column keeps its size, so text never grows. The
    scale is set on the SVG's root (its width and height; the viewBox keeps the drawing)."""
    import vl_convert as vlc

    factor = min(1.0, width_pt / svg_width(svg))
    return vlc.svg_to_pdf(scaled_svg(svg, factor) if factor < 1 else svg)


def scaled_svg(svg: str, factor: float) -> str:
    """`svg` drawn `factor` times its size: the root's width and height scaled, a viewBox added
    when it has none so the drawing scales with them."""
    root = re.search(r"<svg[^>]*>", svg)
    if not root:
        raise ValueError("not an SVG")
    tag = root.group(0)
    width, height = (float(re.search(rf'\s{a}="([0-9.]+)', tag).group(1)) for a in ("width", "height"))  # type: ignore[union-attr]
    scaled = re.sub(r'\swidth="[0-9.]+"', f' width="{width * factor:.2f}"', tag, count=1)
    scaled = re.sub(r'\sheight="[0-9.]+"', f' height="{height * factor:.2f}"', scaled, count=1)
    if "viewBox=" not in scaled:
        scaled = scaled[:-1] + f' viewBox="0 0 {width:g} {height:g}">'
    return svg.replace(tag, scaled, 1)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels from a PNG's IHDR chunk."""
    if png[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


class Figure:
    """A rendered chart as a notebook shows it (what `show` returns): `data` the PNG, `svg` the SVG,
    `width` x `height` the size it is shown at. Its display bundle holds the PNG (shown at that
    size: what JupyterLab shows in a notebook it does not trust) and, when it is the smaller, the
    SVG: an HTML export inlines the SVG as an `<img>` data URI (its own document: no id clash with
    another chart, no script), so a report's HTML carries the smaller of the two."""

    def __init__(self, png: bytes, svg: str, name: str):
        self.data, self.svg, self.name = png, svg, name
        width, height = svg_size(svg)
        self.width, self.height = round(width), round(height)

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        data = {"image/png": base64.b64encode(self.data).decode(), "text/plain": repr(self)}
        if len(self.svg.encode()) < len(self.data):
            data["image/svg+xml"] = self.svg
        return data, {"image/png": {"width": self.width, "height": self.height}, "chart": self.name}

    def __repr__(self) -> str:
        return f"<chart {self.name} ({self.width}x{self.height})>"


def show(chart: alt.TopLevelMixin | Spec, name: str, charts_dir: str | os.PathLike | None = None) -> Figure:
    """Render a chart, save it when `charts_dir` is set, and return it to display (`Figure`).

    The chart lands in the notebook as an image output (SVG and PNG), which the HTML export
    inlines as a data URI: the report shows every chart with no script and no network.
    """
    png, svg = save(chart, name, charts_dir) if charts_dir else render(chart)
    return Figure(png, svg, name)


# ================================================================ charts as Vega-Lite dicts

# what altair's `to_dict()` puts in every chart (tests/test_charts.py checks these against altair)
SCHEMA_URL = "https://vega.github.io/schema/vega-lite/v6.4.1.json"
DEFAULT_CONFIG = {"view": {"continuousWidth": 300, "continuousHeight": 300}}


class Spec:
    """A chart built as a plain Vega-Lite dict (`spec`), the very dict altair's `to_dict()` makes
    for the same chart, without importing altair (0.25 s in a report's kernel, and 0.05-0.15 s a
    chart to build and validate). `render`, `save` and `show` take it as they take an altair
    chart; a notebook cell that returns one shows it as `show` would."""

    def __init__(self, spec: dict):
        self.spec = spec

    def to_dict(self) -> dict:
        """A copy of the spec (as altair's `to_dict()`: the caller may change it)."""
        return copy.deepcopy(self.spec)

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        return Figure(*render(self), "chart")._repr_mimebundle_(include, exclude)


def vega_type(column: pd.Series) -> str:
    """The Vega-Lite type altair infers for a column named without one (`"support"`: quantitative)."""
    from pandas.api.types import infer_dtype

    kind = infer_dtype(column, skipna=False)
    if kind in ("floating", "mixed-integer-float", "integer", "mixed-integer", "complex"):
        return "quantitative"
    if kind in ("datetime", "datetime64", "date"):
        return "temporal"
    return "nominal"


def field(frame: pd.DataFrame, name: str, **extra) -> dict:
    """An encoding of `name` typed as altair would type the bare column name (tooltips)."""
    return {"field": name, **extra, "type": vega_type(frame[name])}


def inline_data(frame: pd.DataFrame, datasets: dict) -> dict:
    """`frame`'s rows as altair puts a DataFrame in a chart: values made JSON-safe (NaN and
    infinities None, numpy scalars Python's), stored in `datasets` under altair's name for them
    (`data-` and the first 32 hex digits of the SHA-256 of their sorted JSON); returns the
    `{"name": ...}` that refers to them."""
    import hashlib

    columns = []
    for name in frame.columns:
        column = frame[name]
        kind = column.dtype.kind
        if kind in "biu":
            columns.append(column.tolist())
        elif kind == "f":
            columns.append([None if v != v or v in (math.inf, -math.inf) else v for v in column.tolist()])
        elif kind in "OUT":
            missing = column.isna().tolist()
            columns.append([None if gone else v for v, gone in zip(column.astype(object).tolist(), missing)])
        else:
            raise TypeError(f"column {name!r}: {column.dtype} is not drawn by these charts")
    names = [str(name) for name in frame.columns]
    values = [dict(zip(names, row)) for row in zip(*columns)]
    digest = hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:32]
    key = "empty" if values == [{}] else f"data-{digest}"
    datasets[key] = values
    return {"name": key}


class _ScriptSafeJSON(json.JSONEncoder):
    """JSON that is safe inside an HTML <script>: `<`, `>`, `&` only ever occur inside strings,
    where their \\u escapes mean the same characters."""

    def encode(self, o) -> str:
        return super().encode(o).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def show_interactive(
    chart: alt.TopLevelMixin | Spec, name: str, charts_dir: str | os.PathLike | None = None, height: int | None = None
):
    """The static chart (as `show`) plus the live chart: a self-contained `<name>.html` with the
    vega libraries inlined, written to `charts_dir` and embedded in an iframe (no network).

    The iframe is as tall as the rendered chart (plus a margin), so nothing is clipped; pass
    `height` (pixels) to override."""
    from IPython.display import HTML

    # the spec carries data (label names): `<`, `>` and `&` are written as JSON escapes, so no
    # value can close the page's <script> and open its own
    page = interactive_page(chart)
    if charts_dir:
        Path(charts_dir).mkdir(parents=True, exist_ok=True)
        atomic_write(Path(charts_dir) / f"{name}.html", page.encode())
    image = show(chart, name, charts_dir)
    if height is None:
        height = image.height + 40
    # inside a <div>: IPython warns (a red UserWarning box in a report) about HTML that starts with <iframe
    frame = HTML(
        f'<div class="microctx-interactive"><iframe title="{html.escape(name)}" style="width:100%;height:{height}px;'
        f'border:0" srcdoc="{html.escape(page, quote=True)}"></iframe></div>'
    )
    return image, frame


def _inline_page(spec: dict, **kwargs) -> str:
    """A chart's self-contained HTML page (altair's `to_html(inline=True)` of an already made spec)."""
    import altair as alt

    return alt.utils.spec_to_html(
        spec,
        mode="vega-lite",
        vegalite_version=alt.VEGALITE_VERSION,
        vegaembed_version=alt.VEGAEMBED_VERSION,
        vega_version=alt.VEGA_VERSION,
        template="inline",
        embed_options={"renderer": "svg", "actions": False},
        **kwargs,
    )


def interactive_page(chart: alt.TopLevelMixin | Spec) -> str:
    """The self-contained HTML page `show_interactive` writes: vega, vega-lite and vega-embed
    inlined, the spec's `<`, `>` and `&` written as JSON escapes."""
    return _inline_page(chart.to_dict(), json_kwds={"cls": _ScriptSafeJSON})
