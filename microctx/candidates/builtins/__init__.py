"""The built-in candidates, each a `run(public_path, output_path, *, devkit_path, params) -> counters`
registered in `microctx.candidates.registry.BUILTINS`: exact-sql (DuckDB), text-only (TF-IDF and
linear models), retrieval (BM25 neighbours), llm (a model behind an OpenAI-compatible endpoint,
with its versioned prompts in `prompts/`).
"""
