"""How late the probe's event loop ran while it made its calls, and what keeps it on time: every arrival
is stamped when the loop gets to it, so a late loop is a late stamp (docs/probe.md, "the probe under
load")."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time

from voice.reports.summary import stats

EVERY_S = 0.01  # the watcher asks to wake this often


class LoopLag:
    """`async with LoopLag() as lag:` ... `lag.stats()`: by how much (ms) each wake-up came late."""

    def __init__(self) -> None:
        self.late_ms: list[float] = []

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.create_task(self._watch())
        return self

    async def __aexit__(self, *exc) -> None:
        self._task.cancel()

    async def _watch(self) -> None:
        while True:
            asked = time.monotonic_ns()
            await asyncio.sleep(EVERY_S)
            self.late_ms.append(max(0.0, (time.monotonic_ns() - asked) / 1e6 - EVERY_S * 1e3))

    def stats(self) -> dict:
        return {k: v for k, v in stats(self.late_ms).items() if k in ("p50", "p99", "max", "n")}


@contextlib.asynccontextmanager
async def paused_gc():
    """No cyclic garbage collection while calls are made: a full collection stops the loop for tens of
    ms, and every stamp with it (reference counting still frees what the calls drop)."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
