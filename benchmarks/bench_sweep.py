"""Tuning sweeps: the 16-configuration text-only sweep on s8f, sequential against two local workers,
and the per-task overhead of running configurations on a Dask cluster.

    python benchmarks/bench_sweep.py              # both parts
    python benchmarks/bench_sweep.py --skip-dask  # the text-only sweep only

1. `sweeps/text-only.toml` (16 configurations) with `workers=1`, then `workers=2`, each into a
   fresh folder (nothing resumed): wall seconds of the whole sweep and the speed-up. The runs
   are separate processes, so two workers need two free cores to approach 2x.
2. The Dask path's overhead per task: N configurations of a trivial command candidate (it writes
   an empty submission), first on the local pool, then on a two-worker `distributed.LocalCluster`
   (worker processes, one thread each) with the same parallelism. (Dask wall - local wall) / N
   is what shipping a task, its inputs and its result through the scheduler costs per task.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from microctx.candidates.devkit import make_devkit  # noqa: E402
from microctx.contract.canonical import dumps  # noqa: E402
from microctx.contract.schemas import load_answers  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402
from microctx.corpus.public import load_corpus  # noqa: E402
from microctx.tuning.sweep import run_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TRIVIAL = (
    'import hashlib, json, sys; d = hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest(); '
    'json.dump({"corpus_sha256": d, "answers": []}, open(sys.argv[2], "w"))'
)


def timed_sweep(spec, public, devkit, out, **kw):
    start = time.perf_counter()
    result = run_sweep(spec, public, devkit, out, progress=False, **kw)
    return time.perf_counter() - start, result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--skip-dask", action="store_true")
    parser.add_argument("--tasks", type=int, default=16, help="configurations in the Dask overhead part")
    args = parser.parse_args()
    paths = data.s8f()
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        folder = Path(tmp)
        devkit = folder / "devkit.json"
        devkit.write_bytes(dumps(make_devkit(load_answers(paths.answers), corpus=load_corpus(paths.public))))
        spec = ROOT / "sweeps" / "text-only.toml"
        walls = {}
        for workers in (1, 2):
            wall, result = timed_sweep(spec, paths.public, devkit, folder / f"text-only-{workers}", workers=workers)
            cpu = sum(r["cpu_seconds"] or 0 for r in result.rows)
            walls[workers] = wall
            chosen = result.selected["row"] if result.selected else None
            print(
                f"text-only sweep, {len(result.rows)} configurations, {workers} worker{'s' if workers > 1 else ''}: "
                f"{wall:.1f} s wall ({cpu:.1f} s candidate CPU, {result.failed} failed); chosen "
                + (", ".join(f"{k[6:]}={v}" for k, v in chosen.items() if k.startswith("param.")) if chosen else "none")
            )
        print(f"speed-up with 2 local workers: {walls[1] / walls[2]:.2f}x")

        if args.skip_dask:
            return 0
        from distributed import Client, LocalCluster

        grid = ", ".join(str(i) for i in range(args.tasks))
        trivial = folder / "trivial.toml"
        script = folder / "trivial.py"
        script.write_text(TRIVIAL.replace("; ", "\n"))
        trivial.write_text(
            f'[candidate]\nname = "trivial"\ncmd = "{{python}} {script} {{public}} {{submission}}"\n'
            f'[grid]\ni = [{grid}]\n[select]\nmetric = "f1"\n'
        )
        local_wall, local = timed_sweep(trivial, paths.public, devkit, folder / "trivial-local", workers=2)
        with (
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
            Client(cluster, set_as_default=False) as client,
        ):
            dask_wall, remote = timed_sweep(trivial, paths.public, devkit, folder / "trivial-dask", scheduler=client)
        task = sum(r["wall_seconds"] or 0 for r in local.rows) / len(local.rows)
        print(
            f"trivial candidate, {args.tasks} configurations, 2 workers: local pool {local_wall:.2f} s, "
            f"Dask LocalCluster {dask_wall:.2f} s (one run itself: {task:.2f} s wall); "
            f"Dask overhead {(dask_wall - local_wall) / args.tasks * 1000:+.0f} ms per task "
            f"({remote.failed + local.failed} failed)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
