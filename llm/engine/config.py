"""Model configuration: one dataclass for every architecture the engine runs."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path


@dataclass
class ModelConfig:
    """Shape and semantics of a diffusion (or autoregressive) transformer.

    `attention` is "bidirectional" (LLaDA, Dream: every position sees every position) or "block"
    (block diffusion: causal across blocks, bidirectional inside one; the prompt is causal, so a block
    size of 1 is an autoregressive model). `shift_logits` means the token at position i is predicted
    from the output at i - 1 (Dream, and our own models, which start from autoregressive weights).
    """

    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    mask_token_id: int
    eos_token_ids: list[int]
    pad_token_id: int
    model_type: str = "ttfat"
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    qkv_bias: bool = False
    tie_embeddings: bool = False
    attention: str = "bidirectional"
    block_size: int = 8
    shift_logits: bool = False
    max_position: int = 4096
    extra: dict = field(default_factory=dict)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def validate(self) -> None:
        if self.attention not in ("bidirectional", "block"):
            raise ValueError(f"attention must be 'bidirectional' or 'block', not {self.attention!r}")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size}, num_heads {self.num_heads} and num_kv_heads "
                f"{self.num_kv_heads} do not divide evenly"
            )

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")
