"""Helper for the report-kernel tests: run code in a live kernel and collect what it printed."""

from __future__ import annotations


def run_in_kernel(km, code: str, timeout: float = 120) -> str:
    """The text `code` printed when run in the kernel `km` manages (not kept in its history)."""
    client = km.blocking_client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=timeout)
        out: list[str] = []
        hook = lambda msg: out.append(msg["content"].get("text", "")) if msg["msg_type"] == "stream" else None  # noqa: E731
        client.execute_interactive(code, timeout=60, output_hook=hook, store_history=False)
        return "".join(out)
    finally:
        client.stop_channels()
