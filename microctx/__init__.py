"""microctx: honest, falsifiable benchmarks on real data.

Freeze a raw issue export into a public corpus, a separately hashed answer bundle and a report;
run candidates on the public corpus alone; grade their submissions on held-out records; slice
the grades so weak classes stay visible.

The stages are plain functions, importable without pandas or notebook machinery:

    >>> import microctx
    >>> corpus = microctx.load_corpus("public.json")
    >>> result = microctx.grade(microctx.load_answers("answers.json"), microctx.load_submission("sub.json"))

In a notebook every result shows a short summary and an HTML view; `microctx.explore(corpus)`
opens the corpus explorer; `microctx.charts` and `microctx.slices` are the chart and slice
modules. Inside a running kernel, `import microctx` enables the offline chart renderer
(`microctx.notebook_setup()`): altair charts show as images rendered in the kernel, no network.
"""

__version__ = "0.1.0"

from microctx.api import (  # noqa: E402
    Corpus,
    Frozen,
    Grade,
    GradeResult,
    Verification,
    freeze,
    grade,
    load_answers,
    load_corpus,
    load_submission,
    verify,
)

__all__ = ["freeze", "grade", "verify", "load_corpus", "load_answers", "load_submission", "Corpus", "Frozen", "Grade",
           "GradeResult", "Verification", "SliceFrame", "explore", "annotate", "adjudicate", "notebook_setup", "charts", "slices", "__version__"]

_LAZY = {"charts": "microctx.reports.charts", "slices": "microctx.grading.slices"}


def __getattr__(name: str):
    """Heavier parts load on first use: `microctx.charts`, `microctx.slices`, `SliceFrame`,
    `explore`, `notebook_setup` (pandas, altair and ipywidgets are not imported by `import microctx`)."""
    import importlib

    if name in _LAZY:
        return importlib.import_module(_LAZY[name])
    if name == "SliceFrame":
        return importlib.import_module("microctx.grading.slices").SliceFrame
    if name == "explore":
        return importlib.import_module("microctx.explorer").explore
    if name in ("annotate", "adjudicate"):  # the semantic layer's widgets (docs/semantic.md)
        return getattr(importlib.import_module("microctx.semantic.widget"), name)
    if name == "notebook_setup":
        return importlib.import_module("microctx.notebook").notebook_setup
    raise AttributeError(f"module 'microctx' has no attribute {name!r}")


def _setup_when_in_a_kernel() -> None:
    from microctx.notebook import in_kernel, notebook_setup

    if in_kernel():
        try:
            notebook_setup()
        except ImportError:  # pragma: no cover - altair is a dependency; a broken install keeps the default
            pass


_setup_when_in_a_kernel()
