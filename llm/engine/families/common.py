"""What the family translations share."""

from __future__ import annotations


def ids(value) -> list[int]:
    """A config's token id or list of ids, as a list."""
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


def prefixed(model, tied: bool = False) -> dict[str, str]:
    """Qwen2 / Qwen3 names: ours with a `model.` prefix; the LM head has none, or is the embedding."""
    names = {name: "model." + name for name in model.state_dict()}
    names["lm_head.weight"] = "model.embed_tokens.weight" if tied else "lm_head.weight"
    return names


def hf_shape(c: dict, *, rope_theta: float, max_position: int, eps: float = 1e-6) -> dict:
    """ModelConfig's shape fields from a Hugging Face config's usual keys (Qwen2 and Qwen3, Ling); a
    rope_scaling or an activation other than SiLU is refused by name."""
    if c.get("rope_scaling"):
        raise ValueError(f"rope_scaling {c['rope_scaling']!r} is not supported")
    if c.get("hidden_act", "silu") != "silu":
        raise ValueError(f"hidden_act {c['hidden_act']!r} is not supported (silu only)")
    heads = int(c["num_attention_heads"])
    return {
        "vocab_size": int(c["vocab_size"]),
        "hidden_size": int(c["hidden_size"]),
        "num_layers": int(c["num_hidden_layers"]),
        "num_heads": heads,
        "num_kv_heads": int(c.get("num_key_value_heads") or heads),
        "head_dim": int(c.get("head_dim") or 0),
        "intermediate_size": int(c["intermediate_size"]),
        "rope_theta": float(c.get("rope_theta", rope_theta)),
        "rms_norm_eps": float(c.get("rms_norm_eps", eps)),
        "tie_embeddings": bool(c.get("tie_word_embeddings", False)),
        "max_position": int(c.get("max_position_embeddings", max_position)),
    }
