"""Reports that share a kernel (the demo, issue 24) are the reports a fresh kernel makes: the
namespace is reset between notebooks, execution counts start again at 1, and the outputs are
byte-identical."""

from __future__ import annotations

import json

import nbformat
import pytest

from microctx.contract.canonical import dumps
from microctx.grading.examples import demo_submissions
from microctx.reports import build as reports
from tests.kernel_support import run_in_kernel


@pytest.mark.slow
def test_a_shared_kernel_is_reset_between_notebooks_and_replaced_when_dead():
    kernels = reports.SharedKernels()
    try:
        km = kernels.kernel()
        assert run_in_kernel(km, "leaked = 41\nimport sys\nprint('leaked' in dir(), 'pandas' in sys.modules)").split() == [
            "True",
            "False",
        ]
        run_in_kernel(km, "import pandas")
        again = kernels.kernel()
        assert again is km  # the same kernel process, reused
        # the namespace is gone, the imported modules stay (what the reuse saves)
        assert run_in_kernel(again, "import sys\nprint('leaked' in dir(), 'pandas' in sys.modules)").split() == ["False", "True"]
        from jupyter_core.utils import run_sync

        run_sync(km.shutdown_kernel)(now=True)
        assert kernels.kernel() is not km  # a dead kernel is replaced
    finally:
        kernels.close()


@pytest.mark.slow
def test_a_report_in_a_shared_kernel_is_byte_identical_to_one_in_a_fresh_kernel(tmp_path, s8f, s8f_answers):
    planted = tmp_path / "planted.json"
    planted.write_bytes(dumps(demo_submissions(s8f_answers)["planted"]))
    args = (str(s8f.public), str(s8f.answers), str(planted))
    fresh = reports.grade_report(*args, tmp_path / "fresh", progress=False)
    kernels = reports.SharedKernels()
    try:
        reports.corpus_report(str(s8f.public), tmp_path / "corpus", progress=False, kernels=kernels)
        shared = reports.grade_report(*args, tmp_path / "shared", progress=False, kernels=kernels)
    finally:
        kernels.close()
    # every file but the PDFs (vl-convert's PDF bytes differ between two renders in one process)
    same = [
        f["path"]
        for f in fresh["files"]
        if f["path"].startswith(("charts/", "slices.", "grade.")) and not f["path"].endswith(".pdf")
    ]
    assert len(same) >= 9
    digests = {f["path"]: f["sha256"] for f in shared["files"]}
    for entry in fresh["files"]:
        if entry["path"] in same:
            assert digests[entry["path"]] == entry["sha256"], entry["path"]
    book = nbformat.read(tmp_path / "shared" / "grade_report.ipynb", as_version=4)
    counts = [c.execution_count for c in book.cells if c.cell_type == "code"]
    assert counts == list(range(1, len(counts) + 1))  # a new session: counted from 1, as a fresh kernel counts
    assert json.loads((tmp_path / "shared" / "report.json").read_text())["kind"] == "grade"


@pytest.mark.slow
def test_a_report_kernel_is_ready_without_waiting_for_iopub_to_fall_silent():
    """The client papermill gets (`ready.ReadyClient`) checks readiness as jupyter_client does (a
    `kernel_info` reply, then a message on IOPub) but never waits out an IOPub timeout once the
    kernel replied (jupyter_client waits for 0.2 s of silence on every start); the first cell's
    output still arrives."""
    from jupyter_core.utils import run_sync

    kernels = reports.SharedKernels()
    try:
        client = kernels.kernel().client()
        waited: list[float | None] = []
        get = client.iopub_channel.get_msg

        async def watched(*args, **kw):
            try:
                return await get(*args, **kw)
            except Exception:
                waited.append(kw.get("timeout"))  # a wait that ended with no message
                raise

        client.start_channels()
        client.iopub_channel.get_msg = watched
        try:
            run_sync(client.wait_for_ready)(timeout=60)
            assert [t for t in waited if t] == []  # no idle wait: only non-blocking reads found nothing
            reply = run_sync(client.execute_interactive)("print(6 * 7)", timeout=60, output_hook=lambda m: waited.append(m))
        finally:
            client.stop_channels()
        assert reply["content"]["status"] == "ok"
        assert any(m["msg_type"] == "stream" and m["content"]["text"] == "42\n" for m in waited if isinstance(m, dict))
    finally:
        kernels.close()


def _gone(pid: int, seconds: float = 10.0) -> bool:
    import os
    import time

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.slow
def test_a_killed_report_kernel_takes_its_chart_renderer_with_it_and_close_reaps_it():
    """`kill` (a report whose notebook ran) ends the kernel and its renderer process (one process
    group) without waiting; `close` then reaps the kernel."""
    from microctx.reports import build

    kernels = reports.SharedKernels()
    try:
        kernels.start(build.NOTEBOOKS_DIR / build.NOTEBOOKS["grade"], build.LATER_IMPORTS["grade"])
        km = kernels.kernel()
        code = "import os\nfrom microctx.reports import renderer\nprint(os.getpid(), renderer.current()._process.pid)"
        kernel_pid, renderer_pid = map(int, run_in_kernel(km, code).split())
        kernels.kill()
        assert _gone(renderer_pid)
    finally:
        kernels.close()
    assert _gone(kernel_pid, 1.0)  # reaped by close: no zombie left


@pytest.mark.slow
def test_a_report_kernel_imports_this_interpreters_modules_not_the_working_folders(tmp_path, monkeypatch):
    """IPython puts the working folder on a kernel's sys.path, before site-packages: a report made
    from a folder holding a `microctx/` or a `vl_convert.py` imported those (cell 3 failed with the
    folder's error), while its chart renderer (started with -P) imported this interpreter's."""
    import vl_convert

    import microctx

    (tmp_path / "microctx").mkdir()
    (tmp_path / "microctx" / "__init__.py").write_text("raise ImportError('the working folder')\n")
    (tmp_path / "vl_convert.py").write_text("raise ImportError('the working folder')\n")
    monkeypatch.chdir(tmp_path)
    kernels = reports.SharedKernels()
    try:
        out = run_in_kernel(kernels.kernel(), "import microctx, vl_convert\nprint(microctx.__file__)\nprint(vl_convert.__file__)")
    finally:
        kernels.close()
    assert out.split() == [microctx.__file__, vl_convert.__file__]
