"""microctx: honest, falsifiable benchmarks on real data.

Freeze a raw issue export into a public corpus, a separately hashed answer bundle and a report;
run candidates on the public corpus alone; grade their submissions on held-out records; slice
the grades so weak classes stay visible.

The stages are plain functions, importable without pandas or notebook machinery:

    >>> import microctx
    >>> corpus = microctx.load_corpus("public.json")
    >>> result = microctx.grade(microctx.load_answers("answers.json"), microctx.load_submission("sub.json"))
"""

__version__ = "0.1.0"

from microctx.api import (  # noqa: E402
    Corpus,
    freeze,
    grade,
    load_answers,
    load_corpus,
    load_submission,
    verify,
)

__all__ = ["freeze", "grade", "verify", "load_corpus", "load_answers", "load_submission", "Corpus", "__version__"]
