"""Report speed on s8f (issue 24): every figure as a ratio to a floor measured in the same run.

    python benchmarks/bench_reports.py [--repeat N] [--demo] [--baseline DIR]

The floor is a one-cell notebook executed by papermill and exported to HTML: the part of any
report (interpreter, papermill, kernel start, nbconvert) that no notebook of ours can remove.
Figures, each a fresh process as the CLI runs it: `report grade` (planted submission; goal: within
2x the floor), `report corpus`, `report compare` (oracle vs planted), and with `--demo`
`microctx demo` (goal: under 30 s). Each line gives the wall seconds (best of N), the CPU seconds
of that run (the command, its kernels and their chart renderers: what a loaded machine cannot
hide) and the HTML size; the load average is printed before and after. `--baseline DIR` also
times another checkout (for example `git archive` of the commit before a change, unpacked), its
runs alternating with this one's, so a before/after pair shares the machine's load. Every
command runs outside the checkouts with PYTHONPATH naming its checkout (the kernels inherit both)
and its own bytecode cache, warmed by one untimed run of every command but the demo (a cold
cache compiles papermill, nbconvert, ipykernel, pandas and altair from source: it would inflate
the floor most, the first command timed).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRADE_GOAL = 2.0  # report grade within 2x the floor
DEMO_GOAL_SECONDS = 30.0

FLOOR = """
import sys, tempfile
from pathlib import Path
import nbformat, papermill
from microctx.reports import build
with tempfile.TemporaryDirectory() as tmp:
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source, done = Path(tmp, "in.ipynb"), Path(tmp, "out.ipynb")
    nbformat.write(book, source)
    papermill.execute_notebook(str(source), str(done), kernel_name="python3", progress_bar=False)
    Path(tmp, "out.html").write_bytes(build.html_export(done))
"""


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


WARM = "import papermill, nbconvert, ipykernel.kernelapp, pandas, altair, scipy.special, vl_convert, microctx.reports.charts"


def adopt_orphans(adopt: bool = True) -> None:
    """Make this process the reaper of its descendants' orphans (Linux), or stop being it, so
    their CPU is counted: a report kernel's chart renderer outlives the kernel killed after its
    notebook by a moment and would otherwise be reaped by init, its CPU uncounted."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, int(adopt), 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap_orphans(deadline: float = 10.0) -> None:
    """Wait for every descendant left to this process (`adopt_orphans`), for at most `deadline` s."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def run(argv: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process and every descendant: the kernels and their chart
    renderers) of one command, run in `cwd` (not a checkout: `python -m` puts the working folder
    first on sys.path)."""
    adopt_orphans()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    _, status, _ = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv[:5])} failed: {child.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
    _reap_orphans()
    adopt_orphans(False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(work: Path, s8f, subs: dict, demo: bool) -> dict[str, tuple[list[str], Path | None]]:
    """name -> (argv, the HTML it makes); every output under `work`."""
    cli = [sys.executable, "-m", "microctx"]
    public, answers = ["--public", str(s8f.public)], ["--answers", str(s8f.answers)]
    found = {
        "floor": ([sys.executable, "-c", FLOOR], None),
        "report grade": (
            [*cli, "report", "grade", *public, *answers, "--submission", str(subs["planted"]), "--out", str(work / "grade")],
            work / "grade" / "grade_report.html",
        ),
        "report corpus": (
            [*cli, "report", "corpus", *public, "--out", str(work / "corpus")],
            work / "corpus" / "corpus_overview.html",
        ),
        "report compare": (
            [
                *cli,
                "report",
                "compare",
                *public,
                *answers,
                "--submission",
                str(subs["oracle"]),
                "--submission",
                str(subs["planted"]),
                "--out",
                str(work / "compare"),
            ],
            work / "compare" / "compare_candidates.html",
        ),
    }
    if demo:
        found["demo"] = ([*cli, "demo", "--out", str(work / "demo")], None)
    return found


def measure(checkouts: dict[str, Path], repeat: int, demo: bool, tmp: Path) -> dict[tuple[str, str], tuple[float, float, int]]:
    """(checkout, figure) -> (best wall, CPU of that run, HTML bytes); checkouts alternate per figure."""
    from microctx.contract.canonical import dumps
    from microctx.contract.schemas import load_answers
    from microctx.corpus import snapshot as data
    from microctx.grading.examples import demo_submissions

    s8f = data.s8f()
    tmp.mkdir(parents=True, exist_ok=True)
    subs = {}
    for name, sub in demo_submissions(load_answers(s8f.answers)).items():
        subs[name] = tmp / f"{name}.json"
        subs[name].write_bytes(dumps(sub))
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # a user's install has its caches
    base["MICROCTX_DATA_DIR"] = str(Path(s8f.public).parent)  # the commands run outside this folder's microctx.toml
    best: dict[tuple[str, str], tuple[float, float, int]] = {}
    for label, code in checkouts.items():  # warm each checkout's bytecode caches: every module a command loads
        env = {**base, "PYTHONPATH": str(code), "PYTHONPYCACHEPREFIX": str(tmp / f"pycache-{label}")}
        run([sys.executable, "-c", WARM], env, tmp)
        env["MICROCTX_LEDGER"] = str(tmp / f"ledger-{label}.sqlite")
        for argv, _ in commands(tmp / f"warm-{label}", s8f, subs, demo=False).values():
            run(argv, env, tmp)  # untimed: the kernel's and nbconvert's modules compile here, not in the floor
    for _ in range(repeat):
        for label, code in checkouts.items():
            work = tmp / label
            env = {
                **base,
                "PYTHONPATH": str(code),
                "PYTHONPYCACHEPREFIX": str(tmp / f"pycache-{label}"),
                "MICROCTX_LEDGER": str(tmp / f"ledger-{label}.sqlite"),
            }
            for figure, (argv, html) in commands(work, s8f, subs, demo).items():
                wall, cpu = run(argv, env, tmp)
                size = html.stat().st_size if html is not None and html.is_file() else 0
                if wall < best.get((label, figure), (float("inf"),))[0]:
                    best[label, figure] = (wall, cpu, size)
    return best


def goal(figure: str, wall: float, floor: float) -> str:
    if figure == "report grade":
        return f"goal {GRADE_GOAL:.0f}x floor: {'met' if wall <= GRADE_GOAL * floor else 'NOT met'}"
    if figure == "demo":
        return f"goal < {DEMO_GOAL_SECONDS:.0f} s: {'met' if wall < DEMO_GOAL_SECONDS else 'NOT met'}"
    return ""


def report(best: dict, checkouts: dict[str, Path]) -> bool:
    """Print every figure beside its goal; True when this checkout meets the report-grade goal."""
    met = True
    for label in checkouts:
        floor_wall, floor_cpu, _ = best[label, "floor"]
        print(f"[{label}] one-cell papermill -> HTML (floor): {floor_wall:.1f} s wall, {floor_cpu:.1f} s CPU")
        for (where, figure), (wall, cpu, size) in best.items():
            if where != label or figure == "floor":
                continue
            html = f", HTML {size / 1e6:.2f} MB" if size else ""
            print(
                f"[{label}] {figure:<15} {wall:6.1f} s = {wall / floor_wall:4.2f}x floor; CPU {cpu:5.1f} s = "
                f"{cpu / floor_cpu:4.2f}x floor's{html}  {goal(figure, wall, floor_wall)}"
            )
            if label == "this" and figure == "report grade":
                met = wall <= GRADE_GOAL * floor_wall
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--demo", action="store_true", help="also time `microctx demo` (goal: under 30 s)")
    parser.add_argument("--baseline", help="another checkout of microctx to time beside this one (e.g. /work/main)")
    args = parser.parse_args()
    checkouts = {"this": ROOT}
    if args.baseline:
        checkouts = {"baseline": Path(args.baseline).resolve(), "this": ROOT}
    print(f"load average: {load()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-reports-") as tmp:
        met = report(measure(checkouts, args.repeat, args.demo, Path(tmp)), checkouts)
    print(f"load average: {load()} (after)")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
