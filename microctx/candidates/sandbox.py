"""The sandbox a candidate runs in: bubblewrap namespaces, what is visible, limits, kernel accounting.

`SandboxSettings` (schema microctx-sandbox/1) holds what a run asks for: `isolation` ("sandbox", the
default, or "process"), `network` ("none", the default, or "record" with `allow_hosts`), and the
limits `memory_bytes`, `max_processes`, `timeout_seconds` (wall) and `cpu_seconds` (CPU time of
each process). `microctx.candidates.runner.run_candidate(..., sandbox=SandboxSettings(...))`
applies them.

The sandbox (`bwrap_argv`) is a bubblewrap (`bwrap`) container with new user, pid, ipc, uts,
network and cgroup namespaces, a new session, `--die-with-parent`, no further user namespaces,
and inside it a user (uid 1000) without capabilities. Its file system is built from nothing:
- read-only: `/usr` (and `/bin`, `/lib`, `/lib64`, `/sbin` as on the host), a short list of
  `/etc` entries programs need (certificates, time zone, loader cache, `passwd`, `hosts`, ...),
  the Python installation (the interpreter's prefix and the virtual environment's), the
  `microctx` package folder, and what a candidate needs of its own: a `module:function`'s
  module file or package, a `file.py`, the files a command names;
- writable: only the run folder, `/candidate` (public corpus copy, devkit copy, submission,
  counters), plus `/tmp` and the home folder as small private tmpfs;
- a fresh `/proc` of the sandbox's own pid namespace, a minimal `/dev`; no `/sys`, no host `/proc`.
Not there: the home folder, caches (`~/.cache/microctx`), data folders, the checkout (its
tests, its data), the caller's working directory, the rest of `/etc`, every other process.

Limits (`Limits`): memory and processes by a cgroup made for the run (v1 or v2, the kernel
counts and enforces them for the whole process tree) where one can be created, else by
`setrlimit` (RLIMIT_AS per process; RLIMIT_NPROC, which counts every process of the user
and does not bind root: a sandboxed run as root
without a usable pids cgroup is refused rather than left unlimited); CPU time by RLIMIT_CPU per
process; the wall timeout by the runner, which kills bwrap, whose pid 1 takes the whole pid
namespace with it, and then every process left in the run's cgroup. Cost comes from the kernel:
CPU seconds of the whole tree from the cgroup's cpuacct when there is one, else from os.wait4
(bwrap is pid 1 of the namespace and reaps everything); peak memory from the cgroup, else the
largest process's peak resident size.

`check_available()` proves once per process that bwrap can make these namespaces here; when it
cannot, it raises `SandboxUnavailable` (an InputError: `microctx run` exits 2 with one line saying
why and what to do). There is no silent fallback to process isolation.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from microctx.errors import InputError

SANDBOX_SCHEMA = "microctx-sandbox/1"
ISOLATIONS = ("sandbox", "process")
NETWORK_MODES = ("none", "record")
RUN_DIR = "/candidate"  # the run folder inside the sandbox (the candidate's working directory)
HOME_DIR = "/home/candidate"
IMPORT_DIR = "/candidate-import"  # a module:function candidate's own module, read-only
PROXY_DIR = "/run/microctx"
PACKAGE_DIR = "/opt/microctx-lib"  # the running microctx package, read-only, first on PYTHONPATH
CACHE_DIR = "/cache"  # --cache-dir: the one folder kept between runs, read-write
CACHE_ENV = "MICROCTX_CANDIDATE_CACHE"  # tells the candidate where its cache folder is
SANDBOX_UID = 1000
_ETC = (
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    "alternatives",
    "localtime",
    "timezone",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "hosts",
    "host.conf",
    "passwd",
    "group",
    "mime.types",
    "fonts",
    "locale.alias",
    "gai.conf",
)
_SIZE = re.compile(r"(?i)^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$")
HOW_TO_ENABLE = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and allow user namespaces "
    "(sysctl kernel.unprivileged_userns_clone=1, or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu), "
    "or choose --isolation process knowingly (no sandbox: the candidate can read what your user can read "
    "and reach the network)"
)


class SandboxUnavailable(InputError):
    """The sandbox cannot start here; the message says why and how to allow it."""

    def __init__(self, why: str):
        super().__init__("sandbox", f"cannot start the sandbox: {why}; {HOW_TO_ENABLE}")


def parse_size(text: str | int) -> int:
    """`2G`, `512M`, `1.5GiB`, `4096` (bytes) -> bytes; an InputError otherwise."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    if not match:
        raise InputError("--memory", f"expected a size like 2G or 512M, got {text!r}")
    number, unit = float(match.group(1)), match.group(2).lower()
    return int(number * (1 << (10 * " kmgt".index(unit or " "))))


@dataclass(frozen=True)
class SandboxSettings:
    """What a run asks for. Defaults: sandbox, no network, 4 GiB, 512 processes, 1 h wall, 1 h CPU."""

    isolation: str = "sandbox"
    network: str = "none"
    allow_hosts: tuple[str, ...] = ()
    memory_bytes: int = 4 << 30
    max_processes: int = 512  # threads count too (the kernel counts tasks)
    timeout_seconds: float | None = 3600.0
    cpu_seconds: int | None = 3600
    max_file_bytes: int = 4 << 30  # RLIMIT_FSIZE: no file the candidate writes grows past this
    cache_dir: str | None = None  # a folder the candidate keeps between runs (e.g. model responses)
    schema: str = field(default=SANDBOX_SCHEMA, init=False)

    def __post_init__(self) -> None:
        from microctx.candidates.network import parse_allowed_host

        if self.isolation not in ISOLATIONS:
            raise InputError("--isolation", f"expected one of {', '.join(ISOLATIONS)}, got {self.isolation!r}")
        if self.network not in NETWORK_MODES:
            raise InputError("--network", f"expected one of {', '.join(NETWORK_MODES)}, got {self.network!r}")
        if self.network == "record" and self.isolation != "sandbox":
            raise InputError(
                "--network", "record mode needs the sandbox (a process run cannot keep the candidate off the network)"
            )
        if self.allow_hosts and self.network != "record":
            raise InputError("--allow-host", "allowed hosts need --network record")
        for host in self.allow_hosts:
            parse_allowed_host(host)
        if self.memory_bytes < 64 << 20:
            raise InputError("--memory", f"at least 64M, got {self.memory_bytes} bytes")
        if self.max_processes < 4:
            raise InputError("--max-processes", f"at least 4, got {self.max_processes}")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise InputError("--timeout", f"expected a positive number of seconds, got {self.timeout_seconds}")
        if self.cpu_seconds is not None and self.cpu_seconds <= 0:
            raise InputError("--cpu-seconds", f"expected a positive number of seconds, got {self.cpu_seconds}")
        if self.cache_dir is not None:
            check_cache_dir(Path(self.cache_dir))

    def as_dict(self) -> dict:
        data = asdict(self)
        data["allow_hosts"] = list(self.allow_hosts)
        return data


# --- can the sandbox start here? -------------------------------------------------------------

_PROBED: dict[str, str] = {}


def bwrap_path() -> str:
    path = shutil.which("bwrap")
    if path is None:
        raise SandboxUnavailable("bubblewrap (bwrap) is not installed or not on PATH")
    return path


def namespace_flags() -> list[str]:
    return [
        "--unshare-user",
        "--uid",
        str(SANDBOX_UID),
        "--gid",
        str(SANDBOX_UID),
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-net",
        "--unshare-cgroup-try",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
    ]


def check_available() -> str:
    """The bwrap binary, once it has proved it can make the namespaces here; else SandboxUnavailable."""
    path = bwrap_path()
    if path in _PROBED:
        if _PROBED[path]:
            raise SandboxUnavailable(_PROBED[path])
        return path
    argv = [path, *namespace_flags(), "--ro-bind", "/", "/", "--proc", "/proc", "--", "/bin/true"]
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
        why = (
            ""
            if done.returncode == 0
            else (done.stderr.decode("utf-8", "replace").strip().splitlines() or [f"bwrap exited with status {done.returncode}"])[
                -1
            ]
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        why = f"bwrap could not run: {exc}"
    _PROBED[path] = why
    if why:
        raise SandboxUnavailable(why)
    return path


# --- what the sandbox sees -------------------------------------------------------------------


def _covered(path: Path, binds: list[Path]) -> bool:
    return any(path == b or b in path.parents for b in binds)


def package_folder() -> Path:
    """The folder of the microctx package this runner runs (bound at PACKAGE_DIR/microctx, so the
    candidate's side imports the very same code, wherever it was installed or checked out)."""
    return Path(__file__).resolve().parents[1]  # microctx/, this file being microctx/candidates/sandbox.py


def python_paths() -> list[Path]:
    """Folders the interpreter needs, read-only: the installations (the package is bound apart)."""
    found: list[Path] = []
    for text in (sys.base_prefix, sys.prefix, os.path.dirname(os.path.realpath(sys.executable))):
        path = Path(text).resolve()
        if path != Path("/") and not _covered(path, [Path("/usr")]):
            found.append(path)
    found.sort(key=lambda p: len(p.parts))
    kept: list[Path] = []
    for path in found:
        if not _covered(path, kept):
            kept.append(path)
    return kept


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    for name in _ETC:
        host = Path("/etc") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.exists():
            args += ["--ro-bind", str(host), str(host)]
    return args


def check_cache_dir(folder: Path) -> Path:
    """A `--cache-dir` is an existing folder that holds no answer bundle and is not (and does not
    hold) the data folder: it is the one place outside the run folder the candidate may write."""
    if not folder.is_dir():
        raise InputError("--cache-dir", f"{folder}: not an existing folder")
    resolved = folder.resolve()
    data_dir = os.environ.get("MICROCTX_DATA_DIR")
    if data_dir and (Path(data_dir).resolve() == resolved or Path(data_dir).resolve().is_relative_to(resolved)):
        raise InputError("--cache-dir", f"{folder}: holds the data folder (MICROCTX_DATA_DIR); choose a folder of its own")
    if resolved == Path.home().resolve() or resolved == Path("/"):
        raise InputError("--cache-dir", f"{folder}: choose a folder of its own, not your home or /")
    for count, path in enumerate(resolved.rglob("*.json")):
        if count >= 10_000:
            break
        try:
            with open(path, "rb") as handle:
                if b"fak-microcontext-answers/1" in handle.read(4096):
                    raise InputError("--cache-dir", f"{path}: an answer bundle; the candidate's cache folder must not hold one")
        except OSError:
            continue
    return resolved


def bwrap_argv(
    bwrap: str,
    run_dir: Path,
    command: list[str],
    *,
    extra: list[tuple[Path, str]] = (),  # type: ignore[assignment]
    proxy_dir: Path | None = None,
    tmp_bytes: int = 256 << 20,
    cache_dir: Path | None = None,
) -> list[str]:
    """The full bwrap command line: namespaces, file system, working directory, then `command`.

    `extra` are (host path, sandbox path) pairs bound read-only (a candidate's own module or
    files); `proxy_dir` (record mode) is bound read-only at PROXY_DIR; `cache_dir` (--cache-dir)
    read-write at CACHE_DIR."""
    # order matters: the private /tmp comes before the binds, so that an installation under /tmp stays visible
    argv = [
        bwrap,
        *namespace_flags(),
        *_system_binds(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/tmp",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        HOME_DIR,
    ]
    for path in python_paths():
        argv += ["--ro-bind", str(path), str(path)]
    argv += ["--ro-bind", str(package_folder()), f"{PACKAGE_DIR}/microctx"]
    for host, inside in extra:
        argv += ["--ro-bind", str(host), inside]
    argv += ["--bind", str(run_dir), RUN_DIR]
    if proxy_dir is not None:
        argv += ["--ro-bind", str(proxy_dir), PROXY_DIR]
    if cache_dir is not None:
        argv += ["--bind", str(cache_dir), CACHE_DIR]
    argv += ["--chdir", RUN_DIR, "--", *command]
    return argv


# --- limits and the kernel's accounting ------------------------------------------------------


def _cgroup_mounts() -> dict[str, Path]:
    """Controller (or 'unified') -> mount point, from /proc/self/mountinfo."""
    mounts: dict[str, Path] = {}
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return mounts
    for line in lines:
        left, _, right = line.partition(" - ")
        fstype, _, options = right.split(" ")[:3] if len(right.split(" ")) >= 3 else ("", "", "")
        point = Path(left.split(" ")[4])
        if fstype == "cgroup2":
            mounts["unified"] = point
        elif fstype == "cgroup":
            for option in options.split(","):
                if option in ("memory", "pids", "cpuacct"):
                    mounts[option] = point
    return mounts


def _own_cgroups() -> dict[str, str]:
    own: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            own["unified"] = path
        for name in controllers.split(","):
            own[name] = path
    return own


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Limits:
    """The run's limits: cgroups made for it where possible, rlimits otherwise; kills and accounting.

    `preexec()` runs in the child before exec (joins the cgroups, sets the rlimits); after the run,
    `peak_memory()`, `cpu_seconds()`, `memory_exceeded()`, `processes_refused()`, then `close()`
    (kills whatever is left, removes the cgroups)."""

    def __init__(self, settings: SandboxSettings, name: str):
        self.settings = settings
        self.groups: dict[str, Path] = {}  # memory / pids / cpuacct / unified -> the run's cgroup folder
        self._procs_files: list[Path] = []
        self._make_cgroups(name)
        self.enforced_by = {
            "memory": "cgroup" if self._has("memory") else "rlimit RLIMIT_AS (per process)",
            "processes": "cgroup" if self._has("pids") else "rlimit RLIMIT_NPROC (counts every process of the user)",
            "cpu": "rlimit RLIMIT_CPU (per process)" if settings.cpu_seconds else "none",
            "timeout": (
                "none"
                if not settings.timeout_seconds
                else "runner (kills the pid namespace)"
                if settings.isolation == "sandbox"
                else "runner (kills the process group and the run's cgroups)"
            ),
            "file_size": "rlimit RLIMIT_FSIZE",
        }
        if not self._has("pids") and os.geteuid() == 0:
            if settings.isolation == "process":  # chosen knowingly: say what is not enforced
                self.enforced_by["processes"] = "none (no pids cgroup, and RLIMIT_NPROC does not bind root)"
                self._procs_files = [self._procs_file(c) for c in self.groups]
                return
            self.close()
            raise SandboxUnavailable(
                "running as root without a writable pids cgroup, the process limit cannot be enforced "
                "(RLIMIT_NPROC does not bind root); run as a normal user or allow cgroups"
            )
        self._procs_files = [self._procs_file(c) for c in self.groups]

    def _has(self, controller: str) -> bool:
        return controller in self.groups or "unified" in self.groups and controller in ("memory", "pids", "cpuacct")

    def _procs_file(self, controller: str) -> Path:
        return self.groups[controller] / "cgroup.procs"

    def _make_cgroups(self, name: str) -> None:
        mounts, own = _cgroup_mounts(), _own_cgroups()
        s = self.settings
        if "unified" in mounts and not any(c in mounts for c in ("memory", "pids")):
            folder = mounts["unified"] / own.get("unified", "/").lstrip("/") / name
            try:
                folder.mkdir()
                self.groups["unified"] = folder
                _write(folder / "memory.max", str(s.memory_bytes))
                if (folder / "memory.swap.max").exists():
                    _write(folder / "memory.swap.max", "0")
                _write(folder / "pids.max", str(s.max_processes))
            except OSError:
                self.close()
            return
        for controller in ("memory", "pids", "cpuacct"):
            if controller not in mounts:
                continue
            folder = mounts[controller] / own.get(controller, "/").lstrip("/") / name
            try:
                folder.mkdir()
            except OSError:
                continue
            self.groups[controller] = folder
            try:
                if controller == "memory":
                    _write(folder / "memory.limit_in_bytes", str(s.memory_bytes))
                    if (folder / "memory.memsw.limit_in_bytes").exists():
                        _write(folder / "memory.memsw.limit_in_bytes", str(s.memory_bytes))
                elif controller == "pids":
                    _write(folder / "pids.max", str(s.max_processes))
            except OSError:
                self.groups.pop(controller)
                _remove(folder)

    def preexec(self) -> None:
        """In the child, before exec: join the run's cgroups, set the rlimits (only os calls here)."""
        pid = str(os.getpid()).encode()
        for path in self._procs_files:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        s = self.settings
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (s.max_file_bytes, s.max_file_bytes))
        if s.cpu_seconds:
            resource.setrlimit(resource.RLIMIT_CPU, (s.cpu_seconds, s.cpu_seconds + 5))
        if not self._has("memory"):
            resource.setrlimit(resource.RLIMIT_AS, (s.memory_bytes, s.memory_bytes))
        if not self._has("pids"):
            resource.setrlimit(resource.RLIMIT_NPROC, (s.max_processes, s.max_processes))

    def describe(self) -> dict:
        """The manifest's `limits` object."""
        s = self.settings
        return {
            "memory_bytes": s.memory_bytes,
            "max_processes": s.max_processes,
            "timeout_seconds": s.timeout_seconds,
            "cpu_seconds": s.cpu_seconds,
            "max_file_bytes": s.max_file_bytes,
            "enforced_by": dict(self.enforced_by),
        }

    def _file(self, controller: str, v1: str, v2: str) -> Path | None:
        if controller in self.groups:
            return self.groups[controller] / v1
        if "unified" in self.groups:
            return self.groups["unified"] / v2
        return None

    def peak_memory(self) -> int | None:
        path = self._file("memory", "memory.max_usage_in_bytes", "memory.peak")
        return _read_int(path) if path else None

    def cpu_seconds(self) -> float | None:
        if "cpuacct" in self.groups:
            nanoseconds = _read_int(self.groups["cpuacct"] / "cpuacct.usage")
            return nanoseconds / 1e9 if nanoseconds is not None else None
        if "unified" in self.groups:
            try:
                for line in (self.groups["unified"] / "cpu.stat").read_text().splitlines():
                    key, text = line.split()
                    if key == "usage_usec":
                        return int(text) / 1e6
            except (OSError, ValueError):
                return None
        return None

    def memory_exceeded(self) -> bool:
        if "memory" in self.groups:
            try:
                for line in (self.groups["memory"] / "memory.oom_control").read_text().splitlines():
                    key, value = line.split()
                    if key == "oom_kill" and int(value) > 0:
                        return True
            except (OSError, ValueError):
                pass
            return False
        if "unified" in self.groups:
            return _event_count(self.groups["unified"] / "memory.events", "oom_kill") > 0
        return False

    def processes_refused(self) -> int:
        """How many forks the process limit refused (cgroups only; 0 when unknown)."""
        path = self._file("pids", "pids.events", "pids.events")
        return _event_count(path, "max") if path else 0

    def kill_all(self) -> None:
        """SIGKILL every process left in the run's cgroups, until they are empty (at most ~5 s)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pids: set[int] = set()
            for path in self._procs_files:
                try:
                    pids.update(int(p) for p in path.read_text().split())
                except (OSError, ValueError):
                    pass
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.01)

    def close(self) -> None:
        self.kill_all()
        for folder in self.groups.values():
            _remove(folder)
        self.groups = {}
        self._procs_files = []


def _event_count(path: Path, key: str) -> int:
    try:
        for line in path.read_text().splitlines():
            name, value = line.split()
            if name == key:
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _remove(folder: Path) -> None:
    for _ in range(100):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)
