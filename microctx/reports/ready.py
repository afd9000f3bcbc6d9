"""The client papermill talks to a report's kernel through (`kernels.SharedKernels`, issue 24).

jupyter_client's readiness check asks for `kernel_info` until the kernel replies on its shell
channel and a message arrives on IOPub (so its output is not lost), then waits until IOPub has
been silent for 0.2 s. That last wait is idle time on every report's critical path: nbclient reads
only the IOPub messages whose parent is the cell it executes, so a late start-up message (the
kernel's status for the `kernel_info` request) is skipped anyway. `ReadyClient` makes the same
check and drops the messages already queued, without the wait.
"""

from __future__ import annotations

import math
import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient


class ReadyClient(AsyncKernelClient):
    """An asyncio kernel client whose `wait_for_ready` does not wait for IOPub to fall silent."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """Return once the kernel answered `kernel_info` on shell and IOPub delivered a message
        (jupyter_client's check); RuntimeError when the kernel died or `timeout` seconds passed."""
        deadline = time.monotonic() + (math.inf if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                pass
            else:
                if reply["msg_type"] == "kernel_info_reply" and await self._iopub_connected():
                    self._handle_kernel_info_reply(reply)
                    break
            if not await self.is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:g} seconds")
        while await self._iopub_connected(wait=0):  # what start-up left queued, without waiting for more
            pass

    async def _iopub_connected(self, wait: float = 0.2) -> bool:
        """Whether a message arrived on IOPub within `wait` seconds (the message is dropped)."""
        try:
            await self.iopub_channel.get_msg(timeout=wait)
        except Empty:
            return False
        return True
