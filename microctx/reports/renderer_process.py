"""The chart renderer's own process (`renderer`): vl-convert readied, then vega and the PDFs on
request, one JSON line in and one out, until its stdin closes."""

from __future__ import annotations

import json
import os
import signal
import sys


def serve() -> None:
    """The renderer's loop: ready vl-convert, then answer `{"svg": spec}` with `{"svg": text}` and
    `{"pdf": svg, "path": p}` with `{"pdf": p}` once written; `{"error": ...}` when it failed."""
    import vl_convert as vlc

    from microctx._io.atomic import atomic_write
    from microctx.reports.figures import column_pdf, warm_renderer

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupting the kernel (its process group) leaves it be
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # anything a library prints goes where stderr goes, not into the answers
    warm_renderer()
    for line in sys.stdin.buffer:
        try:
            request = json.loads(line)
            if "svg" in request:
                answer = {"svg": vlc.vegalite_to_svg(request["svg"])}
            else:
                atomic_write(request["path"], column_pdf(request["pdf"]))
                answer = {"pdf": request["path"]}
        except Exception as exc:  # noqa: BLE001  (the kernel draws it itself and raises the real error)
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
