"""Model configuration: one dataclass for every architecture the engine runs."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path


@dataclass
class MoE:
    """A sigmoid-routed mixture of experts with group-limited top-k (LLaDA2, after DeepSeek-V3): the
    router's scores plus a per-expert bias choose `per_token` experts from the `topk_groups` best of
    `groups` groups (a group scores its two best); the unbiased scores, normalized and scaled by
    `scaling`, weight them, and `shared` experts are added unweighted. The first `dense_layers` layers
    keep a dense MLP."""

    experts: int
    per_token: int
    size: int  # each expert's intermediate size
    shared: int = 0
    groups: int = 1
    topk_groups: int = 1
    scaling: float = 1.0
    dense_layers: int = 0


@dataclass
class ModelConfig:
    """Shape and semantics of a diffusion (or autoregressive) transformer.

    `attention` is "bidirectional" (LLaDA, Dream: every position sees every position) or "block"
    (block diffusion: causal across blocks, bidirectional inside one). Our own block models count
    blocks from the answer's start and keep the prompt causal, so a block size of 1 is an autoregressive
    model; with `aligned_blocks` (SDAR, LLaDA2, Fast-dLLM v2) blocks are counted from position 0 of the
    sequence, the prompt included, and the prompt's tail decodes inside the first answer block.
    `shift_logits` means the token at position i is predicted from the output at i - 1 (Dream,
    Fast-dLLM v2, and our own models, which start from autoregressive weights). `head_dim` 0 means
    hidden_size / num_heads; `rotary_dim` 0 means the whole head is rotated (LLaDA2 rotates half);
    `qk_norm`: an RMSNorm over each query and key head before the rotation (Qwen3, SDAR, LLaDA2);
    `moe`: the MLP of most layers is a mixture of experts (LLaDA2). `greedy_block_start`: the first
    token of each answer block is the previous block's greedy next token, committed alone before the
    rest of the block is denoised (Fast-dLLM v2). `family` names the checkpoint layout and the decoding
    its reference applies.
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
    head_dim: int = 0
    rotary_dim: int = 0
    qk_norm: bool = False
    moe: MoE | None = None
    aligned_blocks: bool = False
    greedy_block_start: bool = False
    family: str = ""
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.family = self.family or self.model_type
        if isinstance(self.moe, dict):  # read back from JSON
            self.moe = MoE(**self.moe)
        if not self.head_dim and self.num_heads and not self.hidden_size % self.num_heads:
            self.head_dim = self.hidden_size // self.num_heads

    def validate(self) -> None:
        if self.attention not in ("bidirectional", "block"):
            raise ValueError(f"attention must be 'bidirectional' or 'block', not {self.attention!r}")
        if not self.head_dim or self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size}, num_heads {self.num_heads} and num_kv_heads "
                f"{self.num_kv_heads} do not divide evenly (and no head_dim is given)"
            )
        if self.aligned_blocks and self.attention != "block":
            raise ValueError("aligned_blocks needs block attention")

    def layout(self) -> dict:
        """How the model reads a sequence and what its decoding does beyond the knobs (/health says it)."""
        blocks = "position 0" if self.aligned_blocks else "the answer's start"
        return {
            "attention": self.attention,
            "blocks_from": blocks if self.attention == "block" else None,
            "shifted_logits": self.shift_logits,
            "greedy_block_start": self.greedy_block_start,
            "mask_token_id": self.mask_token_id,
            "stop_token_ids": self.eos_token_ids,
            "experts": self.moe.experts if self.moe else 0,
        }

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json() + "\n")
