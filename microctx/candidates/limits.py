"""The run's limits: cgroups made for it (v1 or v2) where possible, rlimits otherwise; kills and accounting.

`Limits(settings, name)` makes the run's cgroups (named `name`, which `run_name()` makes: it
carries the runner's pid and start time), `preexec()` joins them in the child, and after the run
`peak_memory()`, `cpu_seconds()`, `memory_exceeded()`, `processes_refused()`, then `close()`
(kills whatever is left, removes the cgroups). A runner killed before `close()` leaves its
cgroups behind: `remove_stale_cgroups()` (called by every run) kills what is left in the cgroups
of runners that are gone and removes them.
"""

from __future__ import annotations

import os
import resource
import signal
import time
from pathlib import Path

from microctx.candidates.settings import SandboxSettings, SandboxUnavailable

RUN_PREFIX = "microctx-run-"


def _start_time(pid: int) -> str | None:
    """The kernel's start time of process `pid` (clock ticks since boot), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def run_name() -> str:
    """`microctx-run-PID-START-`: names the run's folder and cgroups by the runner that owns them."""
    return f"{RUN_PREFIX}{os.getpid()}-{_start_time(os.getpid())}-"


def owner_is_gone(name: str) -> bool:
    """True when `name` (a run folder or cgroup) belongs to a runner that no longer runs."""
    parts = name[len(RUN_PREFIX) :].split("-")
    if not name.startswith(RUN_PREFIX) or len(parts) < 3 or not parts[0].isdigit():
        return False
    return _start_time(int(parts[0])) != parts[1]


def _lines(path: str) -> list[str]:
    """The lines of a /proc file; none when it cannot be read (no cgroups then)."""
    try:
        return Path(path).read_text().splitlines()
    except OSError:
        return []


def _cgroup_mounts() -> dict[str, Path]:
    """Controller (or 'unified') -> mount point, from /proc/self/mountinfo."""
    mounts: dict[str, Path] = {}
    for line in _lines("/proc/self/mountinfo"):
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
    """Controller (or 'unified') -> this process's cgroup path, from /proc/self/cgroup."""
    own: dict[str, str] = {}
    for line in _lines("/proc/self/cgroup"):
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


def remove_stale_cgroups() -> list[str]:
    """Kill what is left in, and remove, the cgroups of killed runners (beside this runner's own)."""
    removed = []
    mounts, own = _cgroup_mounts(), _own_cgroups()
    for controller, point in mounts.items():
        parent = point / own.get(controller, "/").lstrip("/")
        try:
            names = [n for n in os.listdir(parent) if n.startswith(RUN_PREFIX)]
        except OSError:
            continue
        for name in names:
            if owner_is_gone(name):
                _kill_cgroup(parent / name)
                if not (parent / name).exists():
                    removed.append(str(parent / name))
    return removed


def _kill_cgroup(folder: Path) -> None:
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        try:
            pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            pids = []
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if not pids:
            break
        time.sleep(0.01)
    _remove(folder)
