"""GSAI-ML/LLaDA (model_type "llada"): OLMo-style names, bidirectional attention, unshifted logits."""

from __future__ import annotations

from llm.engine.config import ModelConfig
from llm.engine.families.common import ids


def config(c: dict) -> ModelConfig:
    eos = ids(c.get("eos_token_id", 126081))
    return ModelConfig(
        model_type="llada",
        vocab_size=int(c.get("embedding_size") or c["vocab_size"]),
        hidden_size=int(c["d_model"]),
        num_layers=int(c["n_layers"]),
        num_heads=int(c["n_heads"]),
        num_kv_heads=int(c.get("n_kv_heads") or c["n_heads"]),
        intermediate_size=int(c.get("mlp_hidden_size") or c["d_model"] * c.get("mlp_ratio", 4)),
        mask_token_id=int(c.get("mask_token_id", 126336)),
        eos_token_ids=eos + [126348] * (int(c["vocab_size"]) > 126348),  # <|eot_id|> ends a turn too
        pad_token_id=int(c.get("pad_token_id") or eos[0]),
        rope_theta=float(c.get("rope_theta", 10000.0)),
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-5)),
        qkv_bias=bool(c.get("include_bias") or c.get("include_qkv_bias")),
        tie_embeddings=bool(c.get("weight_tying", False)),
        attention="bidirectional",
        shift_logits=False,
        max_position=int(c.get("max_sequence_length", 4096)),
    )


def names(cfg: ModelConfig, model) -> dict[str, str]:
    """Our parameter name -> LLaDA tensor name. ff_proj is the gate; ff_out is the down projection
    inside a block but the LM head at the top."""
    t = "model.transformer."
    names = {
        "embed_tokens.weight": t + "wte.weight",
        "norm.weight": t + "ln_f.weight",
        "lm_head.weight": t + ("wte.weight" if cfg.tie_embeddings else "ff_out.weight"),
    }
    parts = {
        "input_layernorm.weight": "attn_norm.weight",
        "self_attn.q_proj.weight": "q_proj.weight",
        "self_attn.k_proj.weight": "k_proj.weight",
        "self_attn.v_proj.weight": "v_proj.weight",
        "self_attn.o_proj.weight": "attn_out.weight",
        "post_attention_layernorm.weight": "ff_norm.weight",
        "mlp.gate_proj.weight": "ff_proj.weight",
        "mlp.up_proj.weight": "up_proj.weight",
        "mlp.down_proj.weight": "ff_out.weight",
    }
    if cfg.qkv_bias:
        parts |= {f"self_attn.{p}_proj.bias": f"{p}_proj.bias" for p in "qkv"}
    for i in range(cfg.num_layers):
        names |= {f"layers.{i}.{ours}": f"{t}blocks.{i}.{theirs}" for ours, theirs in parts.items()}
    return names
