"""Run inside a report's kernel as it starts (`microctx.reports.kernels.preload_arguments`), while
the parent is still importing papermill and readying the HTML export: start the chart renderer
process (it readies vl-convert's engine) and import the modules the notebook imports, so the
notebook's cells find them ready.

Nothing here is needed for the notebook to run: it imports everything itself. A module that
fails to import is skipped, and the notebook's own import reports it as a cell error.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence


def preload(modules: Sequence[str]) -> None:
    """Start the chart renderer process (`renderer.start`: it readies vl-convert on another core
    while this kernel imports), then import each of `modules` ("a.b" for `from a import b`: the
    module `a.b`, or `a` when `b` is not a module)."""
    try:
        from microctx.reports import renderer

        renderer.start()
    except Exception:  # noqa: BLE001  (the charts are then drawn in the kernel)
        pass
    for name in modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            parent = name.rpartition(".")[0]
            if exc.name == name and parent:  # `from a import b` where b is a name in a
                _quietly(parent)
        except Exception:  # noqa: BLE001  (the notebook's own import reports it)
            pass


def _quietly(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001  (the notebook's own import reports it)
        pass
