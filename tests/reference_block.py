"""Independent reference code for the block-diffusion families whose blocks start at position 0 of the
sequence: SDAR (and, as they land, Fast-dLLM v2 and LLaDA2).

Like ``tests/reference.py`` (whose fixture helpers it shares) it imports nothing from ``llm/``. It was
written from the papers, the model cards and the configuration files, and read against the upstream
code, never copied from it:

* SDAR: JetAstra/SDAR ``generate.py`` (``block_diffusion_generate``, ``low_confidence_dynamic`` and
  ``low_confidence_static``) and ``training/model/SDAR-4B-Chat/`` (config.json, modeling_sdar.py,
  tokenizer_config.json, model.safetensors.index.json) at commit c2041a8; the 1.7B files as mirrored in
  hxhcreate/DARE ``models/SDAR-1dot7B-Chat/``.

It provides ``write_sdar_checkpoint`` (a tiny random checkpoint in the released layout: config keys,
Qwen3 tensor names with per-head ``q_norm`` / ``k_norm``, untied LM head, the Qwen special tokens and
SDAR's mask at their released ids), ``block_logits`` (a float64 forward pass, one head at a time, under
the block-causal mask with blocks counted from position 0) and ``sdar_reference_generate``.

Temperature 0, as the authors' greedy evaluations define it: the token is the argmax over the whole
vocabulary and its confidence is its probability in a softmax over the whole vocabulary, the mask token
included. (``generate.py`` itself has no greedy path: it divides by the temperature.)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from tests.reference import (
    _active_ids,
    _added_tokens_decoder,
    _build_tokenizer,
    _lm_head,
    _norm_weight,
    _normal,
    _rms_norm,
    _rotary_cos_sin,
    _save_tensors,
    _silu,
    _softmax,
    _write_json,
    load_state_dict,
)

# Qwen3's added tokens at their ids (tokenizer_config.json "added_tokens_decoder"), SDAR's mask last.
# value: (id, special)
SDAR_SPECIAL_TOKENS: dict[str, tuple[int, bool]] = {
    "<|endoftext|>": (151643, True),  # eos_token, pad_token; config.json bos/eos
    "<|im_start|>": (151644, True),
    "<|im_end|>": (151645, True),  # ends an assistant turn (generation_config eos)
    "<|object_ref_start|>": (151646, True),
    "<|object_ref_end|>": (151647, True),
    "<|box_start|>": (151648, True),
    "<|box_end|>": (151649, True),
    "<|quad_start|>": (151650, True),
    "<|quad_end|>": (151651, True),
    "<|vision_start|>": (151652, True),
    "<|vision_end|>": (151653, True),
    "<|vision_pad|>": (151654, True),
    "<|image_pad|>": (151655, True),
    "<|video_pad|>": (151656, True),
    "<tool_call>": (151657, False),
    "</tool_call>": (151658, False),
    "<|fim_prefix|>": (151659, False),
    "<|fim_middle|>": (151660, False),
    "<|fim_suffix|>": (151661, False),
    "<|fim_pad|>": (151662, False),
    "<|repo_name|>": (151663, False),
    "<|file_sep|>": (151664, False),
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


def sdar_config(*, hidden_size: int, num_layers: int, num_heads: int, num_kv_heads: int, head_dim: int,
                intermediate_size: int) -> dict:  # fmt: skip
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
    cfg = sdar_config(hidden_size=hidden_size, num_layers=num_layers, num_heads=num_heads, head_dim=head_dim,
                      num_kv_heads=num_kv_heads, intermediate_size=intermediate_size)  # fmt: skip
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
    _write_json(path / "tokenizer_config.json", {
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
    })  # fmt: skip
    _write_json(path / "generation_config.json", {
        "bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
        "temperature": 0.6, "top_k": 20, "top_p": 0.95, "transformers_version": "4.52.4",
    })  # fmt: skip
    return cfg


# --------------------------------------------------------------------------------------------------------
# Float64 forward pass under the block-causal mask
# --------------------------------------------------------------------------------------------------------


def _attention(xn, sd, prefix: str, cfg: dict, block: int) -> torch.Tensor:
    """Qwen3 attention over one sequence, one head at a time: q/k normed per head, then rotated (rotate
    half); query i sees key j iff j // block <= i // block."""
    n, hd = xn.shape[0], cfg["head_dim"]
    heads, kv_heads, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["rms_norm_eps"]
    q = xn @ sd[prefix + "q_proj.weight"].T
    k = xn @ sd[prefix + "k_proj.weight"].T
    v = xn @ sd[prefix + "v_proj.weight"].T
    cos, sin = _rotary_cos_sin(n, hd, float(cfg["rope_theta"]))
    pos = torch.arange(n)
    allowed = (pos[None, :] // block) <= (pos[:, None] // block)
    outputs = []
    for h in range(heads):
        g = h // (heads // kv_heads)
        qh = _rms_norm(q[:, h * hd : (h + 1) * hd], sd[prefix + "q_norm.weight"], eps)
        kh = _rms_norm(k[:, g * hd : (g + 1) * hd], sd[prefix + "k_norm.weight"], eps)
        qh, kh = (x * cos + torch.cat([-x[:, hd // 2 :], x[:, : hd // 2]], -1) * sin for x in (qh, kh))
        scores = (qh @ kh.T) / math.sqrt(hd)
        scores = scores.masked_fill(~allowed, float("-inf"))
        outputs.append(_softmax(scores) @ v[:, g * hd : (g + 1) * hd])
    return torch.cat(outputs, -1) @ sd[prefix + "o_proj.weight"].T


_LOADED: dict[str, tuple[dict, dict]] = {}


@torch.no_grad()
def block_logits(path, ids: list[int], block: int | None = None) -> torch.Tensor:
    """Raw logits [len(ids), vocab] in float64 of an SDAR-layout checkpoint, unshifted (row i is the
    output at position i), under the block-causal mask with blocks of `block` (the config's
    `block_size`) counted from position 0."""
    key = str(Path(path).resolve())
    if key not in _LOADED:
        cfg = json.loads((Path(path) / "config.json").read_text())
        _LOADED.clear()
        _LOADED[key] = (cfg, {k: v.double() for k, v in load_state_dict(path).items()})
    cfg, sd = _LOADED[key]
    block, eps = block or cfg.get("block_size", 4), cfg["rms_norm_eps"]
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
    return x @ head.T


# --------------------------------------------------------------------------------------------------------
# SDAR decoding
# --------------------------------------------------------------------------------------------------------


def transfer_schedule(block: int, steps: int) -> list[int]:
    """Tokens per step for a block: block // steps each, the first block % steps one more."""
    return [block // steps + (1 if s < block % steps else 0) for s in range(steps)]


@torch.no_grad()
def sdar_reference_generate(
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
    """SDAR's block diffusion at temperature 0; returns the answer up to (not including) its first stop
    token, or all of it when `stop_ids` is empty.

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
