"""Run inside a report's kernel as it starts (`microctx.reports.kernels.preload_arguments`), while
the parent is still importing papermill and readying the HTML export: import the modules the
notebook imports and start vl-convert's engine, so the notebook's cells find them ready.

Nothing here is needed for the notebook to run: it imports everything itself. A module that
fails to import is skipped, and the notebook's own import reports it as a cell error.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence


def preload(modules: Sequence[str]) -> None:
    """Import each of `modules` ("a.b" for `from a import b`: the module `a.b`, or `a` when `b` is
    not a module) and warm the chart renderer (`figures.warm_renderer`)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            parent = name.rpartition(".")[0]
            if exc.name == name and parent:  # `from a import b` where b is a name in a
                _quietly(parent)
        except Exception:  # noqa: BLE001  (the notebook's own import reports it)
            pass
    try:
        from microctx.reports.figures import warm_renderer

        warm_renderer()
    except Exception:  # noqa: BLE001  (the first chart reports it)
        pass


def _quietly(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001  (the notebook's own import reports it)
        pass
