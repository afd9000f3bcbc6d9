"""What a run asks for (`SandboxSettings`, schema microctx-sandbox/1) and the sizes it is given in.

Read by the runner (microctx.candidates.runner), the sandbox (microctx.candidates.sandbox) and
the limits (microctx.candidates.limits); the README's "Sandbox" section says what each means.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from microctx.contract.schemas import SANDBOX_SCHEMA
from microctx.errors import InputError

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


MAX_MEMORY = 64 << 40  # 64 TiB: more than any cgroup here can be given
MAX_PROCESSES = 65536  # processes and threads of one run: past this it is a typo, not a limit
MAX_CPU_SECONDS = 30 * 86400  # CPU time of one process: 30 days, as the wall timeout's bound


def parse_size(text: str | int) -> int:
    """`2G`, `512M`, `1.5GiB`, `4096` (bytes) -> bytes; an InputError otherwise."""
    if isinstance(text, int):
        return text
    match = _SIZE.match(text)
    if not match:
        raise InputError("--memory", f"expected a size like 2G or 512M, got {text!r}")
    number, unit = float(match.group(1)), match.group(2).lower()
    size = number * (1 << (10 * " kmgt".index(unit or " ")))
    if not size <= MAX_MEMORY:  # 9999999999999999999999T, or a float overflow
        raise InputError("--memory", f"at most {MAX_MEMORY >> 40}T, got {text!r}")
    return int(size)


@dataclass(frozen=True)
class GatewaySettings:
    """The model gateway (microctx.candidates.gateway): the real endpoint, the name of the variable
    holding its key (read by the runner only), budgets, prices (dollars per million tokens: input,
    output, cached input) and the runner's own response cache folder (never the candidate's)."""

    endpoint: str
    key_env: str | None = None
    max_calls: int | None = None
    max_tokens: int | None = None
    max_dollars: float | None = None
    price_in: float = 0.0
    price_out: float = 0.0
    price_cached: float | None = None  # None: as price_in
    cache: str | None = None

    def __post_init__(self) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(self.endpoint)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InputError(
                "--model-endpoint", f"expected an http(s) URL such as https://api.openai.com/v1, got {self.endpoint!r}"
            )
        if self.key_env is not None and (not self.key_env.replace("_", "").isalnum() or self.key_env[0].isdigit()):
            raise InputError("--model-key-env", f"expected an environment variable name (never the key), got {self.key_env!r}")
        for name, value in (("--max-model-calls", self.max_calls), ("--max-tokens", self.max_tokens)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise InputError(name, f"expected a positive whole number, got {value!r}")
        numbers = [("--max-dollars", self.max_dollars), ("--model-price", self.price_in), ("--model-price", self.price_out)]
        for name, number in [*numbers, ("--model-price", self.price_cached)]:
            if number is not None and (isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number < 1e9):
                raise InputError(name, f"expected a non-negative number, got {number!r}")
        if self.max_dollars is not None and not (self.price_in or self.price_out):
            raise InputError(
                "--max-dollars", "a dollar budget needs prices (--model-price IN:OUT[:CACHED], dollars per million tokens)"
            )


def parse_price(text: str) -> tuple[float, float, float | None]:
    """`IN:OUT[:CACHED]` (dollars per million tokens) -> (in, out, cached or None)."""
    parts = text.split(":")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) not in (2, 3) or any(not 0 <= n < 1e9 for n in numbers):
        raise InputError("--model-price", f"expected IN:OUT[:CACHED] in dollars per million tokens, got {text!r}")
    return numbers[0], numbers[1], numbers[2] if len(numbers) == 3 else None


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
    gateway: GatewaySettings | None = None  # the model gateway (--model-endpoint)
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
        if not 4 <= self.max_processes <= MAX_PROCESSES:
            raise InputError("--max-processes", f"expected 4 to {MAX_PROCESSES}, got {self.max_processes}")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise InputError("--timeout", f"expected a positive number of seconds, got {self.timeout_seconds}")
        if self.cpu_seconds is not None and not 0 < self.cpu_seconds <= MAX_CPU_SECONDS:
            raise InputError("--cpu-seconds", f"expected 1 to {MAX_CPU_SECONDS} seconds (30 days), got {self.cpu_seconds}")
        if self.cache_dir is not None:
            from microctx.candidates.cachedir import check_cache_dir

            check_cache_dir(Path(self.cache_dir))
        if self.gateway is not None and self.isolation != "sandbox":
            raise InputError("--model-endpoint", "the model gateway needs the sandbox (a process run reaches the model directly)")
        if self.gateway is not None and self.gateway.cache is not None and self.cache_dir is not None:
            model, candidate = Path(self.gateway.cache).resolve(), Path(self.cache_dir).resolve()
            if model == candidate or model.is_relative_to(candidate) or candidate.is_relative_to(model):
                raise InputError(
                    "--model-cache",
                    f"{self.gateway.cache}: the gateway's cache must be the runner's alone, not the candidate's "
                    f"--cache-dir {self.cache_dir}, inside it or above it (a candidate could write the answers it is served)",
                )

    def as_dict(self) -> dict:
        data = asdict(self)
        data["allow_hosts"] = list(self.allow_hosts)
        if data["gateway"] is None:
            del data["gateway"]  # (so that a configuration without a gateway keeps its key)
        return data


GATEWAY_KEYS = ("model_endpoint", "model_key_env", "max_model_calls", "max_tokens", "max_dollars", "model_price", "model_cache")


def gateway_from_table(table: dict) -> GatewaySettings | None:
    """A sweep's `[sandbox]` model keys (as the `run` options: model_endpoint, model_key_env,
    max_model_calls, max_tokens, max_dollars, model_price "IN:OUT[:CACHED]", model_cache) ->
    GatewaySettings, or None without `model_endpoint`. An InputError names the option."""
    found = {key: table[key] for key in GATEWAY_KEYS if key in table}
    if not found:
        return None
    if "model_endpoint" not in found:
        raise InputError("--model-endpoint", "the model keys need model_endpoint")
    for key in ("model_endpoint", "model_key_env", "model_price", "model_cache"):
        if key in found and not isinstance(found[key], str):
            raise InputError(f"--{key.replace('_', '-')}", f"expected a string, got {found[key]!r}")
    price_in, price_out, price_cached = parse_price(found["model_price"]) if "model_price" in found else (0.0, 0.0, None)
    return GatewaySettings(
        endpoint=found["model_endpoint"],
        key_env=found.get("model_key_env"),
        max_calls=found.get("max_model_calls"),
        max_tokens=found.get("max_tokens"),
        max_dollars=found.get("max_dollars"),
        price_in=price_in,
        price_out=price_out,
        price_cached=price_cached,
        cache=found.get("model_cache"),
    )
