"""One request's decoding state: its canvas, which block it is denoising, and what to run next.

Each engine step asks every running sequence for a `Work` item (the query tokens of one forward pass
and which cached keys they may see), runs all items as one batch, and hands each sequence the logits
of its masked positions to commit from. The cache modes differ only in `plan`:

- none:   every step runs the whole canvas (block models: up to the current block's end).
- prefix: (bidirectional) the first step of a block runs the whole canvas and caches everything
          before the block; later steps run block + suffix against that prefix (Fast-dLLM).
- dual:   (bidirectional) as prefix, but later steps run only the block; the masked suffix's keys
          come from the cache too, the block's stale keys are overwritten by its fresh ones (Fast-dLLM).
- block:  (block diffusion) exact: the first step of a block runs the previous block's clean tokens
          (or the prompt) together with the new noisy block, caching the clean ones; later steps run
          only the block. Finished blocks never change, so their keys are exact.

Every forward pass writes its keys/values into the request's cache slot at their positions; a
`Work`'s `cache_len` says how many of them the step may reuse.

With shifted logits (Dream and our models) the token at position i is read from output i - 1.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

import torch

from llm.engine import sampler
from llm.engine.config import ModelConfig
from llm.engine.params import GenerationParams

_ids = itertools.count()


@dataclass
class Work:
    ids: torch.Tensor  # [Q] query tokens
    positions: torch.Tensor  # [Q]
    block_ids: torch.Tensor  # [Q] query i sees query j iff block_ids[j] <= block_ids[i]
    cache_len: int  # cached positions [0, cache_len) of the slot are visible, except where the
    # queries sit (the dual cache's stale block): their fresh keys are written over them
    rows: torch.Tensor  # query rows whose outputs give the logits of `targets`
    targets: torch.Tensor  # canvas positions being predicted (the block's masked positions)
    reuse_first: bool = False  # targets[0]'s logits were computed in the block's first step: reuse them


@dataclass
class Chunk:
    """What one engine step produced for one request: newly final tokens, in order, and/or the end."""

    request_id: str
    token_ids: list[int]
    commit_ns: list[int]  # when each token's value was decided (monotonic clock)
    emit_ns: int  # when they joined the final, gap-free prefix
    forwards: int  # forward passes so far: each is one denoising step of this request
    finished: bool = False
    finish_reason: str | None = None  # stop | length | cancelled
    arrival_ns: int = 0  # request added
    admitted_ns: int = 0  # got a slot (the wait before is queueing)
    prefill_ns: int = 0  # its first forward pass (prompt prefill) finished


class Sequence:
    def __init__(self, prompt: list[int], params: GenerationParams, cfg: ModelConfig, request_id=None):
        if not prompt:
            raise ValueError("empty prompt")
        self.id = request_id or f"req-{next(_ids)}"
        self.params = params
        self.cfg = cfg
        self.prompt_len = len(prompt)
        self.block_attention = cfg.attention == "block"
        self.shift = int(cfg.shift_logits)
        self.stop_ids = set() if params.ignore_eos else set(cfg.eos_token_ids)
        b = params.block_length
        # answer blocks start at `origin`: the answer's start, or (aligned) the start of the block that
        # holds it, so the prompt's tail is decoded inside the first block; the canvas grows to `end`
        self.origin = self.prompt_len // b * b if cfg.aligned_blocks else self.prompt_len
        self.end = self.origin + math.ceil((self.prompt_len - self.origin + params.gen_length) / b) * b
        first = self.origin + b - self.prompt_len if self.block_attention else params.gen_length
        self.canvas = torch.tensor(prompt + [cfg.mask_token_id] * first, dtype=torch.long)
        self.commit_ns = [0] * self.canvas.numel()
        self.block = 0
        self.step_in_block = 0
        self.schedule: list[int] = []
        self.cache_len = 0
        self.first_logits: torch.Tensor | None = None
        self.emitted = 0  # answer tokens already streamed
        self.stopped = False  # end-of-sequence is in the streamed prefix: nothing after it counts
        self.forwards = 0
        self.slot: int | None = None
        self.finished = False
        self.finish_reason: str | None = None
        self.arrival_ns = time.monotonic_ns()
        self.admitted_ns = 0
        self.prefill_ns = 0
        self.generator = None
        if params.seed is not None:
            self.generator = torch.Generator().manual_seed(params.seed)

    # -- geometry -------------------------------------------------------------------------------
    @property
    def block_range(self) -> tuple[int, int]:
        b = self.params.block_length
        start = self.origin + self.block * b
        return start, start + b

    @property
    def reusable_len(self) -> int:
        """How much of the prompt has keys that depend on the prompt alone (the prefix cache's)."""
        return self.origin

    def block_ids(self, start: int, end: int) -> torch.Tensor:
        """Aligned: every block of the sequence shares one id. Else prompt tokens are causal (block id =
        position) and answer blocks share one id each."""
        pos = torch.arange(start, end)
        if not self.block_attention:
            return torch.zeros_like(pos)
        b = self.params.block_length
        if self.cfg.aligned_blocks:
            return pos // b
        answer = self.prompt_len + (pos - self.prompt_len) // b
        return torch.where(pos < self.prompt_len, pos, answer)

    def masked_in_block(self) -> torch.Tensor:
        s, e = self.block_range
        return s + torch.nonzero(self.canvas[s:e] == self.cfg.mask_token_id).flatten()

    def targets(self) -> torch.Tensor:
        """The masked positions of the block's first sub-block that has any (the whole block, unless
        sub-blocks are asked for)."""
        masked = self.masked_in_block()
        sub = self.params.sub_block_length
        first = self.block_range[0] + (int(masked[0]) - self.block_range[0]) // sub * sub
        return masked[masked < first + sub]

    def greedy_start(self, work: Work) -> bool:
        """Fast-dLLM v2: the block's first position is masked at its first step, so it is the previous
        block's greedy next token, committed alone."""
        s = self.block_range[0]
        return self.cfg.greedy_block_start and self.step_in_block == 0 and int(work.targets[0]) == s > 0

    # -- planning -------------------------------------------------------------------------------
    def plan(self) -> Work:
        s, e = self.block_range
        targets = self.targets()
        if self.step_in_block == 0 and not self.schedule:
            steps_per_block = self.steps_per_block = self.params.steps // self.params.blocks
            # aligned (SDAR, LLaDA2): the schedule of a whole block, also for a first block that holds
            # the prompt's tail
            size = self.params.block_length if self.cfg.aligned_blocks else targets.numel()
            self.schedule = sampler.fixed_schedule(size, steps_per_block)
        mode, first = self.params.cache, self.step_in_block == 0
        length = self.canvas.numel()
        if mode == "none" or (mode in ("prefix", "dual") and first):
            return self._work(0, e if self.block_attention else length, targets, 0)
        q_start = s - self.shift
        if mode == "prefix":
            return self._work(q_start, length, targets, q_start)
        if mode == "dual":
            return self._work(q_start, e, targets, length)
        # exact block cache
        if first:
            end = s if (self.shift and self.params.block_length == 1) else e
            return self._work(self.cache_len, end, targets, self.cache_len)
        work = self._work(s, e, targets, self.cache_len)
        if self.shift and int(targets[0]) == s:  # output s - 1 is cached, not recomputed
            work.rows, work.reuse_first = work.rows[1:], True
        return work

    def _work(self, start, end, targets, cache_len) -> Work:
        rows = targets - self.shift - start
        return Work(
            ids=self.canvas[start:end],
            positions=torch.arange(start, end),
            block_ids=self.block_ids(start, end),
            cache_len=cache_len,
            rows=rows,
            targets=targets,
        )

    # -- committing -----------------------------------------------------------------------------
    def commit(self, work: Work, logits: torch.Tensor, now_ns: int) -> Chunk | None:
        """Apply one step's logits (rows of `work.targets`); return newly final tokens, if any."""
        p = self.params
        if p.cache == "block" and self.step_in_block == 0:
            self.cache_len = self.block_range[0]
            self.first_logits = logits[0]
        if work.reuse_first:
            logits = torch.cat((self.first_logits[None], logits))
        floored = None
        if p.opening_floor and int(work.targets[0]) == self.prompt_len:
            floored = sampler.floor_opening(logits, p.opening_floor)
        logits = logits if floored is None else floored
        greedy = self.greedy_start(work)
        temperature = 0.0 if greedy else p.temperature
        tokens, confidence = sampler.propose(
            logits, temperature, self.generator, self.cfg.mask_token_id, p.confidence
        )
        if floored is not None or greedy:  # the opening in doubt, or the block's greedy first token, alone
            chosen = torch.zeros(1, dtype=torch.long)
        else:
            k = self.schedule[self.step_in_block] if self.step_in_block < len(self.schedule) else 1
            if p.schedule == "timesteps":
                k = sampler.timestep_count(work.targets.numel(), self.step_in_block, self.steps_per_block)
            if p.threshold is not None or p.factor is not None:  # the schedule is the floor
                chosen = sampler.select(confidence, threshold=p.threshold, factor=p.factor, floor=max(k, 1))
            else:
                chosen = sampler.select(confidence, k=k)
        positions = work.targets[chosen]
        self.canvas[positions] = tokens[chosen]
        for pos in positions.tolist():
            self.commit_ns[pos] = now_ns
        self.prefill_ns = self.prefill_ns or now_ns
        self.forwards += 1
        self.step_in_block += 1
        if not self.masked_in_block().numel():
            self._next_block()
        return self._emit(now_ns)

    def _next_block(self) -> None:
        self.block += 1
        self.step_in_block = 0
        self.schedule = []
        self.first_logits = None
        b = self.params.block_length
        if self.block_attention and self.canvas.numel() < self.end:
            self.canvas = torch.cat((self.canvas, torch.full((b,), self.cfg.mask_token_id)))
            self.commit_ns += [0] * b

    def _emit(self, now_ns: int) -> Chunk | None:
        new: list[int] = []
        times: list[int] = []
        if not self.stopped:
            answer = self.canvas[self.prompt_len :]
            masked = torch.nonzero(answer == self.cfg.mask_token_id).flatten()
            frontier = int(masked[0]) if masked.numel() else answer.numel()
            new = answer[self.emitted : frontier].tolist()
            stop = next((i for i, t in enumerate(new) if t in self.stop_ids), None)
            if stop is not None:
                new, self.stopped = new[:stop], True
            start = self.prompt_len + self.emitted
            times = self.commit_ns[start : start + len(new)]
            self.emitted += len(new)
        canvas_done = self.canvas.numel() >= self.end and not bool(
            (self.canvas == self.cfg.mask_token_id).any()
        )
        if (self.stopped and self.params.early_stop) or canvas_done:
            self.finished, self.finish_reason = True, "stop" if self.stopped else "length"
        if not new and not self.finished:
            return None
        return self._chunk(new, times, now_ns)

    def cancel_chunk(self, now_ns: int) -> Chunk:
        self.finished, self.finish_reason = True, "cancelled"
        return self._chunk([], [], now_ns)

    def _chunk(self, tokens: list[int], times: list[int], now_ns: int) -> Chunk:
        return Chunk(
            self.id,
            tokens,
            times,
            now_ns,
            self.forwards,
            self.finished,
            self.finish_reason,
            self.arrival_ns,
            self.admitted_ns,
            self.prefill_ns,
        )
