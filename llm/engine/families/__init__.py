"""Checkpoint families: each module translates one released layout (config.json keys, tensor names,
generation defaults) onto `ModelConfig` and `Transformer`. `FAMILIES` maps a config.json `model_type`
(lower case) to its module, which has `config(raw: dict) -> ModelConfig` and
`names(cfg, model) -> {our parameter name: its tensor name}`, and may have `split(tensors, cfg)`, which
cuts a fused tensor into the pieces `names` asks for."""

from llm.engine.families import dream, fast_dllm_v2, llada, llada2, own, sdar

FAMILIES = {
    "llada": llada,
    "dream": dream,
    "sdar": sdar,
    "fast_dllm_qwen": fast_dllm_v2,
    "llada2_moe": llada2,
    "ttfat": own,
}
