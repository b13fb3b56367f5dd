"""inclusionAI LLaDA2.0 (model_type "llada2_moe"): a mixture-of-experts block-diffusion model.

Ling names: a fused `query_key_value` projection (Q | K | V rows, split at load), `dense` for the output,
per-head `query_layernorm` / `key_layernorm` before a rotation of the first half of each head
(`partial_rotary_factor` 0.5); the first `first_k_dense_replace` layers have a dense MLP, the others a
sigmoid-routed mixture of experts (expert bias for choosing only, group-limited top-k, routed scaling, a
shared expert). Blocks of 32 counted from position 0, the prompt included; logits unshifted. Decoding
(the model's `generate`, with its fix for temperature 0: argmax and that token's probability): every
masked position above 0.95, at least the block's step schedule (one a step). Mask 156895 and stop
`<|endoftext|>` 156892 are `generate`'s defaults, in no config file.
"""

from __future__ import annotations

from llm.engine.config import ModelConfig, MoE
from llm.engine.errors import CheckpointError
from llm.engine.families.common import hf_shape, ids

MASK, END_OF_TEXT, BLOCK = 156895, 156892, 32


def config(c: dict) -> ModelConfig:
    if c.get("score_function", "sigmoid") != "sigmoid":
        raise ValueError(f"score_function {c['score_function']!r} is not supported (sigmoid only)")
    if c.get("use_qkv_bias") or c.get("use_bias", True):
        raise ValueError("use_qkv_bias and use_bias must be false (LLaDA2.0's projections have no bias)")
    shape = hf_shape(c, rope_theta=600000.0, max_position=16384)
    shape["head_dim"] = shape["head_dim"] or shape["hidden_size"] // shape["num_heads"]
    return ModelConfig(
        model_type="llada2_moe",
        family="llada2",
        **shape,
        rotary_dim=int(shape["head_dim"] * float(c.get("partial_rotary_factor", 1.0))),
        mask_token_id=MASK,
        eos_token_ids=ids(c.get("eos_token_id", END_OF_TEXT)),
        pad_token_id=int(c.get("pad_token_id", END_OF_TEXT)),
        qk_norm=bool(c.get("use_qk_norm", True)),  # absent from the released config: the class's default
        moe=MoE(
            experts=int(c["num_experts"]),
            per_token=int(c["num_experts_per_tok"]),
            size=int(c["moe_intermediate_size"]),
            shared=int(c.get("num_shared_experts") or 0),
            groups=int(c.get("n_group") or 1),
            topk_groups=int(c.get("topk_group") or 1),
            scaling=float(c.get("routed_scaling_factor", 1.0)),
            dense_layers=int(c.get("first_k_dense_replace", 0)),
        ),
        attention="block",
        aligned_blocks=True,
        block_size=BLOCK,
        shift_logits=False,
        extra={"generation": {"block_length": BLOCK, "threshold": 0.95, "cache": "block"}},
    )


def split(tensors: dict, cfg: ModelConfig) -> None:
    """Each layer's fused `query_key_value` rows into Q, K and V, named after it with [q], [k], [v]."""
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    for i in range(cfg.num_layers):
        name = f"model.layers.{i}.attention.query_key_value.weight"
        if name not in tensors:
            continue  # reported as missing with the others
        file, fused = tensors.pop(name)
        if fused.shape[0] != q + 2 * kv:
            raise CheckpointError(
                f"{file}: tensor {name!r} has {fused.shape[0]} rows, config.json implies "
                f"{q + 2 * kv} (query, key and value heads of {cfg.head_dim})"
            )
        for part, rows in zip("qkv", fused.split([q, kv, kv]), strict=True):
            tensors[f"{name}[{part}]"] = (file, rows)


ATTENTION = {
    "q_proj": "query_key_value.weight[q]",
    "k_proj": "query_key_value.weight[k]",
    "v_proj": "query_key_value.weight[v]",
    "o_proj": "dense.weight",
    "q_norm": "query_layernorm.weight",
    "k_norm": "key_layernorm.weight",
}


def names(cfg: ModelConfig, model) -> dict[str, str]:
    embedding = "model.word_embeddings.weight"
    ours = {
        "embed_tokens.weight": embedding,
        "norm.weight": "model.norm.weight",
        "lm_head.weight": embedding if cfg.tie_embeddings else "lm_head.weight",
    }
    for name in model.state_dict():
        if name.startswith("layers."):
            i, rest = name.split(".", 2)[1:]
            if rest.startswith("self_attn."):
                rest = "attention." + ATTENTION[rest.split(".")[1]]
            ours[name] = f"model.layers.{i}.{rest}"
    return ours
