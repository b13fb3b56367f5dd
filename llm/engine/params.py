"""Per-request decoding settings, resolved against a model in one place (`GenerationParams.resolve`);
each field is a knob of llm/knobs.py, which says its type and range."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from llm.engine.config import ModelConfig
from llm.engine.errors import DecodingError
from llm.knobs import KNOBS


@dataclass
class GenerationParams:
    """How one request is decoded. `None` means "the model's default".

    Commit rule: `threshold` (Fast-dLLM, SDAR, LLaDA2; with the steps' share of each step as its floor)
    if set, else `factor` if set, else a fixed number of steps (LLaDA low-confidence remasking; `steps`
    over the whole canvas, split evenly over its blocks).
    `gen_length` is the answer canvas for bidirectional models and the token budget for block models,
    whose canvas grows one block at a time; either way it is rounded up to whole blocks (a server cuts
    the reply at the client's `max_tokens` itself), for aligned block models (SDAR, LLaDA2, Fast-dLLM v2)
    to the block boundary at or after prompt + gen_length; `steps` are shared by the budget's blocks.
    Decoding stops once end-of-sequence is committed with everything before it committed (`early_stop`).

    `opening_floor` (token id -> probability): the answer may open with that token only when the model
    gives it at least that probability there; below it (and above `sampler.CONTENDER`), the next best
    opening is taken and committed alone, so the rest of the reply is decoded from it. For a model
    whose first token decides the kind of reply (a tool call or a direct answer), a floor on that
    token keeps a doubtful reply from taking the costlier road. None: the model's default (its
    config's `generation.opening_floor`); {}: no floor.
    """

    gen_length: int = 64
    block_length: int | None = None
    sub_block_length: int | None = None
    steps: int | None = None
    threshold: float | None = None
    factor: float | None = None
    schedule: str | None = None
    confidence: str | None = None
    cache: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    early_stop: bool = True
    ignore_eos: bool = False  # keep decoding past end-of-sequence (benchmarks of fixed lengths)
    opening_floor: dict[int, float] | None = None

    @property
    def blocks(self) -> int:
        """Whole blocks in the token budget: the steps are shared by them."""
        return math.ceil(self.gen_length / self.block_length)

    def resolve(self, cfg: ModelConfig) -> GenerationParams:
        """Fill model defaults and check the combination; raises DecodingError with a readable message."""
        _check_knobs(self)  # before the defaults are computed from them
        defaults = cfg.extra.get("generation", {})
        block = cfg.attention == "block"
        p = replace(self)
        if p.block_length is None:  # one_block: a bidirectional model's reference has none (Dream)
            whole = p.gen_length if defaults.get("one_block") else min(32, p.gen_length)
            p.block_length = defaults.get("block_length", cfg.block_size if block else whole)
        p.schedule = p.schedule or defaults.get("schedule", "even")
        p.confidence = p.confidence or defaults.get("confidence", "probability")
        if p.sub_block_length is None:
            p.sub_block_length = defaults.get("sub_block_length", p.block_length)
        p.sub_block_length = min(p.sub_block_length, p.block_length)
        if p.cache is None:
            p.cache = defaults.get("cache", "block" if block else "none")
        if p.threshold is None and p.factor is None and p.steps is None:
            p.threshold = defaults.get("threshold")
            p.factor = defaults.get("factor")
        if p.opening_floor is None:  # JSON keys are text
            p.opening_floor = {int(t): float(f) for t, f in defaults.get("opening_floor", {}).items()}
        _check_knobs(p)  # the model's defaults too
        blocks = p.blocks
        if not cfg.aligned_blocks:  # aligned: the canvas ends at the boundary after prompt + gen_length
            p.gen_length = blocks * p.block_length
        if p.steps is None:
            p.steps = blocks * p.block_length
        if p.steps < blocks or p.steps % blocks:
            raise DecodingError(
                f"steps {p.steps} must be a positive multiple of the number of blocks ({blocks})"
            )
        if block and p.cache in ("prefix", "dual"):
            raise DecodingError(
                f"cache {p.cache!r} is for bidirectional models; block-diffusion models use 'block'"
            )
        if not block and p.cache == "block":
            raise DecodingError("cache 'block' needs a block-diffusion model; use 'prefix' or 'dual'")
        if any(not 0.0 <= f <= 1.0 for f in p.opening_floor.values()):
            raise DecodingError(f"opening_floor probabilities must be in [0, 1], not {p.opening_floor}")
        if outside := [t for t in p.opening_floor if not 0 <= t < cfg.vocab_size]:
            raise DecodingError(
                f"opening_floor token ids {outside} are outside the vocabulary (0 to {cfg.vocab_size - 1})"
            )
        return p


def _check_knobs(p: GenerationParams) -> None:
    """Each setting's type and range, as llm/knobs.py declares them."""
    for knob in KNOBS.values():
        value = getattr(p, knob.name)
        if value is not None and (problem := knob.problem(value)):
            raise DecodingError(f"{knob.name} {problem}")
