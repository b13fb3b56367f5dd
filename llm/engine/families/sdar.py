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
from llm.engine.families.common import ids, prefixed

MASK, END_OF_TEXT, IM_END = 151669, 151643, 151645


def config(c: dict) -> ModelConfig:
    if c.get("rope_scaling"):
        raise ValueError(f"rope_scaling {c['rope_scaling']!r} is not supported")
    if c.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {c['hidden_act']!r} is not supported (silu only)")
    eos = ids(c.get("eos_token_id", END_OF_TEXT))
    block = int(c.get("block_size", 4))
    return ModelConfig(
        model_type="sdar",
        vocab_size=int(c["vocab_size"]),
        hidden_size=int(c["hidden_size"]),
        num_layers=int(c["num_hidden_layers"]),
        num_heads=int(c["num_attention_heads"]),
        num_kv_heads=int(c.get("num_key_value_heads") or c["num_attention_heads"]),
        head_dim=int(c.get("head_dim") or 0),
        intermediate_size=int(c["intermediate_size"]),
        mask_token_id=int(c.get("mask_token_id", MASK)),
        eos_token_ids=[IM_END, *(e for e in eos if e != IM_END)],
        pad_token_id=int(c.get("pad_token_id") or END_OF_TEXT),
        rope_theta=float(c.get("rope_theta", 1000000.0)),
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
        qkv_bias=bool(c.get("attention_bias", False)),
        qk_norm=True,
        tie_embeddings=bool(c.get("tie_word_embeddings", False)),
        attention="block",
        aligned_blocks=True,
        block_size=block,
        shift_logits=False,
        max_position=int(c.get("max_position_embeddings", 32768)),
        extra={"generation": {"block_length": block, "threshold": 0.9, "cache": "block"}},
    )


def names(cfg: ModelConfig, model) -> dict[str, str]:
    return prefixed(model, tied=cfg.tie_embeddings)
