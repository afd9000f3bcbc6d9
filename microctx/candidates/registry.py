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

Every candidate runs in a child process (`python -m microctx.candidates.child ENTRY ...` for
functions); see `microctx.candidates.runner` for the isolation.

Other packages add candidates through the entry-point group `microctx.candidates` (the
papermill-engines habit): `[project.entry-points."microctx.candidates"] my-cand = "pkg.mod:run"`
makes `my-cand` a name beside the built-ins (a built-in name wins). A built-in's version is
microctx's with a content hash of its code (`builtin_version`), so a changed built-in never
reuses a sweep's old results.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from microctx.candidates.builtins.params import ExactSqlParams, LlmParams, RetrievalParams, TextOnlyParams, defaults
from microctx.candidates.child import COUNTERS_FILE
from microctx.contract.costs import COUNTER_KEYS, MODEL_COUNTER_KEYS
from microctx.errors import InputError

__all__ = ["BUILTINS", "COUNTERS_FILE", "COUNTER_KEYS", "ENTRY_POINT_GROUP", "MODEL_COUNTER_KEYS", "Candidate", "resolve"]
ENTRY_POINT_GROUP = "microctx.candidates"
_BUILTINS_DIR = Path(__file__).resolve().parent / "builtins"


@dataclass(frozen=True)
class Builtin:
    entry: str  # module:function
    description: str
    params_type: type  # its parameters as a declared type (microctx.candidates.builtins.params)
    needs_devkit: bool = False
    code: tuple[str, ...] = ()  # its code, relative to candidates/builtins/ (a folder: every file in it)

    @property
    def params(self) -> dict:
        """Known parameters and their defaults."""
        return defaults(self.params_type)

    def check_params(self, name: str, params: dict) -> None:
        """Refuse a parameter of the wrong type (InputError naming it) before anything runs."""
        import msgspec

        from microctx.contract.records import validation_error

        try:
            msgspec.convert(params, self.params_type, strict=True)
        except msgspec.ValidationError as exc:
            error = validation_error(name, exc, f"a parameter of {name}")
            raise InputError(name, error.message, field=f"--param {error.field}") from None


BUILTINS = {
    "exact-sql": Builtin(
        "microctx.candidates.builtins.exact_sql:run",
        "DuckDB SQL over the public corpus: state and labels projected, relations by RE2, aggregates by GROUP BY",
        ExactSqlParams,
        code=("exact_sql.py",),
    ),
    "text-only": Builtin(
        "microctx.candidates.builtins.text_only:run",
        "TF-IDF + logistic regression (SGD) from title and body only; fit on train, thresholds on tune (needs --devkit)",
        TextOnlyParams,
        needs_devkit=True,
        code=("text_only.py",),
    ),
    "llm": Builtin(
        "microctx.candidates.builtins.llm:run",
        "a model over an OpenAI-compatible endpoint: modes micro, long, chunks, hybrid (exact first); "
        "needs --param base_url=URL --param model=NAME",
        LlmParams,
        code=("llm.py", "llm_config.py", "llm_prompts.py", "llm_endpoint.py", "exact_sql.py", "retrieval.py", "prompts"),
    ),
    "retrieval": Builtin(
        "microctx.candidates.builtins.retrieval:run",
        "BM25 over the train/tune records: labels (task=text: also state) voted by the k nearest, the rest exact",
        RetrievalParams,
        code=("retrieval.py", "exact_sql.py"),
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
    version: str | None = None  # known to the parent (a built-in's); else what the candidate reports


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
        merged = {**builtin.params, **params}
        builtin.check_params(name, merged)
        return Candidate(
            name,
            "builtin",
            builtin.entry,
            merged,
            needs_devkit=builtin.needs_devkit,
            version=builtin_version(name),
        )
    plugin = entry_point_candidates().get(name)
    if plugin is not None:
        return Candidate(name, "function", plugin.value, params, import_root=_entry_point_root(plugin))
    if ":" not in name:
        known = ", ".join([*BUILTINS, *entry_point_candidates()])
        raise InputError(name, f"not a candidate name ({known}), not module:function, and no --cmd given")
    target, function = name.rsplit(":", 1)
    if not function.isidentifier():
        raise InputError(name, f"{function!r} is not a function name")
    if target.endswith(".py"):
        path = Path(target).resolve()
        if not path.is_file():
            raise InputError(target, "candidate file not found")
        return Candidate(name, "function", f"{path}:{function}", params)
    version = _microctx_module_version(target)
    return Candidate(name, "function", name, params, import_root=_import_root(target), version=version)


# --- versions: what the parent knows of a candidate's code ---------------------------------------


def code_digest(paths: list[Path]) -> str:
    """SHA-256 over the files (each folder's files, recursively, in name order) with their names."""
    digest = hashlib.sha256()
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts) if path.is_dir() else [path]
        for file in files:
            digest.update(file.relative_to(path.parent).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()


def builtin_version(name: str) -> str:
    """A built-in's version: microctx's, plus a content hash of its code (module files and prompts)."""
    from microctx._version import __version__

    builtin = BUILTINS[name]
    code = builtin.code or (builtin.entry.split(":")[0].rsplit(".", 1)[1] + ".py",)
    return f"{__version__}+code.{code_digest([_BUILTINS_DIR / part for part in code])[:12]}"


def _microctx_module_version(module: str) -> str | None:
    """For `microctx.…:function` named as a function: microctx's version and the module file's hash."""
    if module.split(".")[0] != "microctx":
        return None
    from microctx._version import __version__

    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if found is None or not found.origin or not os.path.isfile(found.origin):
        return None
    return f"{__version__}+code.{code_digest([Path(found.origin)])[:12]}"


def run_version(known: str | None, reported: str | None) -> str | None:
    """The manifest's version: the parent's (`Candidate.version`) with what the candidate reported.

    A candidate that reports microctx's version with a suffix of its own (llm: `+prompt.micro.v1`)
    keeps that suffix after the code hash; any other report follows it."""
    if known is None:
        return reported
    if reported is None or reported == known:
        return known
    from microctx._version import __version__

    if reported.startswith(__version__):
        return known + reported[len(__version__) :]
    return f"{known}+{reported}"


# --- candidates of other packages: the entry-point group --------------------------------------------


def entry_point_candidates() -> dict:
    """Name -> importlib.metadata.EntryPoint of every installed candidate in `ENTRY_POINT_GROUP`."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in BUILTINS}


def _entry_point_root(plugin) -> str | None:
    """The folder the child imports a plugin's module from: None when it is where Python looks
    anyway (site-packages), else the folder holding its distribution (a path added at run time)."""
    import site
    import sysconfig

    target = plugin.value.split(":")[0]
    if ":" not in plugin.value or not all(part.isidentifier() for part in target.split(".")):
        raise InputError(plugin.name, f"entry point {plugin.value!r} is not module:function", field=ENTRY_POINT_GROUP)
    dist = getattr(plugin, "dist", None)
    root = Path(str(dist.locate_file(""))).resolve() if dist is not None else None
    standard = {Path(p).resolve() for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"]]}
    if root is None or root in standard:
        return None
    if importlib.machinery.PathFinder.find_spec(target.split(".")[0], [str(root)]) is None:
        raise InputError(plugin.name, f"entry point module {target!r} not found beside its distribution", field=ENTRY_POINT_GROUP)
    return str(root)


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
