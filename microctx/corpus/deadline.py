"""Run a blocking network call in a worker thread and abandon it when its time is up.

A read timeout bounds each wait on a socket, not the whole operation: a server that sends one
byte every few seconds never trips it. `call_within` bounds the whole call instead; fetch and the
snapshot download both use it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class TimeUp(Exception):
    """The call did not finish within its seconds (it goes on in a daemon thread, abandoned)."""


def call_within(work: Callable[[], T], seconds: float, name: str) -> T:
    """`work()`'s result, or its exception re-raised in the caller's thread; TimeUp after `seconds`."""
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TimeUp(name)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]
