"""JetLM SDAR (model_type "sdar"): Qwen3 weights trained for block diffusion.

Qwen3 names and layout (an RMSNorm over each query and key head before the rotation, `head_dim` set
apart from hidden_size / heads, no biases); block-causal attention with blocks of `block_size` (4)
counted from position 0 of the sequence, bidirectional inside a block, the prompt included; logits
unshifted. Decoding (JetAstra/SDAR generate.py, `low_confidence_dynamic`): every masked position of the
block above the threshold, at least as many as the block's step schedule gives (one a step with 4
steps for 4 tokens). The threshold is the model card's 0.9. `<|im_end|>` and `<|endoftext|>` both stop.
"""

from __future__ import annotations

from llm.engine.config import ModelConfig
from llm.engine.families.common import hf_shape, ids, prefixed

MASK, END_OF_TEXT, IM_END = 151669, 151643, 151645


def config(c: dict) -> ModelConfig:
    eos = ids(c.get("eos_token_id", END_OF_TEXT))
    block = int(c.get("block_size", 4))
    return ModelConfig(
        model_type="sdar",
        **hf_shape(c, rope_theta=1000000.0, max_position=32768),
        mask_token_id=int(c.get("mask_token_id", MASK)),
        eos_token_ids=[IM_END, *(e for e in eos if e != IM_END)],
        pad_token_id=int(c.get("pad_token_id") or END_OF_TEXT),
        qkv_bias=bool(c.get("attention_bias", False)),
        qk_norm=True,
        attention="block",
        aligned_blocks=True,
        block_size=block,
        shift_logits=False,
        extra={"generation": {"block_length": block, "threshold": 0.9, "cache": "block"}},
    )


def names(cfg: ModelConfig, model) -> dict[str, str]:
    return prefixed(model, tied=cfg.tie_embeddings)
