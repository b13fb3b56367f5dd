"""Checkpoint families: each module translates one released layout (config.json keys, tensor names,
generation defaults) onto `ModelConfig` and `Transformer`. `FAMILIES` maps a config.json `model_type`
(lower case) to its module, which has `config(raw: dict) -> ModelConfig` and
`names(cfg, model) -> {our parameter name: its tensor name}`."""

from llm.engine.families import dream, llada, own, sdar

FAMILIES = {"llada": llada, "dream": dream, "sdar": sdar, "ttfat": own}
