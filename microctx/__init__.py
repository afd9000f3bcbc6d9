"""microctx: honest, falsifiable benchmarks on real data.

Freeze a raw issue export into a public corpus, a separately hashed answer bundle and a report;
run candidates on the public corpus alone; grade their submissions on held-out records; slice
the grades so weak classes stay visible.

The stages are plain functions; nothing is imported until it is first used (PEP 562), and
importing the package changes no global state:

    >>> import microctx
    >>> corpus = microctx.load_corpus("public.json")
    >>> result = microctx.grade("answers.json", "submission.json")

In a notebook every result shows a short summary and an HTML view; `microctx.explore(corpus)`
opens the corpus explorer; `microctx.charts` and `microctx.slices` are the chart and slice
modules. `microctx.notebook_setup()` (or `%load_ext microctx`) enables the offline chart
renderer: altair charts show as images rendered in the kernel, no network.
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> (module, attribute); attribute None: the module itself
_EXPORTS: dict[str, tuple[str, str | None]] = {
    **{
        name: ("microctx.api", name)  # the one list of the api's names (microctx.api has no other)
        for name in (
            "freeze",
            "grade",
            "verify",
            "load_corpus",
            "load_answers",
            "load_submission",
            "Corpus",
            "Frozen",
            "Grade",
            "GradeResult",
            "Verification",
        )
    },
    "SliceFrame": ("microctx.grading.slices", "SliceFrame"),
    "explore": ("microctx.lab.explorer", "explore"),
    "annotate": ("microctx.semantic.widget", "annotate"),  # the semantic layer's widgets (docs/semantic.md)
    "adjudicate": ("microctx.semantic.widget", "adjudicate"),
    "notebook_setup": ("microctx.lab.renderer", "notebook_setup"),
    "charts": ("microctx.reports.charts", None),
    "slices": ("microctx.grading.slices", None),
}

__all__ = [*_EXPORTS, "load_ipython_extension", "__version__"]


def __getattr__(name: str) -> Any:
    """Load an export on first use (pandas, altair and ipywidgets stay unimported until then)."""
    if name == "__version__":
        from microctx._version import __version__

        return __version__
    if name not in _EXPORTS:
        raise AttributeError(f"module 'microctx' has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = importlib.import_module(module)
    value = value if attribute is None else getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext microctx`: enable the offline chart renderer in this kernel."""
    from microctx.lab.renderer import notebook_setup

    notebook_setup()
