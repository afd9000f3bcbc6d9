"""Candidates: what turns a public corpus into a submission, and how one is named.

A candidate is named in one of three ways (`resolve` turns the name into a `Candidate`):
- a built-in name: `exact-sql` (DuckDB over the public corpus) or `text-only` (scikit-learn
  from title and body; needs a devkit); `llm` (a model over an OpenAI-compatible endpoint) or
  `retrieval` (BM25 over the train/tune records);
- `module:function` (an importable module) or `path/to/file.py:function`;
- any label together with a command template (`--cmd 'python my_pipeline.py {public} {submission}'`).

The function protocol. A Python candidate is a function

    fn(public_path: str, output_path: str, *, devkit_path: str | None, params: dict) -> dict | None

that reads the public corpus at `public_path` (and the devkit, an answer file holding only
train/tune answers, at `devkit_path` when the run was given one), writes its submission (schema
fak-microcontext-submission/1) to `output_path`, and returns its counters (see below) or None.
A module may set `__version__`; the function may carry a `version` attribute instead.

The command protocol. Placeholders in the template: `{public}`, `{submission}`, `{devkit}` (an
error when the run has no devkit), `{params}` (the parameters as one JSON object) and
`{python}` (the interpreter running microctx). The template is split like a shell line but
run without a shell. A word naming an existing file relative to the caller's directory is
made absolute, because the command runs in a fresh empty directory.

Counters. Either way the candidate may write `counters.json` into its working directory: a JSON
object with any of the integer counters `model_calls`, `tool_calls`, `input_tokens`,
`output_tokens` (plus, for model-backed candidates, `MODEL_COUNTER_KEYS`: cached tokens, retries,
dollars as `cost_microdollars`, time to first token, ...) and an optional string `version`. The runner copies them into the run manifest
(a counter not reported is null there: unknown, not zero). A function candidate just returns
the object; the child entry point below writes the file for it.

Every candidate runs in a child process (`python -m microctx.candidates.registry ENTRY ...` for
functions); see `microctx.candidates.runner` for the isolation.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from microctx.errors import InputError

COUNTERS_FILE = "counters.json"
COUNTER_KEYS = ("model_calls", "tool_calls", "input_tokens", "output_tokens")
# Counters of model-backed candidates (llm): copied into the manifest only when reported, so the
# manifests of candidates that call no model keep the four keys above.
MODEL_COUNTER_KEYS = (
    "cached_tokens",
    "cache_hits",
    "retries",
    "failed_calls",
    "failed_answers",
    "calls_without_usage",
    "cost_microdollars",
    "ttft_ms_median",
    "ttft_ms_max",
    "latency_ms_median",
    "retry_wait_ms",
    "model_records",
    "prompts",
    "truncated_records",
    "prompt_version",
)


@dataclass(frozen=True)
class Builtin:
    entry: str  # module:function
    description: str
    params: dict = field(default_factory=dict)  # known parameters and their defaults
    needs_devkit: bool = False


BUILTINS = {
    "exact-sql": Builtin(
        "microctx.candidates.builtins.exact_sql:run",
        "DuckDB SQL over the public corpus: state and labels projected, relations by RE2, aggregates by GROUP BY",
        {"threads": 1},
    ),
    "text-only": Builtin(
        "microctx.candidates.builtins.text_only:run",
        "TF-IDF + logistic regression (SGD) from title and body only; fit on train, thresholds on tune (needs --devkit)",
        {"alpha": 1e-4, "epochs": 50, "min_label_examples": 5, "min_df": 2, "max_features": 50000, "seed": 0},
        needs_devkit=True,
    ),
    "llm": Builtin(
        "microctx.candidates.builtins.llm:run",
        "a model over an OpenAI-compatible endpoint: modes micro, long, chunks, hybrid (exact first); "
        "needs --param base_url=URL --param model=NAME",
        {
            "base_url": "",
            "model": "",
            "mode": "micro",
            "task": "all",
            "context_tokens": 32768,
            "chunk_records": 20,
            "overlap": 0,
            "concurrency": 4,
            "price_in": 0.0,
            "price_out": 0.0,
            "price_cached": None,
            "price_file": "",
            "api_key_env": "",
            "call_timeout": 120.0,
            "deadline": 0.0,
            "retries": 4,
            "backoff": 0.5,
            "max_backoff": 30.0,
            "max_tokens": 0,
            "temperature": 0.0,
            "stream": True,
            "json_mode": True,
            "cache": "",
            "retrieval_k": 0,
            "splits": "all",
        },
    ),
    "retrieval": Builtin(
        "microctx.candidates.builtins.retrieval:run",
        "BM25 over the train/tune records: labels (task=text: also state) voted by the k nearest, the rest exact",
        {"k": 10, "rerank": "none", "rerank_depth": 50, "min_share": 0.5, "task": "labels", "k1": 1.5, "b": 0.75},
    ),
}


@dataclass(frozen=True)
class Candidate:
    name: str  # what the manifest calls it
    kind: str  # builtin, function or command
    entry: str  # module:function, file.py:function, or the command template
    params: dict  # parameters after defaults are applied
    import_root: str | None = None  # folder the child must import the function's module from
    needs_devkit: bool = False


def resolve(name: str, params: dict | None = None, cmd: str | None = None) -> Candidate:
    """Turn a candidate name (and an optional command template) into a Candidate.

    Unknown built-in parameters, unknown names and unimportable modules are InputErrors.
    """
    params = dict(params or {})
    if cmd is not None:
        if not cmd.strip():
            raise InputError("--cmd", "empty command template")
        return Candidate(name, "command", cmd, params)
    if name in BUILTINS:
        builtin = BUILTINS[name]
        unknown = sorted(set(params) - set(builtin.params))
        if unknown:
            raise InputError(
                name, f"unknown parameter {unknown[0]!r}; known: {', '.join(sorted(builtin.params)) or 'none'}", field="--param"
            )
        return Candidate(name, "builtin", builtin.entry, {**builtin.params, **params}, needs_devkit=builtin.needs_devkit)
    if ":" not in name:
        raise InputError(name, f"not a built-in candidate ({', '.join(BUILTINS)}), not module:function, and no --cmd given")
    target, function = name.rsplit(":", 1)
    if not function.isidentifier():
        raise InputError(name, f"{function!r} is not a function name")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise InputError(target, "candidate file not found")
        return Candidate(name, "function", f"{path}:{function}", params)
    return Candidate(name, "function", name, params, import_root=_import_root(target))


def _import_root(module: str) -> str | None:
    """The folder the child needs on its path to import `module`, or None when it imports as is.

    Only finds the module (nothing of it runs in the caller's process). The caller's directory
    counts as Python's own `-m` would count it; the console script does not put it on sys.path.
    """
    top = module.split(".")[0]
    try:
        if importlib.util.find_spec(top) is not None:
            return None
    except (ImportError, ValueError):
        pass
    cwd = os.getcwd()
    spec = importlib.machinery.PathFinder.find_spec(top, [cwd])
    if spec is None:
        raise InputError(module, "module not found (not installed, not in the current directory)")
    return cwd


# --- the child side: run one function candidate in this process ------------------------------


def load_function(entry: str, import_root: str | None = None):
    """Import `module:function` or `/path/file.py:function` and return (function, version)."""
    target, name = entry.rsplit(":", 1)
    if target.endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {target} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        if import_root:
            sys.path.insert(0, import_root)
        module = importlib.import_module(target)
    function = getattr(module, name)
    version = getattr(function, "version", None) or getattr(module, "__version__", None)
    if version is None and target.startswith("microctx."):
        from microctx._version import __version__ as version
    return function, version


def write_counters(counters: dict | None, version: str | None, path: str = COUNTERS_FILE) -> None:
    """Write what the function returned (plus its version) as the counters file."""
    from microctx.contract.canonical import dumps

    report = dict(counters or {})
    if version is not None and "version" not in report:
        report["version"] = str(version)
    if report:
        Path(path).write_bytes(dumps(report))


def child_main(argv: list[str] | None = None) -> int:
    """Entry point of the child process: `python -m microctx.candidates.registry ENTRY --public P --output O ...`."""
    import orjson

    parser = argparse.ArgumentParser(prog="python -m microctx.candidates.registry")
    parser.add_argument("entry")
    parser.add_argument("--public", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--devkit")
    parser.add_argument("--params", default="{}")
    parser.add_argument("--import-root")
    args = parser.parse_args(argv)
    try:
        function, version = load_function(args.entry, args.import_root)
        counters = function(args.public, args.output, devkit_path=args.devkit, params=orjson.loads(args.params))
        if counters is not None and not isinstance(counters, dict):
            raise TypeError(f"candidate returned {type(counters).__name__}, expected a dict of counters or None")
        write_counters(counters, version)
    except Exception as exc:  # the runner shows the last stderr line as the failure reason
        traceback.print_exc()
        print(f"candidate failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
