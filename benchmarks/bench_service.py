"""The grading service under load: submissions per second and latency with concurrent clients.

A real `microctx serve` (uvicorn, a subprocess) on s8f, with its state in SQLite and in a real
PostgreSQL server started for the run (tests/postgres.py), the Ladder on and no quota. Each of
C clients (threads, each its own team) sends N submissions over HTTP, after a single client
has sent S one after another; printed: submissions per
second, latency p50 and p99, and beside them the in-process time of the same work without HTTP
or the database: `grade()` alone, and the service's whole scoring (`parse_submission` +
`score`). Afterwards the state is checked: every 201 is exactly one scored submission and one
ledger entry (nothing lost, nothing counted twice).

    python benchmarks/bench_service.py [--clients 50] [--per-client 4] [--sequential 20] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(Path(__file__).resolve().parent), str(ROOT / "tests")]

import numpy as np  # noqa: E402
import orjson  # noqa: E402
from postgres import PostgresServer  # noqa: E402
from service_support import ServiceProcess, add_team, post, private_answers, submission  # noqa: E402
from timing import best_of  # noqa: E402

from microctx.contract.schemas import load_answers  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402


def in_process(answers_path: Path, public: Path, document: bytes) -> tuple[float, float, float]:
    """In seconds, the fastest of 5: grade() alone; the submission's bytes parsed, validated and
    graded as `microctx grade` does it in-process (`check_submission_document` + `grade`); the
    service's whole scoring (`parse_submission` + `score`)."""
    from microctx._io.jsonio import parse_json
    from microctx.contract.schemas import check_submission_document
    from microctx.contract.score import grade
    from microctx.service.competition import load_competition, parse_submission, score

    comp = load_competition(answers_path, public, "00" * 32)
    parsed = parse_submission(document, comp)
    return (
        best_of(5, lambda: grade(comp.answers, parsed)),
        best_of(5, lambda: grade(comp.answers, check_submission_document(parse_json(document, "s"), "s"))),
        best_of(5, lambda: score(comp, parse_submission(document, comp))),
    )


def load(url: str, tokens: list[str], documents: list[bytes], per_client: int) -> tuple[list[float], list[int], float]:
    barrier = threading.Barrier(len(tokens))

    def client(index: int) -> list[tuple[float, int]]:
        barrier.wait()
        out = []
        for k in range(per_client):
            start = time.perf_counter()
            status = post(url, tokens[index], documents[(index + k) % len(documents)]).status_code
            out.append((time.perf_counter() - start, status))
        return out

    started = time.perf_counter()
    with ThreadPoolExecutor(len(tokens)) as pool:
        results = [r for rs in pool.map(client, range(len(tokens))) for r in rs]
    return [r[0] for r in results], [r[1] for r in results], time.perf_counter() - started


def counted(state: str) -> tuple[int, int]:
    from sqlalchemy import text

    from microctx.service.db import engine_for

    engine = engine_for(state)
    with engine.connect() as connection:
        scored = connection.execute(text("SELECT COUNT(*) FROM submissions WHERE state = 'scored'")).scalar()
        entries = connection.execute(text("SELECT COUNT(*) FROM ledger")).scalar()
    engine.dispose()
    return int(scored), int(entries)


def run_backend(
    name: str, state: str, work: Path, answers_path: Path, public: Path, documents: list[bytes], args, local_s: float
) -> None:
    clients, per_client, sequential = args.clients, args.per_client, args.sequential
    with ServiceProcess(answers_path, public, state, log=work / f"serve-{name}.log") as running:
        tokens = [add_team(state, f"{name}-{i}") for i in range(max(clients, 1))]
        for concurrency, each in ((1, sequential), (clients, per_client)):
            latencies, statuses, wall = load(running.url, tokens[:concurrency], documents, each)
            ok = statuses.count(201)
            p50 = float(np.percentile(latencies, 50))
            print(
                f"{name}\t{concurrency}\t{len(statuses)}\t{ok}\t{ok / wall:.1f}\t{p50 * 1e3:.1f}"
                f"\t{np.percentile(latencies, 99) * 1e3:.1f}\t{p50 / local_s:.2f}",
                flush=True,
            )
        scored, entries = counted(state)
        total = sequential + per_client * clients
        print(
            f"{name}: {scored} scored submissions and {entries} ledger entries for {total} accepted "
            f"({'nothing lost or double-counted' if scored == entries == total else 'MISMATCH'})",
            flush=True,
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--per-client", type=int, default=4)
    parser.add_argument("--sequential", type=int, default=20, help="submissions of the single client first")
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args(argv)
    paths = data.s8f()
    answers = load_answers(paths.answers)
    ids = [a["id"] for a in answers["answers"] if a["split"] == "test"]
    documents = [orjson.dumps(submission(answers, set(ids[i::7]))) for i in range(7)]
    with tempfile.TemporaryDirectory(prefix="microctx-bench-service-") as folder:
        work = Path(folder)
        private = private_answers(Path(paths.answers), work / "private")
        grade_s, local_s, score_s = in_process(private, Path(paths.public), documents[0])
        print(
            f"in-process on s8f: grade() {grade_s * 1e3:.1f} ms; parse + validate + grade (as `microctx grade`) "
            f"{local_s * 1e3:.1f} ms; the service's parse + score {score_s * 1e3:.1f} ms"
        )
        print("backend\tclients\tsent\tscored\tper_second\tp50_ms\tp99_ms\tp50_over_in_process_grade")
        for name in args.backends.split(","):
            if name == "sqlite":
                run_backend(name, f"sqlite:///{work / 'state.db'}", work, private, Path(paths.public), documents, args, local_s)
            else:
                with PostgresServer() as pg:
                    run_backend(name, pg.new_database(), work, private, Path(paths.public), documents, args, local_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
