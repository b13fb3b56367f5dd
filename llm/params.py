"""Per-request decoding settings."""

from __future__ import annotations

from dataclasses import dataclass, replace

from llm.config import ModelConfig

CACHE_MODES = ("none", "prefix", "dual", "block")


@dataclass
class GenerationParams:
    """How one request is decoded. `None` means "the model's default".

    Commit rule: `threshold` (Fast-dLLM) if set, else `factor` if set, else a fixed number of steps
    (LLaDA low-confidence remasking; `steps` over the whole canvas, split evenly over its blocks).
    `gen_length` is the answer canvas for bidirectional models and the token budget for block models,
    whose canvas grows one block at a time. Decoding stops once end-of-sequence is committed with
    everything before it committed (`early_stop`).
    """

    gen_length: int = 64
    block_length: int | None = None
    steps: int | None = None
    threshold: float | None = None
    factor: float | None = None
    cache: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    early_stop: bool = True
    ignore_eos: bool = False  # keep decoding past end-of-sequence (benchmarks of fixed lengths)

    def resolve(self, cfg: ModelConfig) -> GenerationParams:
        """Fill model defaults and check the combination; raises ValueError with a readable message."""
        defaults = cfg.extra.get("generation", {})
        block = cfg.attention == "block"
        p = replace(self)
        if p.block_length is None:
            p.block_length = defaults.get("block_length", cfg.block_size if block else min(32, p.gen_length))
        if p.cache is None:
            p.cache = defaults.get("cache", "block" if block else "none")
        if p.threshold is None and p.factor is None and p.steps is None:
            p.threshold = defaults.get("threshold")
            p.factor = defaults.get("factor")
        if p.steps is None:
            p.steps = p.gen_length
        if p.gen_length < 1 or p.block_length < 1 or p.gen_length % p.block_length:
            raise ValueError(
                f"gen_length {p.gen_length} must be a positive multiple of block_length {p.block_length}"
            )
        blocks = p.gen_length // p.block_length
        if p.steps < blocks or p.steps % blocks:
            raise ValueError(
                f"steps {p.steps} must be a positive multiple of the number of blocks ({blocks})"
            )
        if p.cache not in CACHE_MODES:
            raise ValueError(f"cache must be one of {', '.join(CACHE_MODES)}, not {p.cache!r}")
        if block and p.cache in ("prefix", "dual"):
            raise ValueError(
                f"cache {p.cache!r} is for bidirectional models; block-diffusion models use 'block'"
            )
        if not block and p.cache == "block":
            raise ValueError("cache 'block' needs a block-diffusion model; use 'prefix' or 'dual'")
        if p.threshold is not None and not 0.0 <= p.threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], not {p.threshold}")
        if p.factor is not None and p.factor <= 0:
            raise ValueError(f"factor must be positive, not {p.factor}")
        if p.temperature < 0:
            raise ValueError(f"temperature must be >= 0, not {p.temperature}")
        return p
