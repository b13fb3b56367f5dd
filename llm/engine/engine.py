"""The engine: add_request -> step() = schedule -> run -> postprocess, as in nano-vllm.

Every step runs one forward pass over all running requests together (different prompt lengths,
phases and cache modes share it; `batch.py` says how), then each request commits tokens and streams
the ones that became final. New requests join between steps; a cancelled one leaves between steps and
frees its cache slot.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from llm.clock import ms
from llm.engine.batch import pack
from llm.engine.checkpoint import Checkpoint, load_checkpoint
from llm.engine.kv_cache import KVCache
from llm.engine.params import GenerationParams
from llm.engine.prefix_cache import PrefixCache
from llm.engine.sequence import Chunk, Sequence, Work


@dataclass
class Generation:
    """A finished request: its answer tokens and how they were produced."""

    request_id: str
    token_ids: list[int]
    text: str
    commit_ms: list[float]  # per token, from the request's arrival
    first_token_ms: float | None
    total_ms: float
    forwards: int
    finish_reason: str

    @property
    def tokens_per_forward(self) -> float:
        return len(self.token_ids) / max(self.forwards, 1)


class Engine:
    def __init__(
        self,
        model: str | Path | Checkpoint,
        *,
        device: str | None = None,
        dtype: torch.dtype | None = None,
        max_batch: int = 8,
        max_len: int = 2048,
        prefix_cache: int = 8,
    ):
        """`prefix_cache`: how many finished prompts keep their keys/values for reuse by later prompts
        that start the same way (block-attention models only; 0 turns reuse off)."""
        self.checkpoint = model if isinstance(model, Checkpoint) else load_checkpoint(model, device, dtype)
        self.model = self.checkpoint.model
        self.config = self.checkpoint.config
        self.tokenizer = self.checkpoint.tokenizer
        self.max_len = max_len
        self.cache = KVCache(self.config, max_batch, max_len, self.model.device, self.model.dtype)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._cancelled: set[str] = set()
        self._lock = threading.Lock()
        self.total_forwards = 0
        self.last_batch_size = 0
        self.prefixes = PrefixCache(prefix_cache if self.config.attention == "block" else 0)

    # -- requests -------------------------------------------------------------------------------
    def add_request(
        self, prompt_ids: list[int], params: GenerationParams | None = None, request_id: str | None = None
    ) -> str:
        params = (params or GenerationParams()).resolve(self.config)
        seq = Sequence(list(prompt_ids), params, self.config, request_id)
        if seq.end > self.max_len:
            raise ValueError(
                f"prompt ({len(prompt_ids)}) + gen_length ({params.gen_length}) > {self.max_len}"
            )
        with self._lock:
            self.waiting.append(seq)
        return seq.id

    def cancel(self, request_id: str) -> None:
        """Thread-safe; the request leaves at the next step with a `cancelled` chunk."""
        with self._lock:
            self._cancelled.add(request_id)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    # -- one step -------------------------------------------------------------------------------
    def step(self) -> list[Chunk]:
        now = time.monotonic_ns()
        chunks = self._schedule(now)
        if not self.running:
            return chunks
        works = [seq.plan() for seq in self.running]
        self.last_batch_size = len(works)
        logits = self._run(works)
        now = time.monotonic_ns()
        for seq, work, rows in zip(self.running, works, logits, strict=True):
            chunk = seq.commit(work, rows, now)
            if chunk is not None:
                chunks.append(chunk)
        for seq in [s for s in self.running if s.finished]:
            n = seq.reusable_len
            if seq.params.cache == "block" and seq.cache_len >= n > 0:
                self.prefixes.store(seq.canvas[:n].tolist(), self.cache.read(seq.slot, n))
            self._finish(seq)
        return chunks

    def _schedule(self, now: int) -> list[Chunk]:
        """Drop cancelled requests (freeing their slots), then admit waiting ones into free slots."""
        chunks = []
        with self._lock:
            cancelled, self._cancelled = self._cancelled, set()
            for seq in [s for s in self.running if s.id in cancelled]:
                chunks.append(seq.cancel_chunk(now))
                self._finish(seq)
            for seq in [s for s in self.waiting if s.id in cancelled]:
                self.waiting.remove(seq)
                chunks.append(seq.cancel_chunk(now))
            while self.waiting and self.cache.free:
                seq = self.waiting.popleft()
                seq.slot = self.cache.allocate()
                seq.admitted_ns = now
                if seq.params.cache == "block":
                    align = seq.params.block_length if self.config.aligned_blocks else 1
                    n, kv = self.prefixes.lookup(seq.canvas[: seq.prompt_len].tolist(), align)
                    if kv is not None:
                        self.cache.fill(seq.slot, kv, n)
                        seq.cache_len = n
                self.running.append(seq)
        return chunks

    def _finish(self, seq: Sequence) -> None:
        """Free its slot; the last running request moves into it, so slots 0..B-1 stay in use."""
        i = self.running.index(seq)
        last = self.running.pop()
        if last is not seq:
            self.cache.move(last.slot, seq.slot, last.canvas.numel())
            last.slot, seq.slot = seq.slot, last.slot
            self.running[i] = last
        self.cache.release(seq.slot)

    def _run(self, works: list[Work]) -> list[torch.Tensor]:
        """One forward pass over every running request (request i in cache slot i, see `batch.py`).
        Returns each request's logits for its target rows."""
        packed = pack(works, self.model.device)
        with torch.inference_mode():
            hidden, _ = self.model(packed.ids, packed.positions, packed.batch, self.cache.layers())
            logits = self.model.logits(hidden[0, packed.rows]).cpu()
        self.total_forwards += 1
        return list(logits.split(packed.splits))

    # -- conveniences ---------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], params: GenerationParams | None = None) -> list[Generation]:
        """Decode several prompts together to completion."""
        arrival = time.monotonic_ns()
        ids = [self.add_request(p, params) for p in prompts]
        collected: dict[str, list[Chunk]] = {i: [] for i in ids}
        while self.has_work():
            for chunk in self.step():
                collected[chunk.request_id].append(chunk)
        return [self._generation(collected[i], arrival) for i in ids]

    def stream(self, prompt_ids: list[int], params: GenerationParams | None = None) -> Iterator[Chunk]:
        """Decode one prompt alone, yielding each chunk of newly final tokens as it is committed."""
        rid = self.add_request(prompt_ids, params)
        while self.has_work():
            for chunk in self.step():
                if chunk.request_id == rid:
                    yield chunk

    def _generation(self, chunks: list[Chunk], arrival: int) -> Generation:
        tokens = [t for c in chunks for t in c.token_ids]
        commits = [ms(arrival, t, None) for c in chunks for t in c.commit_ns]
        emits = [ms(arrival, c.emit_ns, None) for c in chunks if c.token_ids]
        last = chunks[-1]
        return Generation(
            request_id=last.request_id,
            token_ids=tokens,
            text=self.tokenizer.decode(tokens),
            commit_ms=commits,
            first_token_ms=emits[0] if emits else None,
            total_ms=ms(arrival, last.emit_ns, None),
            forwards=last.forwards,
            finish_reason=last.finish_reason or "length",
        )
