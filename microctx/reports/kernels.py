"""The kernels reports run in (issue 24: where users wait).

Every report's kernel is started before the parent needs it (`Kernels.start`), so it boots while
the parent imports papermill and readies the HTML export, and it imports what its notebook
imports and starts its chart renderer as it starts (`notebook_imports`, run in the kernel by
`microctx.reports.kernel_start`; `renderer`): the notebook's own imports then find their modules
loaded. Papermill talks to it through `ready.ReadyClient`. The
notebook is unchanged and still imports everything itself, so it reruns anywhere (JupyterLab
starts kernels without any of this). Reports made one after another in a thread (the demo) share
the thread's kernel, reset to a new session between notebooks.
"""

from __future__ import annotations

import ast
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

KERNEL_NAME = "python3"
# no kernel warnings on the user's stderr; the working folder kept off the kernel's sys.path (IPython
# puts it before site-packages: a `microctx/` or `vl_convert.py` there was what the report imported,
# while its chart renderer, started with -P, imported this interpreter's)
QUIET_KERNEL = ["--IPKernelApp.log_level=ERROR", "--InteractiveShellApp.ignore_cwd=True"]
# as nbclient starts its own kernels: the history in memory, no sqlite file in the user's profile
KERNEL_ARGUMENTS = [*QUIET_KERNEL, "--HistoryManager.hist_file=:memory:"]


class KernelError(Exception):
    """The `python3` kernel does not run this interpreter (or there is none)."""


def check_kernel() -> str:
    """The `python3` kernel must run this interpreter (so the notebook imports this microctx).

    jupyter_client replaces an argv[0] of `python`/`python3`/`pythonX.Y` by sys.executable;
    any other interpreter is refused with the command that fixes it.
    """
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        raise KernelError(
            f"no Jupyter kernel {KERNEL_NAME!r}; run `{sys.executable} -m ipykernel install --sys-prefix`"
        ) from None
    argv0 = spec.argv[0]
    aliases = {"python", f"python{sys.version_info[0]}", f"python{sys.version_info[0]}.{sys.version_info[1]}"}
    if argv0 in aliases or os.path.realpath(argv0) == os.path.realpath(sys.executable):
        return sys.executable
    raise KernelError(
        f"kernel {KERNEL_NAME!r} ({spec.resource_dir}) runs {argv0}, not {sys.executable}; "
        f"run `{sys.executable} -m ipykernel install --sys-prefix` or remove that kernel spec"
    )


def notebook_imports(notebook: str | os.PathLike) -> list[str]:
    """The modules a notebook imports at the top level of its code cells, in order (`import a.b`:
    "a.b"; `from a import b`: "a.b", which the kernel imports as `a` when `b` is no module).
    Imports inside a block (an `if`) are left out: the notebook may not reach them."""
    import json

    found: list[str] = []
    for cell in json.loads(Path(notebook).read_text(encoding="utf-8")).get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        try:
            tree = ast.parse(source)
        except SyntaxError:  # IPython syntax (a magic): the cell's imports are left to the notebook
            continue
        for node in tree.body:
            if isinstance(node, ast.Import):
                found += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found += [f"{node.module}.{alias.name}" for alias in node.names if alias.name != "*"]
    return list(dict.fromkeys(found))


def preload_arguments(notebook: str | os.PathLike, later: Sequence[str] = ()) -> list[str]:
    """The kernel arguments that run `kernel_start.preload` with `notebook`'s imports and `later`
    (modules its functions import on first use) as it starts (IPython's `exec_lines`: run before
    the kernel answers, kept out of the history and the execution count; the one name it binds
    is deleted)."""
    modules = list(dict.fromkeys([*notebook_imports(notebook), *later]))
    line = f"import microctx.reports.kernel_start as _microctx_start; _microctx_start.preload({modules!r}); del _microctx_start"
    return [f"--IPKernelApp.exec_lines={[line]!r}"]


def kernel_environment() -> dict[str, str]:
    """The environment a report's kernel starts with: this process's, and OpenBLAS on one thread
    unless the user set it (as `microctx slices` starts it): its second thread costs about 50 ms
    of CPU as numpy loads, and the statistics run their matrix products on one thread anyway
    (`grading.stats.one_blas_thread`), so the numbers are the same."""
    return {**os.environ, "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}


class SharedKernels:
    """Kernels reports run in: one per thread, started on first use (or ahead of it, `start`), its
    namespace reset (`%reset`, a new session: execution counts from 1) before each next notebook;
    modules stay imported, which is the point for reports made one after another (the demo:
    pandas, altair, scipy and the chart renderer are set up once per thread, not once per
    report). `close()` shuts them down. A kernel that died is replaced."""

    def __init__(self) -> None:
        self._kernels: dict[int, Any] = {}
        self._used: set[int] = set()  # kernels that ran a notebook: reset before the next one
        self._lock = threading.Lock()

    def start(self, notebook: str | os.PathLike | None = None, later: Sequence[str] = ()) -> None:
        """Start this thread's kernel now, unless it has one, and return at once: the kernel boots
        while the caller goes on. With `notebook`, the kernel imports that notebook's modules (and
        `later`) and starts its chart renderer as it starts (`preload_arguments`)."""
        from jupyter_client.manager import AsyncKernelManager
        from jupyter_core.utils import run_sync

        from microctx.reports.ready import ReadyClient

        with self._lock:
            if threading.get_ident() in self._kernels:
                return
        check_kernel()
        km = AsyncKernelManager(kernel_name=KERNEL_NAME, client_factory=ReadyClient)  # no idle 0.2 s at readiness
        extra = preload_arguments(notebook, later) if notebook is not None else []
        run_sync(km.start_kernel)(extra_arguments=[*KERNEL_ARGUMENTS, *extra], env=kernel_environment())
        with self._lock:
            self._kernels[threading.get_ident()] = km

    def kernel(self):
        """This thread's kernel manager, ready for a new notebook (started if it has none)."""
        from jupyter_core.utils import run_sync

        me = threading.get_ident()
        with self._lock:
            km = self._kernels.get(me)
        if km is not None and not run_sync(km.is_alive)():
            with self._lock:
                del self._kernels[me]
                self._used.discard(id(km))
            km = None
        if km is None:
            self.start()
            with self._lock:
                km = self._kernels[me]
        if id(km) in self._used:
            _reset(km)
        with self._lock:
            self._used.add(id(km))
        return km

    def kill(self) -> None:
        """Kill every kernel now, without waiting for it to end (a report whose notebook ran, issue
        24): `close` then finds it gone and reaps it at once, where its own wait for the end polls
        every 0.1 s."""
        from jupyter_core.utils import run_sync

        with self._lock:
            kernels = list(self._kernels.values())
        for km in kernels:
            try:
                run_sync(km.signal_kernel)(signal.SIGKILL)
            except Exception:  # noqa: BLE001  (a kernel that is already gone: close reaps it)
                pass

    def close(self) -> None:
        """Shut every kernel down (at once: nothing in them is worth waiting for)."""
        from jupyter_core.utils import run_sync

        with self._lock:
            kernels, self._kernels = list(self._kernels.values()), {}
            self._used.clear()
        for km in kernels:
            try:
                run_sync(km.shutdown_kernel)(now=True)
            except Exception:  # noqa: BLE001  (a kernel that is already gone)
                pass


def _reset(km) -> None:
    """A new session in `km`: the namespace emptied, execution counts from 1, modules kept."""
    client = km.blocking_client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=60)
        client.execute_interactive(
            "get_ipython().reset(new_session=True)", store_history=False, timeout=60, output_hook=lambda _message: None
        )
    finally:
        client.stop_channels()
