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
import shutil
import subprocess
import sys
from pathlib import Path

from microctx.candidates.limits import Limits
from microctx.candidates.settings import (
    CACHE_DIR,
    CACHE_ENV,
    HOME_DIR,
    IMPORT_DIR,
    PACKAGE_DIR,
    PROXY_DIR,
    RUN_DIR,
    SANDBOX_UID,
    SandboxSettings,
    SandboxUnavailable,
    parse_size,
)

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

__all__ = [
    "CACHE_DIR",
    "CACHE_ENV",
    "HOME_DIR",
    "IMPORT_DIR",
    "PACKAGE_DIR",
    "PROXY_DIR",
    "RUN_DIR",
    "Limits",
    "SandboxSettings",
    "SandboxUnavailable",
    "parse_size",
]

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


NOBODY_UID = 65534


def host_uid() -> int:
    """The host uid the candidate runs as: `nobody` (65534) when the runner is root, else the runner's own."""
    return NOBODY_UID if os.geteuid() == 0 else os.geteuid()


# Run by root before bwrap (in a private mount namespace made by `unshare`, gone with the run): bind
# each source (a folder root may reach and `nobody` may not, /root/... or a 0700 tmp folder) onto a
# staging point under the run folder, then drop to `nobody` and exec bwrap, which binds the staged
# points. Nothing of this is visible on the host: the mounts live in the private namespace only.
_STAGE_SCRIPT = 'while [ "$1" != "--" ]; do mount --bind "$1" "$2" || exit 125; shift 2; done; shift; exec "$@"'


def drop_privileges(argv: list[str], staged: list[tuple[str, str]]) -> list[str]:
    """`argv` (bwrap ...) as the unprivileged host uid: unchanged for a normal user; for root,
    wrapped in `unshare --mount` (the staging binds) and `setpriv` (to nobody, no new privileges)."""
    if os.geteuid() != 0:
        return argv
    uid = str(NOBODY_UID)
    pairs = [word for pair in staged for word in pair]
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "/bin/sh",
        "-c",
        _STAGE_SCRIPT,
        "sh",
        *pairs,
        "--",
        *drop,
        *argv,
    ]


def check_available() -> str:
    """The bwrap binary, once it has proved it can make the namespaces here; else SandboxUnavailable."""
    path = bwrap_path()
    if path in _PROBED:
        if _PROBED[path]:
            raise SandboxUnavailable(_PROBED[path])
        return path
    argv = drop_privileges(
        [
            path,
            *namespace_flags(),
            "--ro-bind",
            "/usr",
            "/usr",
            *_links(),
            "--proc",
            "/proc",
            "--remount-ro",
            "/",
            "--",
            "/bin/true",
        ],
        [],
    )
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        why = "" if done.returncode == 0 else (lines or [f"bwrap exited with status {done.returncode}"])[-1]
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


def _as_on_host(host: Path) -> list[str]:
    """bwrap arguments that show `host` inside as on the host: a symlink as the same link, a file
    or folder bound read-only; nothing when it is missing."""
    if host.is_symlink():
        return ["--symlink", os.readlink(host), str(host)]
    if host.exists():
        return ["--ro-bind", str(host), str(host)]
    return []


def _links() -> list[str]:
    """/bin, /lib, ... as on the host (links into /usr, or folders bound read-only)."""
    return [arg for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32") for arg in _as_on_host(Path("/") / name)]


def _system_binds() -> list[str]:
    """/usr, the top-level links into it and the few /etc entries a candidate needs, read-only."""
    return ["--ro-bind", "/usr", "/usr", *_links(), *(arg for name in _ETC for arg in _as_on_host(Path("/etc") / name))]


class _Binds:
    """The binds of one run. For root, every source outside the system folders is staged: bound
    (in the launcher's private mount namespace) onto a point under `stage`, which `nobody` can
    reach, and bwrap binds that point; otherwise bwrap binds the source itself."""

    def __init__(self, stage: Path | None):
        self.stage = stage
        self.staged: list[tuple[str, str]] = []
        self.args: list[str] = []

    def add(self, option: str, host: Path, inside: str) -> None:
        source = str(host)
        if self.stage is not None:
            point = self.stage / str(len(self.staged))
            if host.is_dir():
                point.mkdir(mode=0o755)
            else:
                point.touch(mode=0o644)
            self.staged.append((source, str(point)))
            source = str(point)
        self.args += [option, source, inside]


def bwrap_argv(
    bwrap: str,
    run_dir: Path,
    command: list[str],
    *,
    extra: list[tuple[Path, str]] = (),  # type: ignore[assignment]
    proxy_dir: Path | None = None,
    tmp_bytes: int = 256 << 20,
    cache_dir: Path | None = None,
    stage: Path | None = None,
) -> list[str]:
    """The full command line: (for root: staging and the drop to nobody,) bwrap's namespaces,
    file system, working directory, then `command`.

    `extra` are (host path, sandbox path) pairs bound read-only (a candidate's own module or
    files); `proxy_dir` (record mode) is bound read-only at PROXY_DIR; `cache_dir` (--cache-dir)
    read-write at CACHE_DIR; `stage` (root only: a folder `nobody` can reach) holds the staging
    points. Every bind is nosuid and nodev (bwrap's binds always are), and once every mount
    point exists the sandbox's root is remounted read-only."""
    binds = _Binds(stage if os.geteuid() == 0 else None)
    for path in python_paths():
        binds.add("--ro-bind", path, str(path))
    binds.add("--ro-bind", package_folder(), f"{PACKAGE_DIR}/microctx")
    for host, inside in extra:
        binds.add("--ro-bind", host, inside)
    binds.add("--bind", run_dir, RUN_DIR)
    if proxy_dir is not None:
        binds.add("--ro-bind", proxy_dir, PROXY_DIR)
    if cache_dir is not None:
        binds.add("--bind", cache_dir, CACHE_DIR)
    # order matters: the private /tmp comes before the binds, so that an installation under /tmp stays visible
    argv = [bwrap, *namespace_flags(), *_system_binds(), "--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(tmp_bytes), "--tmpfs", "/tmp", "--size", str(tmp_bytes), "--tmpfs", HOME_DIR]
    argv += [*binds.args, "--remount-ro", "/", "--chdir", RUN_DIR, "--", *command]
    return drop_privileges(argv, binds.staged)
