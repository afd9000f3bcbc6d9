"""What a run asks for (`SandboxSettings`, schema microctx-sandbox/1) and the sizes it is given in.

Read by the runner (microctx.candidates.runner), the sandbox (microctx.candidates.sandbox) and
the limits (microctx.candidates.limits); the README's "Sandbox" section says what each means.
"""

from __future__ import annotations

import re
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
            from microctx.candidates.cachedir import check_cache_dir

            check_cache_dir(Path(self.cache_dir))

    def as_dict(self) -> dict:
        data = asdict(self)
        data["allow_hosts"] = list(self.allow_hosts)
        return data
