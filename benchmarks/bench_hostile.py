"""How `microctx fetch` ends against hostile local servers: wall time, peak memory, exit code.

Each case runs `microctx fetch` as its own process against a server on 127.0.0.1 that loops its
`Link` header, drips a byte a second, serves a gzip bomb, a lying `Content-Encoding` or a redirect
loop (tests/fake_github.py HostileServer); peak memory is the child's maximum resident set size.
Figures are printed, not asserted.

    python benchmarks/bench_hostile.py [--deadline 3] [--bomb-mib 512] [--modes loop,drip,...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fake_github import HostileServer  # noqa: E402


def run(mode: str, deadline: float, bomb_mib: int) -> None:
    with tempfile.TemporaryDirectory() as folder, HostileServer(mode, bomb_bytes=bomb_mib << 20, drip_bytes=600) as server:
        argv = [
            sys.executable,
            "-m",
            "microctx",
            "fetch",
            "o/r",
            "--output",
            os.path.join(folder, "raw.json"),
            "--api-url",
            server.url,
            "--deadline",
            str(deadline),
        ]
        env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN")}
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        assert proc.stderr is not None
        with proc.stderr:
            err = proc.stderr.read().decode().strip().splitlines()[-1]
        extra = f", bomb {len(server.bomb) / 2**10:.0f} KiB on the wire -> {bomb_mib} MiB" if mode == "bomb" else ""
        print(
            f"{mode:6s} exit {os.waitstatus_to_exitcode(status)}  {wall:6.2f} s  peak {usage.ru_maxrss / 1024:6.0f} MiB"
            f"  requests {server.requests}{extra}\n       {err[:160]}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deadline", type=float, default=3.0)
    parser.add_argument("--bomb-mib", type=int, default=512)
    parser.add_argument("--modes", default="loop,cycle,empty,drip,bomb,lying_gzip,redirect_loop")
    args = parser.parse_args()
    for mode in args.modes.split(","):
        run(mode, args.deadline, args.bomb_mib)


if __name__ == "__main__":
    main()
