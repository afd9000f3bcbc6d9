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
folders are checked by content for answers (microctx.candidates.answer_guard): any file
holding test answer records, whatever its name, serialisation, compression or archive, refuses
the run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import msgspec

from microctx.errors import InputError


@dataclass(frozen=True)
class Project:
    """A project's folders (absolute) and interpreter."""

    code: tuple[Path, ...] = ()
    data: tuple[Path, ...] = ()
    venv: Path | None = None
    interpreter: Path | None = None

    def python(self) -> str | None:
        """The command's `{python}`: the venv's bin/python, else the interpreter, else None."""
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
        """The folders and interpreter as the run manifest and selected.json record them."""
        return {
            "code": [str(p) for p in self.code],
            "data": [str(p) for p in self.data],
            "venv": str(self.venv) if self.venv else None,
            "interpreter": str(self.interpreter) if self.interpreter else None,
        }


def _wrong(source: str | os.PathLike | None, key: str, message: str) -> InputError:
    """An error naming where `key` was given: the candidate file and its key, else the run option."""
    if source is None:
        return InputError(f"--{key}", message)
    return InputError(source, message, field=f"candidate.{key}")


def _folder(source: str | os.PathLike | None, key: str, text: str, base: Path) -> Path:
    """`text` (relative to `base`) as an absolute existing folder."""
    path = (base / text).resolve() if not os.path.isabs(text) else Path(text).resolve()
    if not path.is_dir():
        raise _wrong(source, key, f"{path}: not an existing folder")
    return path


def make_project(
    code=(), data=(), venv=None, interpreter=None, base: Path | None = None, source: str | os.PathLike | None = None
) -> Project:
    """A checked Project: folders exist, the venv has bin/python, no folder holds answers.
    Relative paths are relative to `base` (default: the working folder); `source`: the candidate
    file they come from, which an error then names with its key (else the `run` option)."""
    from microctx.candidates.answer_guard import find_answers

    base = base or Path.cwd()
    project = Project(
        tuple(_folder(source, "code", c, base) for c in code),
        tuple(_folder(source, "data", d, base) for d in data),
        _folder(source, "venv", venv, base) if venv else None,
        (base / interpreter).resolve() if interpreter else None,  # an absolute path stays as given
    )
    if project.venv is not None and not (project.venv / "bin" / "python").exists():
        raise _wrong(source, "venv", f"{project.venv}: not a virtual environment (no bin/python)")
    if project.interpreter is not None and not os.access(project.interpreter, os.X_OK):
        raise _wrong(source, "interpreter", f"{project.interpreter}: not an executable file")
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


_Text = Annotated[str, msgspec.Meta(min_length=1, pattern=r"\S")]
_Texts = _Text | list[_Text]


class CandidateTable(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """candidate.toml's [candidate] table as a declared type (one error style: file, key, expectation)."""

    name: _Text
    command: _Text
    code: _Texts = "."
    venv: _Text | None = None
    interpreter: _Text | None = None
    data: _Texts = msgspec.field(default_factory=list)
    env: _Texts = msgspec.field(default_factory=list)
    network: _Text | None = None
    allow_hosts: _Texts = msgspec.field(default_factory=list)
    memory: _Text | int | None = None
    max_processes: Annotated[int, msgspec.Meta(gt=0)] | None = None
    cpu_seconds: Annotated[int, msgspec.Meta(gt=0)] | None = None
    timeout: Annotated[float, msgspec.Meta(gt=0, lt=1e7)] | None = None


class CandidateDocument(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A candidate.toml: its one table."""

    candidate: CandidateTable


def _listed(value: str | list[str]) -> list[str]:
    """A key given as one text or a list, as a list."""
    return [value] if isinstance(value, str) else list(value)


def load_candidate_file(path: str | os.PathLike) -> CandidateFile:
    """Read and check a candidate.toml (see the module's docstring); InputError naming the key."""
    from microctx.candidates.settings import parse_size
    from microctx.contract import declared

    path = Path(path)
    table = declared.load_declared(path, CandidateDocument, "the candidate file")[0].candidate
    base = path.resolve().parent
    project = make_project(_listed(table.code), _listed(table.data), table.venv, table.interpreter, base, source=path)
    settings: dict = {}
    if table.network is not None:
        settings["network"] = table.network
    if table.allow_hosts:
        settings["allow_hosts"] = tuple(_listed(table.allow_hosts))
    if table.memory is not None:
        settings["memory_bytes"] = parse_size(table.memory)
    for key in ("max_processes", "cpu_seconds"):
        if getattr(table, key) is not None:
            settings[key] = getattr(table, key)
    timeout = float(table.timeout) if table.timeout is not None else None
    return CandidateFile(table.name, table.command, project, _listed(table.env), settings, timeout)


def project_digest(file: str | os.PathLike, project: Project) -> str:
    """SHA-256 of what a project candidate is: its candidate.toml, every file of its code and data
    folders (relative path and content, walked as the answer guard walks them: links not followed,
    bounded; a file the guard does not read, over its size limit or not a regular file, by its
    type, size and modification time instead), its venv's `pyvenv.cfg` and the names in its
    site-packages (the packages installed, not their bytes) or its interpreter's path. A sweep keys
    its results on it, and `evaluate` refuses a project that changed since the sweep chose it."""
    import hashlib

    from microctx._io.jsonio import read_bytes
    from microctx.candidates.answer_guard import read_bounded, walk_files

    digest = hashlib.sha256()

    def add(*parts: str | bytes) -> None:
        for part in parts:
            data = part.encode("utf-8", "surrogateescape") if isinstance(part, str) else part
            digest.update(len(data).to_bytes(8, "big") + data)

    add("candidate.toml", read_bytes(file))
    for kind, folders in (("code", project.code), ("data", project.data)):
        for index, folder in enumerate(folders):
            for path in sorted(walk_files([folder])):
                add(kind, str(index), str(path.relative_to(folder)), _file_digest(path, read_bounded(path)))
    if project.venv is not None:
        config = project.venv / "pyvenv.cfg"
        add("venv", config.read_bytes() if config.is_file() else b"")
        for site in sorted(project.venv.glob("lib*/python*/site-packages")):
            add(*sorted(entry.name for entry in site.iterdir()))
    if project.interpreter is not None:
        add("interpreter", str(project.interpreter))
    return digest.hexdigest()


def _file_digest(path: Path, content: bytes | None) -> str:
    """The SHA-256 of a file's content when it was read; else `unread:` with its file type, size
    and modification time (a file over the guard's limit still changes the digest when written)."""
    import hashlib

    if content is not None:
        return hashlib.sha256(content).hexdigest()
    try:
        info = os.lstat(path)
    except OSError:
        return "unread:missing"
    return f"unread:{info.st_mode >> 12:o}:{info.st_size}:{info.st_mtime_ns}"
