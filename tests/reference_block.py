"""Independent reference code for the block-diffusion families whose blocks start at position 0 of the
sequence: SDAR (and, as they land, Fast-dLLM v2 and LLaDA2).

Like ``tests/reference.py`` (whose fixture helpers it shares) it imports nothing from ``llm/``. It was
written from the papers, the model cards and the configuration files, and read against the upstream
code, never copied from it:

* SDAR: JetAstra/SDAR ``generate.py`` (``block_diffusion_generate``, ``low_confidence_dynamic`` and
  ``low_confidence_static``) and ``training/model/SDAR-4B-Chat/`` (config.json, modeling_sdar.py,
  tokenizer_config.json, model.safetensors.index.json) at commit c2041a8; the 1.7B files as mirrored in
  hxhcreate/DARE ``models/SDAR-1dot7B-Chat/``.
* LLaDA2.0-mini: the checkpoint's ``modeling_llada2_moe.py`` (model and ``generate``) as vendored in
  ZHZisZZ/dllm ``dllm/pipelines/llada2/models/`` at cbbda7a, its config as shipped in inclusionAI/dFactory
  ``configs/model_configs/llada2_mini/config.json`` at c29d72c, SGLang's ``models/llada2.py`` and
  ``dllm/algorithm/low_confidence.py``, and the LLaDA2.0 technical report (inclusionAI/LLaDA2.X).
* Fast-dLLM v2: NVlabs/Fast-dLLM ``v2/`` (as in the fork mgustineli/Fast-dLLM at 6cf2722) and the
  checkpoint's own ``modeling.py`` (``Fast_dLLM_QwenForCausalLM.generate``), ``config.json`` and
  tokenizer files (7B: Satgoy152/DualDiffusion at 189fa7a; 1.5B config: HoangMaizzz/failfasttesting).

It provides ``write_sdar_checkpoint`` (a tiny random checkpoint in the released layout: config keys,
Qwen3 tensor names with per-head ``q_norm`` / ``k_norm``, untied LM head, the Qwen special tokens and
SDAR's mask at their released ids), ``block_logits`` (a float64 forward pass, one head at a time, under
the block-causal mask with blocks counted from position 0) and ``low_confidence_generate``.

Temperature 0, as the authors' greedy evaluations define it: the token is the argmax over the whole
vocabulary and its confidence is its probability in a softmax over the whole vocabulary, the mask token
included. (``generate.py`` itself has no greedy path: it divides by the temperature.)
"""

from __future__ import annotations

import math
from pathlib import Path

import torch

from tests.reference import (
    DREAM_SPECIAL_TOKENS,
    _active_ids,
    _added_tokens_decoder,
    _build_tokenizer,
    _lm_head,
    _load_f64,
    _norm_weight,
    _normal,
    _rms_norm,
    _rotary_cos_sin,
    _save_tensors,
    _silu,
    _softmax,
    _write_json,
)

# Qwen3's added tokens at their ids (tokenizer_config.json "added_tokens_decoder"), SDAR's mask last:
# <|endoftext|> (151643) is eos_token, pad_token and config.json's bos/eos; <|im_end|> (151645) ends a turn.
# value: (id, special)
SDAR_SPECIAL_TOKENS: dict[str, tuple[int, bool]] = {
    **{t: v for t, v in DREAM_SPECIAL_TOKENS.items() if v[0] <= 151664},  # Qwen2's, as Dream has them
    "<tool_response>": (151665, False),
    "</tool_response>": (151666, False),
    "<think>": (151667, False),
    "</think>": (151668, False),
    "<|MASK|>": (151669, True),  # config.json mask_token_id
}
SDAR_MASK, SDAR_STOPS = 151669, (151645, 151643)

# The default path of the stock Qwen3 template SDAR ships (no tools, no reasoning): no default system
# prompt, ChatML turns, and the generation prompt "<|im_start|>assistant\n".
SDAR_CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def sdar_config(
    *,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    intermediate_size: int,
) -> dict:
    """The key set of JetLM/SDAR-1.7B-Chat config.json, real values except the sizes (real: hidden 2048,
    28 layers, 16 heads, 8 KV heads, head_dim 128, intermediate 6144)."""
    return {
        "architectures": ["SDARForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_implementation": "flex_attention",
        "auto_map": {
            "AutoConfig": "configuration_sdar.SDARConfig",
            "AutoModel": "modeling_sdar.SDARModel",
            "AutoModelForCausalLM": "modeling_sdar.SDARForCausalLM",
        },
        "block_size": 4,
        "bos_token_id": 151643,
        "debug": False,
        "eos_token_id": 151643,
        "ep_size": 1,
        "fuse_cross_entropy": True,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size,
        "mask_token_id": SDAR_MASK,
        "max_position_embeddings": 32768,
        "max_window_layers": 28,
        "micro_forward": False,
        "model_type": "sdar",
        "num_attention_heads": num_heads,
        "num_hidden_layers": num_layers,
        "num_key_value_heads": num_kv_heads,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000,
        "skip_checkpoint": False,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.52.4",
        "use_cache": False,
        "use_deepep": False,
        "use_sliding_window": False,
        "vocab_size": 151936,
    }


def write_sdar_checkpoint(
    path,
    *,
    seed: int = 0,
    hidden_size: int = 48,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 16,
    intermediate_size: int = 96,
    sharded: bool = False,
    std: float = 0.5,
    head_std: float = 1.0,
) -> dict:
    """A tiny random SDAR-layout checkpoint (bfloat16 tensors, Qwen3 names); returns its config dict.

    `head_dim` is set apart from hidden_size / num_heads (16 * 4 = 64 against 48 here, as 128 * 32 against
    2560 in the 4B). Per layer: ``model.layers.{i}.input_layernorm.weight``,
    ``self_attn.{q,k,v,o}_proj.weight`` (no biases), ``self_attn.{q,k}_norm.weight`` [head_dim],
    ``post_attention_layernorm.weight``, ``mlp.{gate,up,down}_proj.weight``; then ``model.norm.weight`` and
    an untied ``lm_head.weight``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cfg = sdar_config(
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        head_dim=head_dim,
        num_kv_heads=num_kv_heads,
        intermediate_size=intermediate_size,
    )
    gen = torch.Generator().manual_seed(seed)
    d, q, kv, vocab = hidden_size, num_heads * head_dim, num_kv_heads * head_dim, cfg["vocab_size"]
    t: dict[str, torch.Tensor] = {"model.embed_tokens.weight": _normal(gen, (vocab, d), 1.0)}
    for i in range(num_layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = _norm_weight(gen, d)
        t[p + "self_attn.q_proj.weight"] = _normal(gen, (q, d), std)
        t[p + "self_attn.k_proj.weight"] = _normal(gen, (kv, d), std)
        t[p + "self_attn.v_proj.weight"] = _normal(gen, (kv, d), std)
        t[p + "self_attn.o_proj.weight"] = _normal(gen, (d, q), std)
        t[p + "self_attn.q_norm.weight"] = _norm_weight(gen, head_dim)
        t[p + "self_attn.k_norm.weight"] = _norm_weight(gen, head_dim)
        t[p + "post_attention_layernorm.weight"] = _norm_weight(gen, d)
        t[p + "mlp.gate_proj.weight"] = _normal(gen, (intermediate_size, d), std)
        t[p + "mlp.up_proj.weight"] = _normal(gen, (intermediate_size, d), std)
        t[p + "mlp.down_proj.weight"] = _normal(gen, (d, intermediate_size), std)
    t["model.norm.weight"] = _norm_weight(gen, d)
    active = _active_ids({c: i for c, (i, _) in SDAR_SPECIAL_TOKENS.items()}, {"<|MASK|>"})
    t["lm_head.weight"] = _lm_head(gen, vocab, d, active, head_std)
    _save_tensors(path, {k: v.to(torch.bfloat16) for k, v in t.items()}, sharded)
    _write_json(path / "config.json", cfg)
    _build_tokenizer(SDAR_SPECIAL_TOKENS).save(str(path / "tokenizer.json"))
    _write_json(
        path / "tokenizer_config.json",
        {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": _added_tokens_decoder(SDAR_SPECIAL_TOKENS),
            "bos_token": None,
            "chat_template": SDAR_CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|endoftext|>",
            "errors": "replace",
            "mask_token": "<|MASK|>",
            "model_max_length": 131072,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        },
    )
    _write_json(
        path / "generation_config.json",
        {
            "bos_token_id": 151643,
            "do_sample": True,
            "eos_token_id": [151645, 151643],
            "pad_token_id": 151643,
            "temperature": 0.6,
            "top_k": 20,
            "top_p": 0.95,
            "transformers_version": "4.52.4",
        },
    )
    return cfg


# Qwen2.5's added tokens and Fast-dLLM v2's mask, the tokenizer's last token.
FAST_DLLM_V2_SPECIAL_TOKENS: dict[str, tuple[int, bool]] = {
    **{t: v for t, v in DREAM_SPECIAL_TOKENS.items() if v[0] <= 151664},
    "|<MASK>|": (151665, True),
}
FAST_DLLM_V2_MASK, FAST_DLLM_V2_STOP = 151665, 151645

# chat_template.jinja (not in tokenizer_config.json), its path without tools: Qwen2's default system prompt.
FAST_DLLM_V2_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def fast_dllm_v2_config(
    *, hidden_size: int, num_layers: int, num_heads: int, num_kv_heads: int, intermediate_size: int
) -> dict:
    """The key set of Efficient-Large-Model/Fast_dLLM_v2_1.5B config.json, real values except the sizes
    (real: hidden 1536, 28 layers, 12 heads, 2 KV heads, intermediate 8960)."""
    return {
        "architectures": ["Fast_dLLM_QwenForCausalLM"],
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration.Fast_dLLM_QwenConfig",
            "AutoModel": "modeling.Fast_dLLM_QwenModel",
            "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM",
        },
        "bd_size": 32,
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size,
        "layer_types": ["full_attention"] * num_layers,
        "max_position_embeddings": 32768,
        "max_window_layers": 21,
        "model_type": "Fast_dLLM_Qwen",
        "num_attention_heads": num_heads,
        "num_hidden_layers": num_layers,
        "num_key_value_heads": num_kv_heads,
        "pad_token_id": 151645,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.53.1",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
    }


def write_fast_dllm_v2_checkpoint(
    path,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    bd_size: int = 32,
    sharded: bool = False,
    std: float = 0.5,
) -> dict:
    """A tiny random Fast-dLLM v2 1.5B-layout checkpoint (bfloat16, Qwen2 names with q/k/v biases, the LM
    head tied to the embedding and so absent from the file; the chat template in chat_template.jinja);
    returns its config dict. The tied matrix's rows of the tokenizer's words are drawn with std 1, the
    rest (the mask's too) tiny, so the greedy token is always one the tokenizer can write."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cfg = fast_dllm_v2_config(
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        intermediate_size=intermediate_size,
    )
    cfg["bd_size"] = bd_size
    gen = torch.Generator().manual_seed(seed)
    d, kv, vocab = hidden_size, num_kv_heads * hidden_size // num_heads, cfg["vocab_size"]
    active = _active_ids({c: i for c, (i, _) in FAST_DLLM_V2_SPECIAL_TOKENS.items()}, {"|<MASK>|"})
    t: dict[str, torch.Tensor] = {"model.embed_tokens.weight": _lm_head(gen, vocab, d, active, 1.0)}
    for i in range(num_layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = _norm_weight(gen, d)
        for name, rows in (("q", d), ("k", kv), ("v", kv)):
            t[p + f"self_attn.{name}_proj.weight"] = _normal(gen, (rows, d), std)
            t[p + f"self_attn.{name}_proj.bias"] = _normal(gen, (rows,), std)
        t[p + "self_attn.o_proj.weight"] = _normal(gen, (d, d), std)
        t[p + "post_attention_layernorm.weight"] = _norm_weight(gen, d)
        t[p + "mlp.gate_proj.weight"] = _normal(gen, (intermediate_size, d), std)
        t[p + "mlp.up_proj.weight"] = _normal(gen, (intermediate_size, d), std)
        t[p + "mlp.down_proj.weight"] = _normal(gen, (d, intermediate_size), std)
    t["model.norm.weight"] = _norm_weight(gen, d)
    _save_tensors(path, {k: v.to(torch.bfloat16) for k, v in t.items()}, sharded)
    _write_json(path / "config.json", cfg)
    _build_tokenizer(FAST_DLLM_V2_SPECIAL_TOKENS).save(str(path / "tokenizer.json"))
    (path / "chat_template.jinja").write_text(FAST_DLLM_V2_CHAT_TEMPLATE)
    _write_json(
        path / "tokenizer_config.json",
        {
            "add_bos_token": False,
            "add_prefix_space": False,
            "added_tokens_decoder": _added_tokens_decoder(FAST_DLLM_V2_SPECIAL_TOKENS),
            "additional_special_tokens": ["|<MASK>|"],
            "bos_token": None,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",
            "errors": "replace",
            "model_max_length": 131072,
            "pad_token": "<|endoftext|>",
            "split_special_tokens": False,
            "tokenizer_class": "Qwen2Tokenizer",
            "unk_token": None,
        },
    )
    return cfg


# LLaDA2.0's special tokens. The ids of <|endoftext|> (eos, pad) and <|mask|> are generate()'s defaults;
# those of the role markers could not be read (tokenizer.json was not readable anywhere): <|role_end|> at
# 156900 follows a third-party port, the others are placed beside it.
LLADA2_SPECIAL_TOKENS: dict[str, tuple[int, bool]] = {
    "<|startoftext|>": (156891, True),
    "<|endoftext|>": (156892, True),
    "<|mask|>": (156895, True),
    "<role>": (156898, True),
    "</role>": (156899, True),
    "<|role_end|>": (156900, True),
    # the template's words, plain tokens of this fixture's vocabulary (the real ones are BPE pieces)
    "SYSTEM": (5000, False),
    "HUMAN": (5001, False),
    "ASSISTANT": (5002, False),
    "detailed": (5003, False),
    "thinking": (5004, False),
    "off": (5005, False),
}
LLADA2_MASK, LLADA2_STOP = 156895, 156892

# The canonical prompt of LLaDA2.0's template without tools: a system turn always, "detailed thinking off".
LLADA2_CHAT_TEMPLATE = (
    "{{ '<role>SYSTEM</role>' }}{% if messages[0]['role'] == 'system' %}"
    "{{ messages[0]['content'] + '\n' }}{% endif %}{{ 'detailed thinking off<|role_end|>' }}"
    "{% for message in messages %}{% if message['role'] == 'user' %}"
    "{{ '<role>HUMAN</role>' + message['content'] + '<|role_end|>' }}"
    "{% elif message['role'] == 'assistant' %}"
    "{{ '<role>ASSISTANT</role>' + message['content'] + '<|role_end|>' }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<role>ASSISTANT</role>' }}{% endif %}"
)


def llada2_config(
    *,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
    intermediate_size: int,
    moe_intermediate_size: int,
    num_experts: int,
    n_group: int,
    topk_group: int,
    num_experts_per_tok: int,
) -> dict:
    """The key set of LLaDA2.0-mini's config.json (as dFactory ships it, `model_type` as on the hub), real
    values except the sizes (real: hidden 2048, 20 layers, 16 heads, 4 KV heads, head_dim 128,
    intermediate 5120, experts 256 of 512 in 8 groups, 4 groups and 8 experts a token)."""
    return {
        "architectures": ["LLaDA2MoeModelLM"],
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration_llada2_moe.LLaDA2MoeConfig",
            "AutoModel": "modeling_llada2_moe.LLaDA2MoeModel",
            "AutoModelForCausalLM": "modeling_llada2_moe.LLaDA2MoeModelLM",
        },
        "embedding_dropout": 0.0,
        "first_k_dense_replace": 1,
        "head_dim": head_dim,
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size,
        "max_position_embeddings": 16384,
        "max_window_layers": 28,
        "model_type": "llada2_moe",
        "moe_intermediate_size": moe_intermediate_size,
        "moe_router_enable_expert_bias": True,
        "n_group": n_group,
        "norm_head": False,
        "norm_softmax": False,
        "norm_topk_prob": True,
        "num_attention_heads": num_heads,
        "num_experts": num_experts,
        "num_experts_per_tok": num_experts_per_tok,
        "num_hidden_layers": num_layers,
        "num_key_value_heads": num_kv_heads,
        "num_shared_experts": 1,
        "output_dropout": 0.0,
        "output_router_logits": False,
        "pad_token_id": 156892,
        "partial_rotary_factor": 0.5,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 600000,
        "rotary_dim": head_dim // 2,
        "routed_scaling_factor": 2.5,
        "router_dtype": "fp32",
        "score_function": "sigmoid",
        "tie_word_embeddings": False,
        "topk_group": topk_group,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.52.3",
        "use_bias": False,
        "use_cache": False,
        "use_qkv_bias": False,
        "use_rmsnorm": True,
        "use_sliding_window": False,
        "vocab_size": 157184,
    }


def write_llada2_checkpoint(
    path,
    *,
    seed: int = 0,
    hidden_size: int = 32,
    num_layers: int = 3,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int = 8,
    intermediate_size: int = 64,
    moe_intermediate_size: int = 16,
    num_experts: int = 8,
    n_group: int = 4,
    topk_group: int = 2,
    num_experts_per_tok: int = 2,
    sharded: bool = False,
    std: float = 0.5,
) -> dict:
    """A tiny random LLaDA2.0-mini-layout checkpoint (bfloat16; the expert biases float32, unequal, so they
    change which experts are chosen); returns its config dict. Layer 0 is dense, the others mixtures of
    experts with one shared expert. Tensors: ``model.word_embeddings.weight``; per layer
    ``input_layernorm.weight``, ``attention.query_key_value.weight`` (Q | K | V rows),
    ``attention.{query,key}_layernorm.weight`` [head_dim], ``attention.dense.weight``,
    ``post_attention_layernorm.weight``, then ``mlp.{gate,up,down}_proj.weight`` (dense) or
    ``mlp.gate.weight``, ``mlp.gate.expert_bias``, ``mlp.experts.{e}.{gate,up,down}_proj.weight`` and
    ``mlp.shared_experts.{gate,up,down}_proj.weight``; ``model.norm.weight``, ``lm_head.weight``."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cfg = llada2_config(
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate_size,
        moe_intermediate_size=moe_intermediate_size,
        num_experts=num_experts,
        n_group=n_group,
        topk_group=topk_group,
        num_experts_per_tok=num_experts_per_tok,
    )
    gen = torch.Generator().manual_seed(seed)
    d, vocab, qkv = hidden_size, cfg["vocab_size"], (num_heads + 2 * num_kv_heads) * head_dim

    def mlp(prefix: str, width: int) -> None:
        t[prefix + "gate_proj.weight"] = _normal(gen, (width, d), std)
        t[prefix + "up_proj.weight"] = _normal(gen, (width, d), std)
        t[prefix + "down_proj.weight"] = _normal(gen, (d, width), std)

    t: dict[str, torch.Tensor] = {"model.word_embeddings.weight": _normal(gen, (vocab, d), 1.0)}
    for i in range(num_layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = _norm_weight(gen, d)
        t[p + "attention.query_key_value.weight"] = _normal(gen, (qkv, d), std)
        t[p + "attention.query_layernorm.weight"] = _norm_weight(gen, head_dim)
        t[p + "attention.key_layernorm.weight"] = _norm_weight(gen, head_dim)
        t[p + "attention.dense.weight"] = _normal(gen, (d, num_heads * head_dim), std)
        t[p + "post_attention_layernorm.weight"] = _norm_weight(gen, d)
        if i < cfg["first_k_dense_replace"]:
            mlp(p + "mlp.", intermediate_size)
            continue
        t[p + "mlp.gate.weight"] = _normal(gen, (num_experts, d), std)
        for e in range(num_experts):
            mlp(p + f"mlp.experts.{e}.", moe_intermediate_size)
        mlp(p + "mlp.shared_experts.", moe_intermediate_size)
    t["model.norm.weight"] = _norm_weight(gen, d)
    active = _active_ids({c: i for c, (i, _) in LLADA2_SPECIAL_TOKENS.items()}, {"<|mask|>"})
    t["lm_head.weight"] = _lm_head(gen, vocab, d, active, 1.0)
    t = {k: v.to(torch.bfloat16) for k, v in t.items()}
    for i in range(cfg["first_k_dense_replace"], num_layers):
        t[f"model.layers.{i}.mlp.gate.expert_bias"] = _normal(gen, (num_experts,), 0.5)
    _save_tensors(path, t, sharded)
    _write_json(path / "config.json", cfg)
    _build_tokenizer(LLADA2_SPECIAL_TOKENS).save(str(path / "tokenizer.json"))
    _write_json(
        path / "tokenizer_config.json",
        {
            "add_bos_token": False,
            "add_eos_token": False,
            "added_tokens_decoder": _added_tokens_decoder(LLADA2_SPECIAL_TOKENS),
            "bos_token": "<|startoftext|>",
            "chat_template": LLADA2_CHAT_TEMPLATE,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|endoftext|>",
            "mask_token": "<|mask|>",
            "model_max_length": 16384,
            "pad_token": "<|endoftext|>",
            "tokenizer_class": "PreTrainedTokenizerFast",
        },
    )
    return cfg


def _llada2_attention(xn, sd, prefix: str, cfg: dict, block: int) -> torch.Tensor:
    """The fused projection split Q | K | V, q/k normed per head, the first `rotary_dim` dims of each head
    rotated (rotate half within them), softmax scaled by the whole head_dim; block-causal."""
    heads, kv_heads, hd, eps = (
        cfg["num_attention_heads"],
        cfg["num_key_value_heads"],
        cfg["head_dim"],
        cfg["rms_norm_eps"],
    )
    rd, n = int(hd * cfg["partial_rotary_factor"]), xn.shape[0]
    fused = xn @ sd[prefix + "query_key_value.weight"].T
    q, k, v = fused.split([heads * hd, kv_heads * hd, kv_heads * hd], dim=-1)
    cos, sin = _rotary_cos_sin(n, rd, float(cfg["rope_theta"]))

    def rotate(x):
        r, rest = x[:, :rd], x[:, rd:]
        return torch.cat([r * cos + torch.cat([-r[:, rd // 2 :], r[:, : rd // 2]], -1) * sin, rest], -1)

    pos = torch.arange(n)
    allowed = (pos[None, :] // block) <= (pos[:, None] // block)
    outputs = []
    for h in range(heads):
        g = h // (heads // kv_heads)
        qh = rotate(_rms_norm(q[:, h * hd : (h + 1) * hd], sd[prefix + "query_layernorm.weight"], eps))
        kh = rotate(_rms_norm(k[:, g * hd : (g + 1) * hd], sd[prefix + "key_layernorm.weight"], eps))
        scores = ((qh @ kh.T) / math.sqrt(hd)).masked_fill(~allowed, float("-inf"))
        outputs.append(_softmax(scores) @ v[:, g * hd : (g + 1) * hd])
    return torch.cat(outputs, -1) @ sd[prefix + "dense.weight"].T


def _swiglu(x, sd, prefix: str) -> torch.Tensor:
    return (_silu(x @ sd[prefix + "gate_proj.weight"].T) * (x @ sd[prefix + "up_proj.weight"].T)) @ sd[
        prefix + "down_proj.weight"
    ].T


def _llada2_moe(x, sd, prefix: str, cfg: dict) -> torch.Tensor:
    """Token by token: sigmoid scores; the expert bias added to choose only; groups scored by their two
    best, the best `topk_group` kept; the top experts among them weighted by their unbiased scores,
    normalized (+1e-20) and scaled by `routed_scaling_factor`; the shared expert added unweighted."""
    experts, groups = cfg["num_experts"], cfg["n_group"]
    size = experts // groups
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        scores = 1.0 / (1.0 + torch.exp(-(sd[prefix + "gate.weight"] @ x[t])))
        biased = scores + sd[prefix + "gate.expert_bias"]
        group_scores = [sorted(biased[g * size : (g + 1) * size].tolist())[-2:] for g in range(groups)]
        kept = sorted(range(groups), key=lambda g: (-sum(group_scores[g]), g))[: cfg["topk_group"]]
        candidates = [e for e in range(experts) if e // size in kept]
        chosen = sorted(candidates, key=lambda e: (-float(biased[e]), e))[: cfg["num_experts_per_tok"]]
        weights = scores[chosen] / (scores[chosen].sum() + 1e-20) * cfg["routed_scaling_factor"]
        for w, e in zip(weights, chosen, strict=True):
            out[t] += w * _swiglu(x[t : t + 1], sd, f"{prefix}experts.{e}.")[0]
    return out + _swiglu(x, sd, prefix + "shared_experts.")


@torch.no_grad()
def llada2_logits(path, ids: list[int], tail: int | None = None) -> torch.Tensor:
    """Raw logits [len(ids), vocab] in float64 of a LLaDA2-layout checkpoint, unshifted, blocks of 32
    counted from position 0; `tail` as in `block_logits`."""
    cfg, sd = _load_f64(path)
    eps = cfg["rms_norm_eps"]
    x = sd["model.word_embeddings.weight"][torch.tensor(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        x = x + _llada2_attention(
            _rms_norm(x, sd[p + "input_layernorm.weight"], eps), sd, p + "attention.", cfg, 32
        )
        m = _rms_norm(x, sd[p + "post_attention_layernorm.weight"], eps)
        dense = i < cfg["first_k_dense_replace"]
        x = x + (_swiglu(m, sd, p + "mlp.") if dense else _llada2_moe(m, sd, p + "mlp.", cfg))
    x = _rms_norm(x, sd["model.norm.weight"], eps)
    out = torch.zeros(len(ids), sd["lm_head.weight"].shape[0], dtype=torch.float64)
    start = 0 if tail is None else max(0, len(ids) - tail)
    out[start:] = x[start:] @ sd["lm_head.weight"].T
    return out


# --------------------------------------------------------------------------------------------------------
# Float64 forward pass under the block-causal mask
# --------------------------------------------------------------------------------------------------------


def _attention(xn, sd, prefix: str, cfg: dict, block: int) -> torch.Tensor:
    """Qwen2 / Qwen3 attention over one sequence, one head at a time: q/k/v biases where the checkpoint
    has them (Qwen2), q/k normed per head where it has `q_norm` (Qwen3), then rotated (rotate half);
    query i sees key j iff j // block <= i // block."""
    heads, kv_heads, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    n, hd = xn.shape[0], cfg.get("head_dim") or cfg["hidden_size"] // heads
    q, k, v = (xn @ sd[f"{prefix}{x}_proj.weight"].T + sd.get(f"{prefix}{x}_proj.bias", 0.0) for x in "qkv")
    normed = prefix + "q_norm.weight" in sd
    same = lambda x, _w, _eps: x  # noqa: E731
    cos, sin = _rotary_cos_sin(n, hd, float(cfg["rope_theta"]))
    pos = torch.arange(n)
    allowed = (pos[None, :] // block) <= (pos[:, None] // block)
    outputs = []
    for h in range(heads):
        g = h // (heads // kv_heads)
        norm = _rms_norm if normed else same
        qh = norm(q[:, h * hd : (h + 1) * hd], sd.get(prefix + "q_norm.weight"), eps)
        kh = norm(k[:, g * hd : (g + 1) * hd], sd.get(prefix + "k_norm.weight"), eps)
        qh, kh = (x * cos + torch.cat([-x[:, hd // 2 :], x[:, : hd // 2]], -1) * sin for x in (qh, kh))
        scores = (qh @ kh.T) / math.sqrt(hd)
        scores = scores.masked_fill(~allowed, float("-inf"))
        outputs.append(_softmax(scores) @ v[:, g * hd : (g + 1) * hd])
    return torch.cat(outputs, -1) @ sd[prefix + "o_proj.weight"].T


@torch.no_grad()
def block_logits(path, ids: list[int], block: int | None = None, tail: int | None = None) -> torch.Tensor:
    """Raw logits [len(ids), vocab] in float64 of an SDAR or Fast-dLLM v2 checkpoint, unshifted (row i is
    the output at position i), under the block-causal mask with blocks of `block` (the config's
    `block_size` or `bd_size`) counted from position 0. `tail`: only the last `tail` rows are computed
    (the LM head is most of the cost), the others are zeros."""
    cfg, sd = _load_f64(path)
    block, eps = block or cfg.get("block_size") or cfg["bd_size"], cfg["rms_norm_eps"]
    x = sd["model.embed_tokens.weight"][torch.tensor(ids)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = _rms_norm(x, sd[p + "input_layernorm.weight"], eps)
        x = x + _attention(a, sd, p + "self_attn.", cfg, block)
        m = _rms_norm(x, sd[p + "post_attention_layernorm.weight"], eps)
        mlp = _silu(m @ sd[p + "mlp.gate_proj.weight"].T) * (m @ sd[p + "mlp.up_proj.weight"].T)
        x = x + mlp @ sd[p + "mlp.down_proj.weight"].T
    x = _rms_norm(x, sd["model.norm.weight"], eps)
    head = sd["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else sd["lm_head.weight"]
    out = torch.zeros(len(ids), head.shape[0], dtype=torch.float64)
    start = 0 if tail is None else max(0, len(ids) - tail)
    out[start:] = x[start:] @ head.T
    return out


# --------------------------------------------------------------------------------------------------------
# SDAR's and LLaDA2's decoding
# --------------------------------------------------------------------------------------------------------


def transfer_schedule(block: int, steps: int) -> list[int]:
    """Tokens per step for a block: block // steps each, the first block % steps one more."""
    return [block // steps + (1 if s < block % steps else 0) for s in range(steps)]


@torch.no_grad()
def low_confidence_generate(
    logits_fn,
    prompt: list[int],
    *,
    gen_length: int,
    block_length: int = 4,
    steps: int = 4,
    threshold: float | None = 0.9,
    mask_id: int = SDAR_MASK,
    stop_ids: tuple[int, ...] = SDAR_STOPS,
) -> list[int]:
    """SDAR's block diffusion at temperature 0 (LLaDA2's `generate` is the same rule, with blocks of 32,
    32 steps and a threshold of 0.95); returns the answer up to (not including) its first stop token, or
    all of it when `stop_ids` is empty.

    The canvas is the prompt followed by masks up to the block boundary at or after prompt + gen_length,
    blocks counted from position 0; decoding starts at the block holding the prompt's end, so the
    prompt's tail sits inside the first block (never a candidate). Per block, up to `steps` passes:
    `logits_fn(canvas up to the block's end)`; at each masked position the argmax token and its
    whole-vocabulary probability; with a threshold (`low_confidence_dynamic`) every masked position whose
    probability is above it is committed, at least the schedule's count for the step
    (`transfer_schedule`); without one (`low_confidence_static`) exactly that count. Most confident first,
    the lower position on equal confidence. Decoding stops after a block once a stop token is in the answer.
    """
    p_len, b = len(prompt), block_length
    end = math.ceil((p_len + gen_length) / b) * b
    canvas = list(prompt) + [mask_id] * (end - p_len)
    schedule = transfer_schedule(b, steps)
    for first in range(p_len // b * b, end, b):
        for step in range(steps):
            masked = [j for j in range(first, first + b) if canvas[j] == mask_id]
            if not masked:
                break
            probs = _softmax(logits_fn(canvas[: first + b]).double())
            best = {j: int(torch.argmax(probs[j])) for j in masked}
            assert mask_id not in best.values(), "the fixture's model predicted the mask token"
            ranked = sorted(masked, key=lambda j: (-float(probs[j, best[j]]), j))
            count = min(schedule[step], len(masked))
            if threshold is not None:
                count = max(count, sum(float(probs[j, best[j]]) > threshold for j in masked))
            for j in ranked[:count]:
                canvas[j] = best[j]
        answer = canvas[p_len : first + b]
        if any(t in stop_ids for t in answer):
            break
    answer = canvas[p_len:end]
    cut = next((i for i, t in enumerate(answer) if t in stop_ids), None)
    return answer if cut is None else answer[:cut]


# --------------------------------------------------------------------------------------------------------
# Fast-dLLM v2 decoding
# --------------------------------------------------------------------------------------------------------


@torch.no_grad()
def fast_dllm_v2_reference_generate(
    logits_fn,
    prompt: list[int],
    *,
    gen_length: int,
    block_length: int = 32,
    sub_block_length: int = 8,
    threshold: float = 0.9,
    mask_id: int = FAST_DLLM_V2_MASK,
    stop_ids: tuple[int, ...] = (FAST_DLLM_V2_STOP,),
) -> list[int]:
    """Fast-dLLM v2's `generate` at temperature 0; returns the answer up to (not including) its first stop
    token, or all of it when `stop_ids` is empty.

    Blocks are counted from position 0 and the canvas ends at the block boundary at or after prompt +
    gen_length. A block that starts empty (the prompt ends on a boundary, or the previous block is done)
    opens with the greedy next token of the clean sequence before it (the output at its last position).
    Masks then fill the block, which is denoised a sub-block at a time, left to right: each pass reads
    `logits_fn(canvas up to the block's end)`, predicts position j from output j - 1, and commits every
    masked position of the sub-block whose whole-vocabulary probability is above the threshold, and the
    most confident one in any case (the lower position on equal confidence). Decoding ends once a stop
    token is in the answer with nothing masked before it.

    Where ours differs from upstream, on purpose: a prompt of exactly one block is run (upstream skips
    the prefill when the prompt is not longer than a block, and never shows the model that prompt), and
    the budget is `gen_length` tokens to the block boundary (upstream counts whole blocks and adds one
    greedy token after the last).
    """
    p_len, b = len(prompt), block_length
    end = math.ceil((p_len + gen_length) / b) * b
    canvas = list(prompt)

    def stopped() -> bool:
        answer = canvas[p_len:]
        cut = next((i for i, t in enumerate(answer) if t in stop_ids), None)
        return cut is not None and mask_id not in answer[:cut]

    for first in range(p_len // b * b, end, b):
        if len(canvas) == first:
            canvas.append(int(torch.argmax(logits_fn(canvas)[-1])))
        canvas += [mask_id] * (first + b - len(canvas))
        for sub in range(first, first + b, sub_block_length):
            window = range(sub, min(sub + sub_block_length, first + b))
            while any(canvas[j] == mask_id for j in window) and not stopped():
                logits = logits_fn(canvas[: first + b]).double()
                masked = [j for j in window if canvas[j] == mask_id]
                probs = {j: _softmax(logits[j - 1]) for j in masked}
                best = {j: int(torch.argmax(probs[j])) for j in masked}
                assert mask_id not in best.values(), "the fixture's model predicted the mask token"
                confidence = {j: float(probs[j][best[j]]) for j in masked}
                top = min(masked, key=lambda j: (-confidence[j], j))
                for j in masked:
                    if confidence[j] > threshold or j == top:
                        canvas[j] = best[j]
        if stopped():
            break
    answer = canvas[p_len:end]
    cut = next((i for i, t in enumerate(answer) if t in stop_ids), None)
    return answer if cut is None else answer[:cut]
