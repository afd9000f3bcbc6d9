"""A rendered chart's files, without altair: the sizes an SVG or a PNG declares, the PDF for a
write-up (`column_pdf`), and `missing_pdfs_meanwhile`: in a report, the kernel writes each chart's
PNG and SVG and the report's own process (idle while its kernel runs) writes the PDFs from the
SVGs as they appear, on the machine's other core (issue 24). The PDF is the same function of
the SVG either way; a notebook run anywhere else (JupyterLab) writes its PDFs itself.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from microctx._io.atomic import atomic_write

COLUMN_WIDTH_PT = 468.0  # a figure's width in a write-up: a 6.5-inch text column, in points
# set in a report kernel's environment (`reports.kernels`): `figures.save` leaves the PDF to the report's process
PDF_BY_PARENT = "MICROCTX_PDF_BY_PARENT"


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


def write_missing_pdfs(charts_dir: str | os.PathLike) -> list[str]:
    """Write `<name>.pdf` (`column_pdf`) beside each `<name>.svg` in `charts_dir` that has none
    (SVGs are written atomically: one seen is whole); returns the names written."""
    folder = Path(charts_dir)
    if not folder.is_dir():
        return []
    written = []
    for svg in sorted(folder.glob("*.svg")):
        pdf = svg.with_suffix(".pdf")
        if not pdf.exists():
            atomic_write(pdf, column_pdf(svg.read_text(encoding="utf-8")))
            written.append(svg.stem)
    return written


@contextmanager
def missing_pdfs_meanwhile(charts_dir: str | os.PathLike, every: float = 0.05) -> Iterator[None]:
    """While the block runs (a report's kernel executing its notebook), write the PDFs of the
    charts it saves (`write_missing_pdfs`, polled every `every` seconds in a thread); once more
    when it ends, so every chart has its PDF."""
    import vl_convert  # noqa: F401  (imported here, not first inside the thread)

    stop = threading.Event()
    failed: list[BaseException] = []

    def watch() -> None:
        try:
            while not stop.wait(every):
                write_missing_pdfs(charts_dir)
        except BaseException as exc:  # noqa: BLE001  (raised in the caller's thread below)
            failed.append(exc)

    thread = threading.Thread(target=watch, name="microctx-pdfs", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
    if failed:
        raise failed[0]
    write_missing_pdfs(charts_dir)
