"""Every figure of issue 24 in one run, each as a ratio to its floor beside its goal (`make bench`).

    python benchmarks/bench_all.py [--records 100000] [--repeat 3] [--skip-demo] [--work DIR]

Floors are measured in the same run, on the same (possibly loaded) machine, so a ratio stays
comparable when the machine is busy; the load average is printed first. There is no Go reference
tool on this machine: start-up figures are ratios to an interpreter-start floor (`python -c pass`)
instead, which is the part of any Python command no code of ours can remove. Figures:
- start-up: `microctx --version` and `microctx grade` (s8f oracle) over the interpreter floor
  (goal for grade: 3x the Go tool, here stated against the interpreter floor);
- the path policy, folder locks and one ledger append, in process (goal < 10 ms per command);
- `report grade` over the one-cell papermill-to-HTML floor (goal 2x); `microctx demo` (goal 30 s);
- `microctx slices` over `microctx grade` on s8f (goal 2x; the stats engineer's path);
- freeze, verify and grade at `--records` records: seconds, peak memory, bytes per record
  (goals at 1,000,000 records: < 60 s and < 2 GiB).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_reports  # noqa: E402
import scale  # noqa: E402

MICROCTX = [sys.executable, "-m", "microctx"]
ROWS: list[tuple[str, str, str]] = []
CHILD_ENV: dict[str, str] = {}  # bytecode caches on (see main): a user's installed package has them


def say(figure: str, value: str, goal: str) -> None:
    ROWS.append((figure, value, goal))
    print(f"{figure:<58} {value:<28} goal: {goal}", flush=True)


def timed(argv: list[str], repeat: int = 1, env: dict | None = None) -> tuple[float, float]:
    """(best wall seconds, peak MiB of that run) of a command run `repeat` times. The peak comes from
    /usr/bin/time when present: a child forked from this (large) process would otherwise report
    this process's resident size as its own maximum (Linux keeps ru_maxrss across exec)."""
    best, peak = float("inf"), 0.0
    measure = Path(shutil.which("time") or "") if shutil.which("time") else None
    for _ in range(repeat):
        with tempfile.NamedTemporaryFile(suffix=".rss") as rss:
            command = ["/usr/bin/time", "-o", rss.name, "-f", "%M", *argv] if measure else argv
            start = time.perf_counter()
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**CHILD_ENV, **(env or {})})
            _, status, usage = os.wait4(child.pid, 0)
            wall = time.perf_counter() - start
            code = os.waitstatus_to_exitcode(status)
            if code not in (0, 1):
                sys.exit(f"{' '.join(map(str, argv[:4]))} failed ({code}): {child.stderr.read().decode()[-2000:]}")
            text = Path(rss.name).read_text().strip().splitlines() if measure else []
            kib = int(text[-1]) if text and text[-1].isdigit() else usage.ru_maxrss
        if wall < best:
            best, peak = wall, kib / 1024
    return best, peak


def startup(work: Path, repeat: int, s8f, oracle: Path) -> float:
    floor, _ = timed([sys.executable, "-c", "pass"], repeat)
    say("interpreter start (floor)", f"{floor * 1000:.0f} ms", "-")
    version, _ = timed([*MICROCTX, "--version"], repeat)
    say("microctx --version", f"{version * 1000:.0f} ms = {version / floor:.1f}x floor", "-")
    grade_argv = [
        *MICROCTX,
        "grade",
        "--answers",
        str(s8f.answers),
        "--submission",
        str(oracle),
        "--output",
        str(work / "g" / "grade.json"),
    ]
    (work / "g").mkdir(exist_ok=True)
    timed(grade_argv, 1, env={"MICROCTX_LEDGER": str(work / "ledger.sqlite")})  # warm-up: bytecode caches
    grade, _ = timed(grade_argv, repeat, env={"MICROCTX_LEDGER": str(work / "ledger.sqlite")})
    say(
        "microctx grade (s8f oracle)",
        f"{grade * 1000:.0f} ms = {grade / floor:.1f}x floor",
        "3x the Go tool (none here; stated vs the floor)",
    )
    return grade


def policy_cost(work: Path, s8f, oracle: Path) -> None:
    from microctx._io.paths import check_paths, locked_folders
    from microctx.contract.schemas import load_answers
    from microctx.contract.score import grade
    from microctx.grading.ledger import record_grade

    result = grade(load_answers(s8f.answers), __import__("orjson").loads(oracle.read_bytes()))
    ledger = work / "policy-ledger.sqlite"
    os.environ["MICROCTX_LEDGER"] = str(ledger)
    times = []
    for _ in range(20):
        start = time.perf_counter()
        check_paths({"--answers": s8f.answers, "--submission": oracle}, {"--output": work / "g" / "x.json"})
        with locked_folders([work / "g"]):
            pass
        record_grade(str(s8f.answers), result.grade, via="bench", submission_path=str(oracle))
        times.append(time.perf_counter() - start)
    times.sort()
    say("path policy + folder lock + ledger append", f"{times[len(times) // 2] * 1000:.1f} ms median of 20", "< 10 ms")


def reports(work: Path, repeat: int, skip_demo: bool) -> None:
    """The report figures of bench_reports.py (one home): each as a ratio to the papermill floor
    measured in the same run, wall and CPU (the command and its kernels)."""
    best = bench_reports.measure({"this": bench_reports.ROOT}, repeat, not skip_demo, work)
    floor_wall, floor_cpu, _ = best["this", "floor"]
    say("one-cell papermill -> HTML (floor)", f"{floor_wall:.1f} s, CPU {floor_cpu:.1f} s", "-")
    goals = {"report grade": "2x floor", "demo": "< 30 s"}
    for (_, figure), (wall, cpu, size) in best.items():
        if figure == "floor":
            continue
        html = f", {size / 1e6:.2f} MB" if size else ""
        say(
            f"{figure} (s8f)",
            f"{wall:.1f} s = {wall / floor_wall:.2f}x floor (CPU {cpu / floor_cpu:.2f}x){html}",
            goals.get(figure, "-"),
        )


def slices_ratio(work: Path, repeat: int, s8f, planted: Path, grade_seconds: float) -> None:
    env = {"MICROCTX_LEDGER": str(work / "ledger.sqlite")}
    argv = [
        *MICROCTX,
        "slices",
        "--public",
        str(s8f.public),
        "--answers",
        str(s8f.answers),
        "--submission",
        str(planted),
        "--output",
        str(work / "slices.csv"),
    ]
    seconds, _ = timed(argv, repeat, env)
    say("microctx slices (s8f, planted)", f"{seconds:.2f} s = {seconds / grade_seconds:.1f}x grade", "2x grade")


def at_scale(work: Path, records: int) -> None:
    raw = scale.write_scale_export(work, records)
    folder = work / f"scale-{records}"
    folder.mkdir(exist_ok=True)
    trio = [str(folder / name) for name in ("public.json", "answers.json", "report.json")]
    freeze_argv = [
        *MICROCTX,
        "freeze",
        str(raw),
        "--public",
        trio[0],
        "--answers",
        trio[1],
        "--report",
        trio[2],
        "--source",
        f"scale:{records}",
    ]
    seconds, peak = timed(freeze_argv)
    per = peak * 2**20 / records
    say(
        f"freeze {records} records",
        f"{seconds:.1f} s, {peak:.0f} MiB ({per:.0f} B/record)",
        f"1M: < 60 s, < 2 GiB ({2 * 2**30 / 1e6:.0f} B/record)",
    )
    seconds, peak = timed([*MICROCTX, "verify", "--public", trio[0], "--answers", trio[1], "--report", trio[2]])
    say(f"verify {records} records", f"{seconds:.1f} s, {peak:.0f} MiB", "1x the Go tool (none here)")
    import orjson

    answers = orjson.loads(Path(trio[1]).read_bytes())
    oracle = folder / "oracle.json"
    oracle.write_bytes(
        orjson.dumps(
            {
                "schema": "fak-microcontext-submission/1",
                "corpus_sha256": answers["corpus_sha256"],
                "answers": [a for a in answers["answers"] if a["split"] == "test"],
            }
        )
    )
    env = {"MICROCTX_LEDGER": str(work / "ledger.sqlite")}
    seconds, peak = timed(
        [*MICROCTX, "grade", "--answers", trio[1], "--submission", str(oracle), "--output", str(folder / "grade.json")], env=env
    )
    say(
        f"grade {records} records",
        f"{seconds:.1f} s, {peak:.0f} MiB ({peak * 2**20 / records:.0f} B/record)",
        "1M: < 60 s, < 2 GiB",
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--work", help="folder for the scale corpora (kept, reused); default: a temporary one")
    args = parser.parse_args()
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.corpus import snapshot as data
    from microctx.reports.examples import demo_submissions

    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores", flush=True)
    s8f = data.s8f()
    with tempfile.TemporaryDirectory(prefix="microctx-bench-") as tmp:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        # PYTHONDONTWRITEBYTECODE (set on this machine) would make every command compile every
        # module from source (~0.5 s for grade): children write their caches under work/ instead
        CHILD_ENV.update({k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"})
        CHILD_ENV["PYTHONPYCACHEPREFIX"] = str(work / "pycache")
        timed([*MICROCTX, "report", "--help"])  # warm the caches of the CLI's modules
        subs = demo_submissions(load_answers(s8f.answers))
        oracle, planted = work / "oracle.json", work / "planted.json"
        oracle.write_bytes(dumps(subs["oracle"]))
        planted.write_bytes(dumps(subs["planted"]))
        grade_seconds = startup(work, args.repeat, s8f, oracle)
        policy_cost(work, s8f, oracle)
        slices_ratio(work, args.repeat, s8f, planted, grade_seconds)
        reports(work / "reports", 1, args.skip_demo)
        at_scale(work, args.records)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (after)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
