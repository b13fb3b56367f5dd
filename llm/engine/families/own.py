"""Our own format (model_type "ttfat"): ModelConfig's fields as they are, our parameter names."""

from __future__ import annotations

from llm.engine.config import ModelConfig


def config(raw: dict) -> ModelConfig:
    return ModelConfig.from_dict(raw)


def names(cfg: ModelConfig, model) -> dict[str, str]:
    out = {n: n for n in model.state_dict()}
    if cfg.tie_embeddings:
        out["lm_head.weight"] = "embed_tokens.weight"
    return out
