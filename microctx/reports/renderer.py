"""Charts drawn in a process of their own beside a report's kernel (issue 24: where users wait).

vl-convert holds the GIL while it works, and its first chart in a process costs about 0.35 s
(V8 and the vega bundle starting). A report's kernel starts a renderer as it starts
(`kernel_start.preload`, `start`): the renderer readies vl-convert on the machine's other core
while the kernel imports the notebook's modules, and then runs vega for each chart (`svg`) and
writes each chart's PDF (`pdf`) while the kernel rasterises its PNG. The bytes are vl-convert's
as in the kernel (tests/test_charts.py pins them through both). Without a renderer (a notebook
opened in JupyterLab), or when it fails, `figures` draws in the kernel as before: a chart that
cannot be drawn raises there, with vl-convert's own error.

The renderer (`renderer_process.serve`) reads one JSON request a line on its stdin and answers
one JSON line on its stdout; it ends when its stdin closes (the kernel ended).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_CURRENT: Renderer | None = None


class Renderer:
    """A renderer process and the conversation with it (one request at a time: a lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.rendered = 0  # charts vega drew here (tests)
        # -P: the working folder stays off sys.path (a `microctx/` folder there is not this one)
        self._process: subprocess.Popen | None = subprocess.Popen(
            [sys.executable, "-P", "-c", "from microctx.reports.renderer_process import serve; serve()"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _send(self, request: dict) -> bool:
        """Write one request; False when it was not sent: a value JSON cannot carry (drawn in this
        process), or the renderer died (it is dropped). An interruption drops it too and is raised:
        a request half sent, or sent and never answered, would put every later answer out of step."""
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            return False
        try:
            line = json.dumps(request).encode() + b"\n"
        except (TypeError, ValueError):
            return False
        try:
            process.stdin.write(line)
            process.stdin.flush()
        except (OSError, ValueError):  # it died (or its pipe was closed)
            self.close()
            return False
        except BaseException:
            self.close()
            raise
        return True

    def _receive(self) -> dict | None:
        """The answer to the request just sent; None (and the renderer is dropped) when it died,
        or when it answered with an error (then the caller draws, and raises the real error)."""
        process = self._process
        assert process is not None and process.stdout is not None  # `_send` succeeded under the lock
        try:
            answer = json.loads(process.stdout.readline())
        except (OSError, ValueError):  # it died
            self.close()
            return None
        except BaseException:  # interrupted: the answer may be left unread
            self.close()
            raise
        return answer if isinstance(answer, dict) and "error" not in answer else None

    def svg(self, spec: dict) -> str | None:
        """The SVG vega draws for the (themed) Vega-Lite `spec`; None when the renderer could not."""
        with self._lock:
            answer = self._receive() if self._send({"svg": spec}) else None
        if answer is None or not isinstance(answer.get("svg"), str):
            return None
        self.rendered += 1
        return answer["svg"]

    @contextmanager
    def pdf(self, svg: str, path: str) -> Iterator[list[bool]]:
        """Write the chart's column PDF (`figures.column_pdf`) to `path` in the renderer while the
        block runs; on leaving, `[True]` when it was written, `[False]` when not (then the caller
        writes it)."""
        done = [False]
        with self._lock:
            sent = self._send({"pdf": svg, "path": path})
            try:
                yield done
            finally:
                if sent:
                    answer = self._receive()
                    done[0] = answer is not None and answer.get("pdf") == path

    def close(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.kill()
            process.wait()


def start() -> Renderer | None:
    """Start this process's renderer, unless it has a live one (a kernel reused by the demo keeps it)."""
    global _CURRENT
    if _CURRENT is None or not _CURRENT.alive():
        try:
            _CURRENT = Renderer()
        except OSError:
            _CURRENT = None
    return _CURRENT


def current() -> Renderer | None:
    """This process's live renderer, if one was started."""
    return _CURRENT if _CURRENT is not None and _CURRENT.alive() else None
