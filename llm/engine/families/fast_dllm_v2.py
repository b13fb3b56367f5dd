"""NVIDIA Fast-dLLM v2 (model_type "Fast_dLLM_Qwen"): Qwen2.5 weights converted to block diffusion.

Qwen2 names and layout (q/k/v biases; the 1.5B ties its LM head); block-causal attention with blocks of
`bd_size` (32) counted from position 0, the prompt included; logits shifted (position i is read from
output i - 1). Decoding (the checkpoint's `generate`): the first token of each block is the previous
block's greedy next token, then the block is denoised in sub-blocks of 8, left to right, committing every
masked position of the sub-block above the threshold and at least the most confident one. The threshold
is the model card's 0.9 (`generate`'s own default, 1, is one token a step). Only `<|im_end|>` stops. The
mask token (151665) is in no config file: it is the tokenizer's `|<MASK>|`.
"""

from __future__ import annotations

from llm.engine.config import ModelConfig
from llm.engine.families.common import hf_shape, ids, prefixed

MASK, IM_END, END_OF_TEXT = 151665, 151645, 151643
SUB_BLOCK = 8


def config(c: dict) -> ModelConfig:
    if c.get("use_sliding_window"):
        raise ValueError("use_sliding_window is not supported")
    block = int(c.get("bd_size", 32))
    return ModelConfig(
        model_type="fast_dllm_qwen",
        family="fast_dllm_v2",
        **hf_shape(c, rope_theta=1000000.0, max_position=32768),
        mask_token_id=MASK,
        eos_token_ids=ids(c.get("eos_token_id", IM_END)),
        pad_token_id=END_OF_TEXT,
        qkv_bias=True,
        attention="block",
        aligned_blocks=True,
        greedy_block_start=True,
        block_size=block,
        shift_logits=True,
        extra={
            "generation": {
                "block_length": block,
                "sub_block_length": SUB_BLOCK,
                "threshold": 0.9,
                "cache": "block",
            }
        },
    )


def names(cfg: ModelConfig, model) -> dict[str, str]:
    return prefixed(model, tied=cfg.tie_embeddings)
