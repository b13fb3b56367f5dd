"""Dream-org/Dream (model_type "Dream"; also Dream-Coder and DiffuCoder): Qwen2 names and layout,
bidirectional attention, shifted logits. Decoded as Dream's `diffusion_generate` does at temperature 0:
the whole canvas as one block, Dream's timestep schedule, confidence by entropy (`alg="entropy"`, what
the published examples use; `--confidence margin` is `alg="topk_margin"`, `probability` is
`maskgit_plus`)."""

from __future__ import annotations

from llm.engine.config import ModelConfig
from llm.engine.families.common import hf_shape, ids, prefixed


def config(c: dict) -> ModelConfig:
    eos = ids(c.get("eos_token_id", 151643))
    return ModelConfig(
        model_type="dream",
        **hf_shape(c, rope_theta=10000.0, max_position=4096),
        mask_token_id=int(c.get("mask_token_id", 151666)),
        eos_token_ids=eos + [151645] * (int(c["vocab_size"]) > 151645),  # <|im_end|> ends a turn too
        pad_token_id=int(c.get("pad_token_id") or eos[0]),
        qkv_bias=True,
        attention="bidirectional",
        shift_logits=True,
        # Dream's own decoding (generation_utils.py, as its published examples call it): the whole canvas
        # at once, its timestep schedule, confidence by entropy
        extra={"generation": {"one_block": True, "schedule": "timesteps", "confidence": "entropy"}},
    )


def names(cfg: ModelConfig, model) -> dict[str, str]:
    """Dream uses the Qwen2 names, which are ours with a `model.` prefix (the LM head has none)."""
    return prefixed(model, tied=cfg.tie_embeddings)
