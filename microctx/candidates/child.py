"""The child side of a function candidate: `python -m microctx.candidates.child ENTRY --public P --output O ...`.

Kept tiny on purpose: the runner starts it inside the sandbox, where it imports the candidate's
module and what that module needs, nothing of the registry, the runner or the sandbox. The
candidate's version is the parent's business (`microctx.candidates.registry.resolve`); here only
what the function or its module declares (`version` attribute, `__version__`) is reported.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
import traceback
from pathlib import Path

COUNTERS_FILE = "counters.json"


def load_function(entry: str, import_root: str | None = None):
    """Import `module:function` or `/path/file.py:function` and return (function, declared version or None)."""
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
    return function, getattr(function, "version", None) or getattr(module, "__version__", None)


def write_counters(counters: dict | None, version: str | None, path: str = COUNTERS_FILE) -> None:
    """Write what the function returned (plus its declared version) as the counters file."""
    from microctx.contract.canonical import dumps

    report = dict(counters or {})
    if version is not None and "version" not in report:
        report["version"] = str(version)
    if report:
        Path(path).write_bytes(dumps(report))


def child_main(argv: list[str] | None = None) -> int:
    """Run one function candidate in this process; 1 (and the reason on stderr) when it fails."""
    import orjson

    parser = argparse.ArgumentParser(prog="python -m microctx.candidates.child")
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
