"""Candidates that are projects: code folders, a virtual environment or interpreter, data folders.

A project is given as `run` options (`--cmd TEMPLATE --code DIR --venv DIR --data DIR`) or as a
candidate file, `microctx run candidate.toml`:

    [candidate]
    name = "my-extractor"
    command = "{python} main.py {public} {submission}"   # words are relative to the first code folder
    code = ["."]                  # folders holding the code (relative to this file)
    venv = ".venv"                # its virtual environment (or interpreter = "/usr/bin/python3")
    data = ["data"]               # read-only data folders
    env = ["MY_API_KEY"]          # variables it may receive (as --pass-env)
    network = "none"              # or "record" with allow_hosts = ["api.example.com"]
    memory = "2G"                 # limits as the run options: memory, max_processes, cpu_seconds, timeout

Every folder is bound read-only into the sandbox at its own path; the command runs in the run
folder as any command candidate does, with `{python}` the project's interpreter (the venv's
`bin/python`) and the venv's `bin` first on PATH. Before anything runs, the code and data
folders are checked by content for answers (microctx.candidates.answer_guard): any JSON
document holding test answer records, whatever its name or serialisation, refuses the run.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from microctx.errors import InputError

PROJECT_KEYS = {"name", "command", "code", "venv", "interpreter", "data", "env", "network", "allow_hosts"}
PROJECT_KEYS |= {"memory", "max_processes", "cpu_seconds", "timeout"}


@dataclass(frozen=True)
class Project:
    """A project's folders (absolute) and interpreter."""

    code: tuple[Path, ...] = ()
    data: tuple[Path, ...] = ()
    venv: Path | None = None
    interpreter: Path | None = None

    def python(self) -> str | None:
        if self.venv is not None:
            return str(self.venv / "bin" / "python")
        return str(self.interpreter) if self.interpreter is not None else None

    def folders(self) -> list[Path]:
        """What the sandbox binds read-only (at the same paths)."""
        found = [*self.code, *self.data]
        if self.venv is not None:
            found.append(self.venv)
        if self.interpreter is not None:
            found.append(self.interpreter)
        return found

    def as_dict(self) -> dict:
        return {
            "code": [str(p) for p in self.code],
            "data": [str(p) for p in self.data],
            "venv": str(self.venv) if self.venv else None,
            "interpreter": str(self.interpreter) if self.interpreter else None,
        }


def _folder(where: str, text: str, base: Path) -> Path:
    path = (base / text).resolve() if not os.path.isabs(text) else Path(text).resolve()
    if not path.is_dir():
        raise InputError(where, f"{path}: not an existing folder")
    return path


def make_project(code=(), data=(), venv=None, interpreter=None, base: Path | None = None) -> Project:
    """A checked Project: folders exist, the venv has bin/python, no folder holds answers."""
    from microctx.candidates.answer_guard import find_answers

    base = base or Path.cwd()
    project = Project(
        tuple(_folder("--code", c, base) for c in code),
        tuple(_folder("--data", d, base) for d in data),
        _folder("--venv", venv, base) if venv else None,
        Path(interpreter).resolve() if interpreter else None,
    )
    if project.venv is not None and not (project.venv / "bin" / "python").exists():
        raise InputError("--venv", f"{project.venv}: not a virtual environment (no bin/python)")
    if project.interpreter is not None and not os.access(project.interpreter, os.X_OK):
        raise InputError("interpreter", f"{project.interpreter}: not an executable file")
    found = find_answers([*project.code, *project.data])
    if found:
        raise InputError(found[0], "holds test answers (found by content); a candidate's folders must not")
    return project


@dataclass
class CandidateFile:
    """A candidate.toml, read: what `run` needs of it."""

    name: str
    command: str
    project: Project
    pass_env: list[str] = field(default_factory=list)
    settings: dict = field(default_factory=dict)  # SandboxSettings options (network, allow_hosts, limits)
    timeout: float | None = None


def _strings(path: Path, table: dict, key: str) -> list[str]:
    value = table.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise InputError(path, "expected a list of non-empty strings", field=f"candidate.{key}")
    return value


def load_candidate_file(path: str | os.PathLike) -> CandidateFile:
    """Read and check a candidate.toml (see the module's docstring); InputError naming the key."""
    from microctx._io.jsonio import read_bytes
    from microctx.candidates.settings import parse_size

    path = Path(path)
    try:
        table = tomllib.loads(read_bytes(path).decode("utf-8")).get("candidate")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(path, f"not a TOML file: {exc}") from None
    if not isinstance(table, dict):
        raise InputError(path, "expected a [candidate] table", field="candidate")
    unknown = sorted(set(table) - PROJECT_KEYS)
    if unknown:
        raise InputError(path, "unknown key", field=f"candidate.{unknown[0]}")
    for key in ("name", "command"):
        if not isinstance(table.get(key), str) or not table[key].strip():
            raise InputError(path, "expected a non-empty string", field=f"candidate.{key}")
    base = path.resolve().parent
    code = _strings(path, table, "code") or ["."]
    project = make_project(code, _strings(path, table, "data"), table.get("venv"), table.get("interpreter"), base)
    settings: dict = {}
    if "network" in table:
        settings["network"] = table["network"]
    if "allow_hosts" in table:
        settings["allow_hosts"] = tuple(_strings(path, table, "allow_hosts"))
    if "memory" in table:
        settings["memory_bytes"] = parse_size(table["memory"])
    for key in ("max_processes", "cpu_seconds"):
        if key in table:
            if not isinstance(table[key], int) or isinstance(table[key], bool) or table[key] <= 0:
                raise InputError(path, "expected a positive integer", field=f"candidate.{key}")
            settings[key] = table[key]
    timeout = table.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < 1e7):
        raise InputError(path, "expected a positive number of seconds", field="candidate.timeout")
    return CandidateFile(table["name"], table["command"], project, _strings(path, table, "env"), settings, timeout)


def project_digest(file: str | os.PathLike, project: Project) -> str:
    """SHA-256 of what a project candidate is: its candidate.toml, every file of its code and data
    folders (relative path and content, walked as the answer guard walks them: links not followed,
    bounded), its venv's `pyvenv.cfg` and the names in its site-packages (the packages installed,
    not their bytes) or its interpreter's path. A sweep keys its results on it, and `evaluate`
    refuses a project that changed since the sweep chose it."""
    import hashlib

    from microctx.candidates.answer_guard import read_bounded, walk_files

    digest = hashlib.sha256()

    def add(*parts: str | bytes) -> None:
        for part in parts:
            data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
            digest.update(len(data).to_bytes(8, "big") + data)

    from microctx._io.jsonio import read_bytes

    add("candidate.toml", read_bytes(file))
    for kind, folders in (("code", project.code), ("data", project.data)):
        for index, folder in enumerate(folders):
            for path in sorted(walk_files([folder])):
                content = read_bounded(path)
                add(kind, str(index), str(path.relative_to(folder)), hashlib.sha256(content or b"").hexdigest())
    if project.venv is not None:
        config = project.venv / "pyvenv.cfg"
        add("venv", config.read_bytes() if config.is_file() else b"")
        for site in sorted(project.venv.glob("lib*/python*/site-packages")):
            add(*sorted(entry.name for entry in site.iterdir()))
    if project.interpreter is not None:
        add("interpreter", str(project.interpreter))
    return digest.hexdigest()
