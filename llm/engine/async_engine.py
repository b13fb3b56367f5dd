"""An asyncio face for the engine: a background thread runs `Engine.step()` while there is work, and
each request is an async iterator of chunks. Leaving the iterator early (a client that disconnects,
a caller who barges in) cancels the request, which frees its slot at the next step."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import AsyncIterator, Callable

from llm.engine.engine import Engine
from llm.engine.params import GenerationParams
from llm.engine.sequence import Chunk


class AsyncEngine:
    def __init__(self, engine: Engine, on_step: Callable[[int], None] | None = None):
        """`on_step(batch_size)` is called after every engine step (for metrics)."""
        self.engine = engine
        self.on_step = on_step
        self._queues: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._wake = threading.Event()
        self._stop = False
        self._ids = itertools.count()
        self._thread = threading.Thread(target=self._loop, name="ttfat-engine", daemon=True)
        self._thread.start()

    def stream(
        self, prompt_ids: list[int], params: GenerationParams | None = None, request_id: str | None = None
    ) -> AsyncIterator[Chunk]:
        """Submit the request now (ValueError at once for invalid params) and return its chunks of
        newly final tokens. Leaving the iteration early cancels the request."""
        rid = request_id or f"areq-{next(self._ids)}"
        queue: asyncio.Queue = asyncio.Queue()
        self._queues[rid] = (asyncio.get_running_loop(), queue)
        try:
            self.engine.add_request(prompt_ids, params, rid)
        except Exception:
            self._queues.pop(rid)
            raise
        self._wake.set()
        return self._chunks(rid, queue)

    @property
    def open_requests(self) -> int:
        """Submitted and not yet finished or cancelled."""
        return len(self._queues)

    async def _chunks(self, rid: str, queue: asyncio.Queue) -> AsyncIterator[Chunk]:
        finished = False
        try:
            while not finished:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                finished = item.finished
                yield item
        finally:
            if not finished:
                self.engine.cancel(rid)
                self._wake.set()
            self._queues.pop(rid, None)

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=5)

    def _deliver(self, rid: str, item) -> None:
        finished = isinstance(item, BaseException) or item.finished
        target = self._queues.pop(rid, None) if finished else self._queues.get(rid)
        if target is not None:
            loop, queue = target
            loop.call_soon_threadsafe(queue.put_nowait, item)

    def _loop(self) -> None:
        while not self._stop:
            if not self.engine.has_work():
                self._wake.wait()
                self._wake.clear()
                continue
            try:
                chunks = self.engine.step()
            except Exception as e:  # a failed forward fails every running request, not the thread
                for rid in list(self._queues):
                    self.engine.cancel(rid)
                    self._deliver(rid, RuntimeError(f"engine step failed: {e}"))
                self.engine.step()  # drain the cancellations
                continue
            if self.on_step is not None:
                self.on_step(self.engine.last_batch_size)
            for chunk in chunks:
                self._deliver(chunk.request_id, chunk)
