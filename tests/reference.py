"""Independent reference code for checking the diffusion engine in ``llm/``.

This module deliberately imports nothing from ``llm/``. It is a second, plain implementation written from
the published descriptions of the two checkpoint families we load:

* GSAI-ML/LLaDA-8B-Instruct (``model_type`` ``"llada"``, OLMo-style names, ``LLaDALlamaBlock``), and
* Dream-org/Dream-v0-Instruct-7B (``model_type`` ``"Dream"``, Qwen2 names and layout).

It provides

* ``write_llada_checkpoint`` / ``write_dream_checkpoint``: tiny random-weight checkpoints in the exact
  on-disk layout of the real ones (config.json key set, tensor names, optional HF sharding with
  ``model.safetensors.index.json``, tokenizer.json with the special tokens at their real ids,
  tokenizer_config.json with the real chat template);
* ``plain_logits``: a float64, loop-over-layers-and-heads forward pass with FULL bidirectional attention
  that returns the raw per-position logits;
* ``llada_reference_generate``: LLaDA's semi-autoregressive low-confidence remasking decoder
  (``generate.py`` ``generate(..., remasking="low_confidence", cfg_scale=0)``);
* ``dream_shift``: Dream's shift of logits by one position;
* ``dream_reference_generate``: Dream's own decoding (``generation_utils.py`` ``diffusion_generate`` at
  temperature 0: its timestep schedule, confidence by entropy, margin or probability), read in the copy of
  Dream-v0-Instruct-7B's file vendored in ``monash-yann/dllm-research`` ``models/Dream-7B-Instruct/``.

Facts used (checked against public copies of the released files):

* LLaDA config.json key set/values, tokenizer_config.json (added tokens, chat template, bos/eos/pad) and
  model.safetensors.index.json: copies of the LLaDA-8B-Instruct repo files in GitHub
  ``yinj66/support_basis`` (``LLaDA-8B-Instruct-B&S-light/``); modeling: ``modeling_llada.py`` from the same
  place and ``monash-yann/dllm-research`` ``models/LLaDA-8B-Instruct/modeling_llada.py``.
* LLaDA decoding: ``ML-GSAI/LLaDA`` ``generate.py``.
* Dream config key set: the Dream-architecture config.json shipped by ``apple/DiffuCoder-7B-Instruct``
  (same ``DreamConfig``), with Dream-v0-Instruct-7B's sizes; ``generation_config.json`` of
  Dream-v0-Instruct-7B (bos/eos/pad 151643, transformers 4.46.2).

Run ``python tests/reference.py`` for a self-check.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

__all__ = [
    "LLADA_SPECIAL_TOKENS",
    "DREAM_SPECIAL_TOKENS",
    "LLADA_CHAT_TEMPLATE",
    "DREAM_CHAT_TEMPLATE",
    "COMMON_WORDS",
    "write_llada_checkpoint",
    "write_dream_checkpoint",
    "load_state_dict",
    "plain_logits",
    "dream_shift",
    "llada_num_transfer_tokens",
    "llada_reference_generate",
    "dream_timesteps",
    "dream_transfer_count",
    "dream_reference_generate",
]

# --------------------------------------------------------------------------------------------------------
# Real special tokens and chat templates
# --------------------------------------------------------------------------------------------------------

# LLaDA-8B-Instruct tokenizer_config.json "added_tokens_decoder" (a subset: the 252 "<|reserved_token_N|>"
# entries 126084..126335 and 126337..126339 are left out). All have special=true in the real file.
LLADA_SPECIAL_TOKENS: dict[str, int] = {
    "<|startoftext|>": 126080,  # bos_token
    "<|endoftext|>": 126081,  # eos_token and pad_token
    "[CLS]": 126082,
    "[gMASK]": 126083,
    "<|mdm_mask|>": 126336,  # config.json mask_token_id
    "<role>": 126340,
    "</role>": 126341,
    "<|arithmetic_start|>": 126342,
    "<|arithmetic_end|>": 126343,
    "<|number_start|>": 126344,
    "<|number_end|>": 126345,
    "<|start_header_id|>": 126346,
    "<|end_header_id|>": 126347,
    "<|eot_id|>": 126348,
}

# Verbatim from LLaDA-8B-Instruct tokenizer_config.json. Note: no "add_generation_prompt" test (the
# assistant header is always appended), bos only before the first message, and contents are trimmed.
LLADA_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
)

# Qwen2.5 added tokens (151643..151664) plus Dream's two (151665 bos "<|beginoftext|>", 151666 mask).
# value: (id, special)
DREAM_SPECIAL_TOKENS: dict[str, tuple[int, bool]] = {
    "<|endoftext|>": (151643, True),  # eos_token, pad_token (and bos_token_id in config.json)
    "<|im_start|>": (151644, True),
    "<|im_end|>": (151645, True),
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
    "<|beginoftext|>": (151665, True),  # Dream's bos_token
    "<|mask|>": (151666, True),  # Dream's mask_token (config.json mask_token_id)
}

# Dream-v0-Instruct-7B uses the Qwen2 ChatML template with the default system prompt.
DREAM_CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# ~300 common English words (plus chat roles); each also gets a Capitalized variant in the vocabulary.
_COMMON_WORDS_TEXT = """
the be to of and a in that have i it for not on with he as you do at this but his by from they we say
her she or an will my one all would there their what so up out if about who get which go me when make
can like time no just him know take people into year your good some could them see other than then now
look only come its over think also back after use two how our work first well way even new want because
any these give day most us is are was were am been has had did does done said made went gone got
order orders status shipped delivered arrive arrives arriving tomorrow today yesterday week month
package parcel box item items stock available price cost pay paid refund return store shop online
help helpful assistant user system hello hi thanks thank please sorry yes okay sure right left here
where why number phone call name address email account check look find found tell ask answer question
monday tuesday wednesday thursday friday saturday sunday morning evening night hour minute second
red blue green black white small large big little long short old young great same different next last
early late high low open close closed buy sell send sent ship track tracking carrier delivery
still again never always often very much many more less few each every both through during before
under between while same another such own keep let put set seem feel try leave call need mean become
show hear play run move live believe hold bring happen write provide sit stand lose meet include
continue learn change lead understand watch follow stop create speak read allow add spend grow offer
remember love consider appear wait serve die expect build stay fall cut reach kill remain suggest
raise pass report decide pull cost
"""
COMMON_WORDS = list(dict.fromkeys(_COMMON_WORDS_TEXT.split()))


# --------------------------------------------------------------------------------------------------------
# Tokenizer fixtures
# --------------------------------------------------------------------------------------------------------

_PUNCT = list(".,!?;:'\"()-/&%$#@*+=<>[]_")
_SPACES = [" ", "\n", "\t"]
_DIGITS = [str(d) for d in range(10)]


def _base_vocab() -> dict[str, int]:
    """Low-id regular vocabulary: <unk> at 0, whitespace, digits, punctuation, words (+Capitalized)."""
    vocab: dict[str, int] = {}
    for tok in ["<unk>", *_SPACES, *_DIGITS, *_PUNCT]:
        vocab.setdefault(tok, len(vocab))
    seen = []
    for w in COMMON_WORDS:
        if w not in seen:
            seen.append(w)
    for w in seen:
        vocab.setdefault(w, len(vocab))
    for w in seen:
        vocab.setdefault(w.capitalize(), len(vocab))
    return vocab


def _build_tokenizer(special: dict[str, tuple[int, bool]]):
    """A WordLevel tokenizer whose pre-tokenizer isolates every word, digit, punctuation mark and single
    whitespace character, and whose decoder (Fuse) concatenates pieces back without separators, so
    decode(encode(text)) == text for text made of known pieces. Special tokens live in the model vocab at
    their real (non-contiguous) ids and are also registered as added tokens so they are matched in raw
    text before pre-tokenization."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = _base_vocab()
    for content, (tid, _) in special.items():
        assert tid not in vocab.values()
        vocab[content] = tid
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[A-Za-z]+|[0-9]|\s|[^A-Za-z0-9\s]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    specials = [AddedToken(c, special=True, normalized=False) for c, (_, s) in special.items() if s]
    plain = [AddedToken(c, special=False, normalized=False) for c, (_, s) in special.items() if not s]
    tok.add_special_tokens(specials)
    if plain:
        tok.add_tokens(plain)
    for content, (tid, _) in special.items():
        got = tok.token_to_id(content)
        assert got == tid, (content, got, tid)
    return tok


def _added_tokens_decoder(special: dict[str, tuple[int, bool]]) -> dict[str, dict]:
    return {
        str(tid): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": is_special,
        }
        for content, (tid, is_special) in sorted(special.items(), key=lambda kv: kv[1][0])
    }


# --------------------------------------------------------------------------------------------------------
# Weight writing
# --------------------------------------------------------------------------------------------------------


def _normal(gen: torch.Generator, shape, std: float) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * std


def _norm_weight(gen: torch.Generator, n: int) -> torch.Tensor:
    return 1.0 + 0.1 * torch.randn(n, generator=gen, dtype=torch.float32)


def _lm_head(
    gen: torch.Generator,
    vocab_rows: int,
    d: int,
    active_ids: list[int],
    std: float,
    inactive_std: float = 0.02,
) -> torch.Tensor:
    """LM head [vocab_rows, d]: rows of ``active_ids`` (the tokenizer's words and the non-mask special
    tokens) drawn with ``std``, every other row with a tiny ``inactive_std``. Argmax therefore always lands
    on a token the fixture tokenizer can decode, and never on the mask token (a real model never predicts
    the mask; committing it would break LLaDA's per-block commit schedule)."""
    w = _normal(gen, (vocab_rows, d), inactive_std)
    idx = torch.tensor(sorted(set(active_ids)), dtype=torch.long)
    w[idx] = _normal(gen, (len(idx), d), std)
    return w


def _active_ids(special: dict[str, int], exclude: set[str]) -> list[int]:
    ids = [i for t, i in _base_vocab().items() if t != "<unk>"]
    return ids + [i for t, i in special.items() if t not in exclude]


def _save_tensors(path: Path, tensors: dict[str, torch.Tensor], sharded: bool) -> None:
    """Write tensors as HF does: one ``model.safetensors`` or ``model-0000k-of-0000n.safetensors`` shards
    plus ``model.safetensors.index.json`` ({"metadata": {"total_size": bytes}, "weight_map": {...}})."""
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    if not sharded:
        save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
        return
    names = list(tensors)
    n_shards = 2
    # Split by cumulative size so both shards hold something; the big embedding goes in shard 1 and the
    # LM head in shard 2, the way the real LLaDA index also scatters them.
    sizes = [tensors[n].numel() * tensors[n].element_size() for n in names]
    total = sum(sizes)
    shards: list[dict[str, torch.Tensor]] = [{} for _ in range(n_shards)]
    acc = 0
    for name, size in zip(names, sizes, strict=True):
        k = 0 if acc < total / 2 else 1
        shards[k][name] = tensors[name]
        acc += size
    if not shards[1]:  # degenerate: move the last tensor over
        last = names[-1]
        shards[1][last] = shards[0].pop(last)
    weight_map = {}
    for k, shard in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{n_shards:05d}.safetensors"
        save_file(shard, str(path / fname), metadata={"format": "pt"})
        for name in shard:
            weight_map[name] = fname
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def _write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------------------------------------
# LLaDA checkpoint
# --------------------------------------------------------------------------------------------------------


def llada_config(*, d_model: int, n_layers: int, n_heads: int, mlp_hidden_size: int) -> dict:
    """The exact key set of GSAI-ML/LLaDA-8B-Instruct config.json (real values except the sizes; the real
    sizes are d_model 4096, n_layers 32, n_heads = n_kv_heads 32, mlp_hidden_size 12288)."""
    return {
        "activation_type": "silu",
        "alibi": False,
        "alibi_bias_max": 8.0,
        "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0,
        "attention_layer_norm": False,
        "attention_layer_norm_with_affine": True,
        "auto_map": {
            "AutoConfig": "configuration_llada.LLaDAConfig",
            "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
            "AutoModel": "modeling_llada.LLaDAModelLM",
        },
        "bias_for_layer_norm": False,
        "block_group_size": 1,
        "block_type": "llama",
        "d_model": d_model,
        "embedding_dropout": 0.0,
        "embedding_size": 126464,
        "eos_token_id": 126081,
        "flash_attention": False,
        "include_bias": False,
        "include_qkv_bias": False,
        "init_cutoff_factor": None,
        "init_device": "meta",
        "init_fn": "mitchell",
        "init_std": 0.02,
        "input_emb_norm": False,
        "layer_norm_type": "rms",
        "layer_norm_with_affine": True,
        "mask_token_id": 126336,
        "max_sequence_length": 4096,
        "mlp_hidden_size": mlp_hidden_size,
        "mlp_ratio": 4,
        "model_type": "llada",
        "multi_query_attention": None,
        "n_heads": n_heads,
        "n_kv_heads": n_heads,
        "n_layers": n_layers,
        "pad_token_id": 126081,
        "precision": "amp_bf16",
        "residual_dropout": 0.0,
        "rms_norm_eps": 1e-05,
        "rope": True,
        "rope_full_precision": True,
        "rope_theta": 500000.0,
        "scale_logits": False,
        "transformers_version": "4.46.3",
        "use_cache": False,
        "vocab_size": 126464,
        "weight_tying": False,
    }


def llada_tokenizer_config() -> dict:
    special = {c: (i, True) for c, i in LLADA_SPECIAL_TOKENS.items()}
    return {
        "add_bos_token": False,
        "add_eos_token": False,
        "added_tokens_decoder": _added_tokens_decoder(special),
        "additional_special_tokens": [
            "<role>",
            "</role>",
            "<|arithmetic_start|>",
            "<|arithmetic_end|>",
            "<|number_start|>",
            "<|number_end|>",
        ],
        "bos_token": "<|startoftext|>",
        "chat_template": LLADA_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "cls_token": "[CLS]",
        "eos_token": "<|endoftext|>",
        "fast_tokenizer": True,
        "gmask_token": "[gMASK]",
        "merges_file": None,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": "<|endoftext|>",
        "tokenizer_class": "PreTrainedTokenizerFast",
        "trust_remote_code": True,
        "vocab_file": None,
    }


def write_llada_checkpoint(
    path,
    *,
    seed: int = 0,
    d_model: int = 64,
    n_layers: int = 2,
    n_heads: int = 4,
    mlp_hidden_size: int = 128,
    sharded: bool = False,
    dtype: torch.dtype = torch.bfloat16,
    std: float = 0.5,
    head_std: float = 1.0,
) -> dict:
    """Write a tiny random LLaDA-8B-Instruct-layout checkpoint into ``path``; return its config dict.

    Tensors (torch Linear layout [out, in]): ``model.transformer.wte.weight`` [126464, d],
    ``model.transformer.blocks.{i}.{attn_norm,ff_norm}.weight`` [d],
    ``...{q,k,v}_proj.weight`` [d, d], ``...attn_out.weight`` [d, d],
    ``...ff_proj.weight`` (gate) / ``...up_proj.weight`` [h, d], ``...ff_out.weight`` (down) [d, h],
    ``model.transformer.ln_f.weight`` [d], ``model.transformer.ff_out.weight`` (LM head) [126464, d].
    The real checkpoint is bfloat16; values drawn here are rounded to ``dtype`` once, so every reader sees
    the same numbers. Matmul weights ~ N(0, std^2), embeddings ~ N(0, 1), norm weights ~ 1 + N(0, 0.1^2);
    LM-head rows of the tokenizer's ids ~ N(0, head_std^2), all other rows (and the mask row) ~ N(0, 0.02^2).
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    cfg = llada_config(d_model=d_model, n_layers=n_layers, n_heads=n_heads, mlp_hidden_size=mlp_hidden_size)
    gen = torch.Generator().manual_seed(seed)
    vocab = cfg["embedding_size"]
    t: dict[str, torch.Tensor] = {}
    t["model.transformer.wte.weight"] = _normal(gen, (vocab, d_model), 1.0)
    for i in range(n_layers):
        p = f"model.transformer.blocks.{i}."
        t[p + "attn_norm.weight"] = _norm_weight(gen, d_model)
        t[p + "q_proj.weight"] = _normal(gen, (d_model, d_model), std)
        t[p + "k_proj.weight"] = _normal(gen, (d_model, d_model), std)
        t[p + "v_proj.weight"] = _normal(gen, (d_model, d_model), std)
        t[p + "attn_out.weight"] = _normal(gen, (d_model, d_model), std)
        t[p + "ff_norm.weight"] = _norm_weight(gen, d_model)
        t[p + "ff_proj.weight"] = _normal(gen, (mlp_hidden_size, d_model), std)
        t[p + "up_proj.weight"] = _normal(gen, (mlp_hidden_size, d_model), std)
        t[p + "ff_out.weight"] = _normal(gen, (d_model, mlp_hidden_size), std)
    t["model.transformer.ln_f.weight"] = _norm_weight(gen, d_model)
    active = _active_ids(LLADA_SPECIAL_TOKENS, {"<|mdm_mask|>"})
    t["model.transformer.ff_out.weight"] = _lm_head(gen, vocab, d_model, active, head_std)
    t = {k: v.to(dtype) for k, v in t.items()}
    _save_tensors(path, t, sharded)
    _write_json(path / "config.json", cfg)
    special = {c: (i, True) for c, i in LLADA_SPECIAL_TOKENS.items()}
    _build_tokenizer(special).save(str(path / "tokenizer.json"))
    _write_json(path / "tokenizer_config.json", llada_tokenizer_config())
    _write_json(
        path / "special_tokens_map.json",
        {
            "additional_special_tokens": llada_tokenizer_config()["additional_special_tokens"],
            "bos_token": "<|startoftext|>",
            "cls_token": "[CLS]",
            "eos_token": "<|endoftext|>",
            "pad_token": "<|endoftext|>",
        },
    )
    return cfg


# --------------------------------------------------------------------------------------------------------
# Dream checkpoint
# --------------------------------------------------------------------------------------------------------


def dream_config(
    *, hidden_size: int, num_layers: int, num_heads: int, num_kv_heads: int, intermediate_size: int
) -> dict:
    """The key set of Dream-org/Dream-v0-Instruct-7B config.json (real values except sizes; real sizes:
    hidden 3584, 28 layers, 28 heads, 4 KV heads, intermediate 18944)."""
    return {
        "architectures": ["DreamModel"],
        "attention_dropout": 0.0,
        "auto_map": {
            "AutoConfig": "configuration_dream.DreamConfig",
            "AutoModel": "modeling_dream.DreamModel",
        },
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "hidden_act": "silu",
        "hidden_size": hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": intermediate_size,
        "mask_token_id": 151666,
        "max_position_embeddings": 131072,
        "max_window_layers": 28,
        "model_type": "Dream",
        "num_attention_heads": num_heads,
        "num_hidden_layers": num_layers,
        "num_key_value_heads": num_kv_heads,
        "pad_token_id": 151643,
        "rms_norm_eps": 1e-06,
        "rope_scaling": None,
        "rope_theta": 1000000.0,
        "sliding_window": None,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.46.2",
        "use_cache": False,
        "use_mrope": False,
        "use_sliding_window": False,
        "vocab_size": 152064,
    }


def dream_tokenizer_config() -> dict:
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": _added_tokens_decoder(DREAM_SPECIAL_TOKENS),
        "additional_special_tokens": [
            "<|im_start|>",
            "<|im_end|>",
            "<|object_ref_start|>",
            "<|object_ref_end|>",
            "<|box_start|>",
            "<|box_end|>",
            "<|quad_start|>",
            "<|quad_end|>",
            "<|vision_start|>",
            "<|vision_end|>",
            "<|vision_pad|>",
            "<|image_pad|>",
            "<|video_pad|>",
        ],
        "bos_token": "<|beginoftext|>",
        "chat_template": DREAM_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "mask_token": "<|mask|>",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": None,
    }


def write_dream_checkpoint(
    path,
    *,
    seed: int = 0,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    sharded: bool = False,
    dtype: torch.dtype = torch.bfloat16,
    std: float = 0.5,
    head_std: float = 1.0,
) -> dict:
    """Write a tiny random Dream-v0-Instruct-7B-layout (Qwen2 names) checkpoint; return its config dict.

    Tensors: ``model.embed_tokens.weight`` [152064, d], ``model.layers.{i}.input_layernorm.weight``,
    ``model.layers.{i}.self_attn.{q,k,v,o}_proj.weight`` with ``.bias`` on q/k/v only,
    ``model.layers.{i}.post_attention_layernorm.weight``, ``model.layers.{i}.mlp.{gate,up,down}_proj.weight``,
    ``model.norm.weight``, ``lm_head.weight`` [152064, d] (untied). Weight scales as in
    ``write_llada_checkpoint``.
    """
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    assert hidden_size % num_heads == 0 and num_heads % num_kv_heads == 0
    cfg = dream_config(
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        intermediate_size=intermediate_size,
    )
    gen = torch.Generator().manual_seed(seed)
    d = hidden_size
    hd = d // num_heads
    kv = num_kv_heads * hd
    vocab = cfg["vocab_size"]
    t: dict[str, torch.Tensor] = {}
    t["model.embed_tokens.weight"] = _normal(gen, (vocab, d), 1.0)
    for i in range(num_layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = _norm_weight(gen, d)
        t[p + "self_attn.q_proj.weight"] = _normal(gen, (d, d), std)
        t[p + "self_attn.q_proj.bias"] = _normal(gen, (d,), std)
        t[p + "self_attn.k_proj.weight"] = _normal(gen, (kv, d), std)
        t[p + "self_attn.k_proj.bias"] = _normal(gen, (kv,), std)
        t[p + "self_attn.v_proj.weight"] = _normal(gen, (kv, d), std)
        t[p + "self_attn.v_proj.bias"] = _normal(gen, (kv,), std)
        t[p + "self_attn.o_proj.weight"] = _normal(gen, (d, d), std)
        t[p + "post_attention_layernorm.weight"] = _norm_weight(gen, d)
        t[p + "mlp.gate_proj.weight"] = _normal(gen, (intermediate_size, d), std)
        t[p + "mlp.up_proj.weight"] = _normal(gen, (intermediate_size, d), std)
        t[p + "mlp.down_proj.weight"] = _normal(gen, (d, intermediate_size), std)
    t["model.norm.weight"] = _norm_weight(gen, d)
    active = _active_ids({c: i for c, (i, _) in DREAM_SPECIAL_TOKENS.items()}, {"<|mask|>"})
    t["lm_head.weight"] = _lm_head(gen, vocab, d, active, head_std)
    t = {k: v.to(dtype) for k, v in t.items()}
    _save_tensors(path, t, sharded)
    _write_json(path / "config.json", cfg)
    _build_tokenizer(DREAM_SPECIAL_TOKENS).save(str(path / "tokenizer.json"))
    _write_json(path / "tokenizer_config.json", dream_tokenizer_config())
    _write_json(
        path / "generation_config.json",
        {
            "_from_model_config": True,
            "alg": "origin",
            "alg_temp": None,
            "bos_token_id": 151643,
            "eos_token_id": 151643,
            "eps": 0.001,
            "mask_token_id": None,
            "output_history": False,
            "pad_token_id": 151643,
            "steps": 512,
            "temperature": 0.0,
            "top_k": None,
            "top_p": None,
            "transformers_version": "4.46.2",
        },
    )
    return cfg


# --------------------------------------------------------------------------------------------------------
# Plain float64 forward pass
# --------------------------------------------------------------------------------------------------------


def load_state_dict(path) -> dict[str, torch.Tensor]:
    """Read every tensor of a checkpoint directory (single file or HF-sharded via the index)."""
    path = Path(path)
    index = path / "model.safetensors.index.json"
    out: dict[str, torch.Tensor] = {}
    if index.exists():
        weight_map = json.loads(index.read_text())["weight_map"]
        for fname in sorted(set(weight_map.values())):
            out.update(load_file(str(path / fname)))
        missing = set(weight_map) - set(out)
        assert not missing, f"index names tensors not found in shards: {sorted(missing)[:5]}"
    else:
        out.update(load_file(str(path / "model.safetensors")))
    return out


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # x: [L, d]. y = weight * x / sqrt(mean(x^2) + eps)
    mean_sq = (x * x).mean(dim=-1, keepdim=True)
    return weight * (x / torch.sqrt(mean_sq + eps))


def _rotary_cos_sin(seq_len: int, head_dim: int, theta: float) -> tuple[torch.Tensor, torch.Tensor]:
    # inv_freq[i] = 1 / theta^(2i/d), i = 0..d/2-1; angle[p, i] = p * inv_freq[i]; duplicated to d columns
    # as [angles, angles] (the HF/Llama "rotate_half" layout; LLaDA's RotaryEmbedding does the same).
    half = head_dim // 2
    inv_freq = torch.tensor([1.0 / (theta ** (2 * i / head_dim)) for i in range(half)], dtype=torch.float64)
    pos = torch.arange(seq_len, dtype=torch.float64)
    angles = pos[:, None] * inv_freq[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    return torch.cos(angles), torch.sin(angles)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def _apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: [L, head_dim]
    return x * cos + _rotate_half(x) * sin


def _softmax(x: torch.Tensor) -> torch.Tensor:
    m = x.max(dim=-1, keepdim=True).values
    e = torch.exp(x - m)
    return e / e.sum(dim=-1, keepdim=True)


def _silu(x: torch.Tensor) -> torch.Tensor:
    return x / (1.0 + torch.exp(-x))


def _bidirectional_attention(
    xn: torch.Tensor,
    wq: torch.Tensor,
    wk: torch.Tensor,
    wv: torch.Tensor,
    wo: torch.Tensor,
    bq: torch.Tensor | None,
    bk: torch.Tensor | None,
    bv: torch.Tensor | None,
    n_heads: int,
    n_kv_heads: int,
    theta: float,
) -> torch.Tensor:
    """Full (non-causal) multi-head attention over one sequence, one head at a time."""
    seq_len, d = xn.shape
    head_dim = wq.shape[0] // n_heads
    q = xn @ wq.T + (bq if bq is not None else 0.0)  # [L, H*hd]
    k = xn @ wk.T + (bk if bk is not None else 0.0)  # [L, KV*hd]
    v = xn @ wv.T + (bv if bv is not None else 0.0)
    cos, sin = _rotary_cos_sin(seq_len, head_dim, theta)
    group = n_heads // n_kv_heads
    scale = 1.0 / math.sqrt(head_dim)
    head_outputs = []
    for h in range(n_heads):
        g = h // group  # GQA: query head h reads KV head h // (n_heads / n_kv_heads)
        qh = _apply_rotary(q[:, h * head_dim : (h + 1) * head_dim], cos, sin)
        kh = _apply_rotary(k[:, g * head_dim : (g + 1) * head_dim], cos, sin)
        vh = v[:, g * head_dim : (g + 1) * head_dim]
        scores = (qh @ kh.T) * scale  # [L, L], no mask: every position sees every position
        probs = _softmax(scores)
        head_outputs.append(probs @ vh)
    att = torch.cat(head_outputs, dim=-1)  # [L, H*hd]
    return att @ wo.T


def _llada_logits(cfg: dict, sd: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    for key, want in [
        ("block_type", "llama"),
        ("layer_norm_type", "rms"),
        ("activation_type", "silu"),
        ("alibi", False),
        ("rope", True),
        ("input_emb_norm", False),
        ("scale_logits", False),
        ("weight_tying", False),
        ("include_bias", False),
        ("include_qkv_bias", False),
        ("attention_layer_norm", False),
        ("block_group_size", 1),
    ]:
        if cfg.get(key, want) != want:
            raise NotImplementedError(f"reference LLaDA forward does not support {key}={cfg.get(key)!r}")
    n_heads = cfg["n_heads"]
    n_kv_heads = cfg.get("n_kv_heads") or n_heads
    eps = cfg["rms_norm_eps"]
    theta = cfg["rope_theta"]
    p = "model.transformer."
    x = sd[p + "wte.weight"][ids]  # [L, d]
    for i in range(cfg["n_layers"]):
        b = f"{p}blocks.{i}."
        xn = _rms_norm(x, sd[b + "attn_norm.weight"], eps)
        x = x + _bidirectional_attention(
            xn,
            sd[b + "q_proj.weight"],
            sd[b + "k_proj.weight"],
            sd[b + "v_proj.weight"],
            sd[b + "attn_out.weight"],
            None,
            None,
            None,
            n_heads,
            n_kv_heads,
            theta,
        )
        xn = _rms_norm(x, sd[b + "ff_norm.weight"], eps)
        gate = xn @ sd[b + "ff_proj.weight"].T  # ff_proj is the gate
        up = xn @ sd[b + "up_proj.weight"].T
        x = x + (_silu(gate) * up) @ sd[b + "ff_out.weight"].T  # block ff_out is the down projection
    x = _rms_norm(x, sd[p + "ln_f.weight"], eps)
    return x @ sd[p + "ff_out.weight"].T  # top-level ff_out is the LM head


def _dream_logits(cfg: dict, sd: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    if cfg.get("hidden_act", "silu") != "silu":
        raise NotImplementedError(cfg["hidden_act"])
    if cfg.get("rope_scaling") not in (None, {}):
        raise NotImplementedError("rope_scaling")
    if cfg.get("use_sliding_window", False):
        raise NotImplementedError("sliding window")
    n_heads = cfg["num_attention_heads"]
    n_kv_heads = cfg.get("num_key_value_heads") or n_heads
    eps = cfg["rms_norm_eps"]
    theta = cfg["rope_theta"]
    x = sd["model.embed_tokens.weight"][ids]
    for i in range(cfg["num_hidden_layers"]):
        b = f"model.layers.{i}."
        a = b + "self_attn."
        xn = _rms_norm(x, sd[b + "input_layernorm.weight"], eps)
        x = x + _bidirectional_attention(
            xn,
            sd[a + "q_proj.weight"],
            sd[a + "k_proj.weight"],
            sd[a + "v_proj.weight"],
            sd[a + "o_proj.weight"],
            sd[a + "q_proj.bias"],
            sd[a + "k_proj.bias"],
            sd[a + "v_proj.bias"],
            n_heads,
            n_kv_heads,
            theta,
        )
        xn = _rms_norm(x, sd[b + "post_attention_layernorm.weight"], eps)
        gate = xn @ sd[b + "mlp.gate_proj.weight"].T
        up = xn @ sd[b + "mlp.up_proj.weight"].T
        x = x + (_silu(gate) * up) @ sd[b + "mlp.down_proj.weight"].T
    x = _rms_norm(x, sd["model.norm.weight"], eps)
    head = sd["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings") else sd["lm_head.weight"]
    return x @ head.T


_SD_CACHE: dict[tuple, tuple[dict, dict[str, torch.Tensor]]] = {}


def _load_f64(path) -> tuple[dict, dict[str, torch.Tensor]]:
    path = Path(path).resolve()
    stamp = tuple(
        (f.name, f.stat().st_mtime_ns, f.stat().st_size)
        for f in sorted(path.iterdir())
        if f.suffix in (".json", ".safetensors")
    )
    key = (str(path), stamp)
    if key not in _SD_CACHE:
        cfg = json.loads((path / "config.json").read_text())
        sd = {k: v.to(torch.float64) for k, v in load_state_dict(path).items()}
        _SD_CACHE.clear()
        _SD_CACHE[key] = (cfg, sd)
    return _SD_CACHE[key]


@torch.no_grad()
def plain_logits(path, input_ids: list[int]) -> torch.Tensor:
    """Raw output logits [L, vocab] (float64) of the checkpoint in directory ``path`` for one sequence.

    Attention is fully bidirectional (LLaDA and Dream are both non-causal). The logits are NOT shifted:
    row i is the model output at position i. Dream's generation uses logits shifted right by one (the
    token at position i is predicted from output i-1, position 0 keeps its own row) -- apply
    ``dream_shift`` for that. LLaDA uses the rows as they are.
    """
    cfg, sd = _load_f64(path)
    ids = torch.tensor(list(input_ids), dtype=torch.long)
    mt = cfg.get("model_type")
    if mt == "llada":
        return _llada_logits(cfg, sd, ids)
    if mt in ("Dream", "dream"):
        return _dream_logits(cfg, sd, ids)
    raise NotImplementedError(f"model_type {mt!r}")


def dream_shift(logits: torch.Tensor) -> torch.Tensor:
    """Dream's shift: out[0] = logits[0]; out[i] = logits[i-1] for i >= 1 (works on [L, V] or [B, L, V])."""
    if logits.dim() == 2:
        return torch.cat([logits[:1], logits[:-1]], dim=0)
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


# --------------------------------------------------------------------------------------------------------
# LLaDA semi-autoregressive low-confidence remasking
# --------------------------------------------------------------------------------------------------------


def llada_num_transfer_tokens(n_masked: int, steps: int) -> list[int]:
    """How many tokens to commit at each of ``steps`` steps: n // steps each, first n % steps get one more."""
    base, rem = divmod(n_masked, steps)
    return [base + (1 if s < rem else 0) for s in range(steps)]


@torch.no_grad()
def llada_reference_generate(
    logits_fn,
    prompt: list[int],
    *,
    steps: int,
    gen_length: int,
    block_length: int,
    mask_id: int = 126336,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    trace: list | None = None,
) -> list[int]:
    """LLaDA ``generate(..., remasking='low_confidence', cfg_scale=0)`` written plainly.

    canvas = prompt + gen_length masks; the answer is cut into gen_length // block_length blocks, each
    gets steps // num_blocks steps. At each step: logits = logits_fn(canvas) ([L, V]); x0 = argmax
    (with LLaDA's Gumbel perturbation when temperature > 0); confidence = softmax(logits)[x0] at the masked
    positions of the current block, -inf elsewhere; the k most confident are committed (k from
    ``llada_num_transfer_tokens`` of the block's mask count). Committed tokens are never remasked.
    Ties in confidence are broken towards the lower position (torch.topk leaves this unspecified).
    If ``trace`` is a list, one dict per step is appended: block, step, committed positions, confidences
    and the decision margins (``min_top2_logit_gap``, ``boundary_conf_gap``) so a test can check that its
    fixture is far enough from ties for the engine's precision.
    Returns the full canvas (prompt + generated).
    """
    if gen_length % block_length != 0:
        raise ValueError("gen_length must be a multiple of block_length")
    num_blocks = gen_length // block_length
    if steps % num_blocks != 0:
        raise ValueError("steps must be a multiple of the number of blocks")
    steps_per_block = steps // num_blocks
    p_len = len(prompt)
    canvas = list(prompt) + [mask_id] * gen_length
    for blk in range(num_blocks):
        start = p_len + blk * block_length
        end = start + block_length
        n_masked = sum(1 for j in range(start, end) if canvas[j] == mask_id)
        schedule = llada_num_transfer_tokens(n_masked, steps_per_block)
        for step in range(steps_per_block):
            logits = logits_fn(list(canvas)).to(torch.float64)
            if logits.shape[0] != len(canvas):
                raise ValueError("logits_fn must return [len(canvas), vocab]")
            if temperature > 0:
                # LLaDA: argmax(exp(l) / (-log u)^T) == argmax(l - T * log(-log u)), u ~ U(0, 1), float64
                u = torch.rand(logits.shape, dtype=torch.float64, generator=generator)
                x0 = torch.argmax(logits - temperature * torch.log(-torch.log(u)), dim=-1)
            else:
                x0 = torch.argmax(logits, dim=-1)
            probs = _softmax(logits)
            candidates = []
            for j in range(start, end):
                if canvas[j] == mask_id:
                    conf = float(probs[j, int(x0[j])])
                    candidates.append((-conf, j))
            candidates.sort()  # most confident first; equal confidence -> lower position first
            k = schedule[step]
            chosen = candidates[:k]
            for _, j in chosen:
                canvas[j] = int(x0[j])
            if trace is not None:
                gaps = []
                for j in range(start, end):
                    if j in {jj for _, jj in candidates}:
                        top2 = torch.topk(logits[j], 2).values
                        gaps.append(float(top2[0] - top2[1]))
                boundary = -candidates[k - 1][0] - (-candidates[k][0]) if 0 < k < len(candidates) else None
                trace.append(
                    {
                        "block": blk,
                        "step": step,
                        "committed": sorted(j for _, j in chosen),
                        "confidences": {j: -c for c, j in candidates},
                        # decision margins: argmax top-2 logit gap over the block's masked positions, and
                        # the confidence gap between the last committed and the first passed-over candidate
                        "min_top2_logit_gap": min(gaps) if gaps else None,
                        "boundary_conf_gap": boundary,
                    }
                )
    return canvas


# --------------------------------------------------------------------------------------------------------
# Dream's own decoding (generation_utils.py `diffusion_generate`, at temperature 0)
# --------------------------------------------------------------------------------------------------------


def _f32(x: float) -> float:
    import numpy as np

    return float(np.float32(x))


def dream_timesteps(steps: int, eps: float = 1e-3) -> list[float]:
    """torch.linspace(1, eps, steps + 1) in float32, as Dream builds it, computed the way torch's CPU kernel
    does: a float32 step, the first half counted up from the start and the second half down from the end,
    each value rounded to float32 once."""
    n = steps + 1
    start, end = _f32(1.0), _f32(eps)
    step = _f32((end - start) / (n - 1))
    return [_f32(start + step * k) if k < n // 2 else _f32(end - step * (n - 1 - k)) for k in range(n)]


def dream_transfer_count(masked: int, step: int, steps: int, timesteps: list[float]) -> int:
    """Tokens unmasked at `step`: int(masked * (1 - s / t)) in float32 arithmetic, all that are left at the
    last step; it may be 0 (the step then commits nothing)."""
    if step == steps - 1:
        return masked
    ratio = _f32(timesteps[step + 1] / timesteps[step])
    return int(_f32(_f32(masked) * _f32(1.0 - ratio)))


@torch.no_grad()
def dream_reference_generate(
    logits_fn, prompt: list[int], *, gen_length: int, steps: int, alg: str = "entropy", mask_id: int = 151666
) -> list[int]:
    """Dream's `diffusion_generate(..., alg=alg, temperature=0)` for one prompt: the canvas is the prompt and
    `gen_length` masks, and exactly `steps` passes run over all of it (no blocks). Each pass shifts the
    logits by one (`dream_shift`), takes every masked position's argmax over the whole vocabulary and a
    confidence from the softmax over the whole vocabulary: the argmax's probability ("maskgit_plus",
    named "probability" here), the gap between the two largest probabilities ("topk_margin", "margin") or
    sum(p * ln(p + 1e-10)) ("entropy"); then the `dream_transfer_count` most confident masked positions
    are committed (the lower position on equal confidence). Returns the canvas."""
    canvas = list(prompt) + [mask_id] * gen_length
    timesteps = dream_timesteps(steps)
    for step in range(steps):
        masked = [j for j in range(len(canvas)) if canvas[j] == mask_id]
        probs = _softmax(dream_shift(logits_fn(list(canvas)).double()))
        chosen = {}
        for j in masked:
            p = probs[j]
            top = torch.topk(p, 2).values
            confidence = {
                "probability": float(top[0]),
                "margin": float(top[0] - top[1]),
                "entropy": float((p * torch.log(p + 1e-10)).sum()),
            }[alg]
            chosen[j] = (confidence, int(torch.argmax(p)))
        assert mask_id not in {t for _, t in chosen.values()}, "the fixture's model predicted the mask token"
        count = dream_transfer_count(len(masked), step, steps, timesteps)
        for j in sorted(masked, key=lambda j: (-chosen[j][0], j))[:count]:
            canvas[j] = chosen[j][1]
    return canvas


# --------------------------------------------------------------------------------------------------------
# Self-check
# --------------------------------------------------------------------------------------------------------


def _render_chat(template: str, messages: list[dict], bos_token: str, add_generation_prompt: bool) -> str:
    import jinja2

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)  # as transformers renders templates
    return env.from_string(template).render(
        messages=messages, bos_token=bos_token, add_generation_prompt=add_generation_prompt
    )


def _top2_gaps(logits: torch.Tensor) -> torch.Tensor:
    top2 = torch.topk(logits, 2, dim=-1).values
    return top2[:, 0] - top2[:, 1]


def _self_check() -> None:
    import tempfile
    import time

    from tokenizers import Tokenizer

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ttfat-ref-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        llada_dir, llada_sh_dir = tmp / "llada", tmp / "llada_sharded"
        dream_dir, dream_sh_dir = tmp / "dream", tmp / "dream_sharded"
        lcfg = write_llada_checkpoint(llada_dir, seed=0)
        write_llada_checkpoint(llada_sh_dir, seed=0, sharded=True)
        dcfg = write_dream_checkpoint(dream_dir, seed=0)
        write_dream_checkpoint(dream_sh_dir, seed=0, sharded=True)
        print(f"wrote 4 checkpoints in {time.perf_counter() - t0:.2f}s")
        for d in (llada_dir, llada_sh_dir, dream_dir, dream_sh_dir):
            print(f"  {d.name}: {sorted(f.name for f in d.iterdir())}")
        idx = json.loads((llada_sh_dir / "model.safetensors.index.json").read_text())
        assert set(idx["weight_map"]) == set(load_state_dict(llada_dir))
        assert lcfg["mask_token_id"] == 126336 and dcfg["mask_token_id"] == 151666

        # --- tokenizers and chat templates
        msgs = [{"role": "user", "content": "  Where is my order? It was shipped on Monday.  "}]
        for name, d, bos, checks in [
            ("llada", llada_dir, "<|startoftext|>", {c: i for c, i in LLADA_SPECIAL_TOKENS.items()}),
            ("dream", dream_dir, "<|beginoftext|>", {c: i for c, (i, _) in DREAM_SPECIAL_TOKENS.items()}),
        ]:
            tok = Tokenizer.from_file(str(d / "tokenizer.json"))
            tc = json.loads((d / "tokenizer_config.json").read_text())
            assert tc["bos_token"] == bos
            for content, tid in checks.items():
                assert tok.token_to_id(content) == tid, (content, tok.token_to_id(content), tid)
                assert tok.id_to_token(tid) == content
            text = _render_chat(tc["chat_template"], msgs, tc["bos_token"], add_generation_prompt=True)
            enc = tok.encode(text, add_special_tokens=False)
            assert "<unk>" not in enc.tokens, enc.tokens
            dec = tok.decode(enc.ids, skip_special_tokens=False)
            assert dec == text, (dec, text)
            print(f"{name} chat prompt {len(enc.ids)} tokens: {text!r}")
            print(f"  ids: {enc.ids}")

        # --- plain logits, shard equivalence, tie gaps
        ltok = Tokenizer.from_file(str(llada_dir / "tokenizer.json"))
        ltc = json.loads((llada_dir / "tokenizer_config.json").read_text())
        lprompt_text = _render_chat(ltc["chat_template"], msgs, ltc["bos_token"], True)
        lprompt = ltok.encode(lprompt_text, add_special_tokens=False).ids
        M = 126336
        canvas = lprompt + [M] * 16
        t0 = time.perf_counter()
        ll = plain_logits(llada_dir, canvas)
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        plain_logits(llada_dir, canvas)
        t_cached = time.perf_counter() - t0
        assert ll.shape == (len(canvas), 126464) and ll.dtype == torch.float64
        assert torch.equal(ll, plain_logits(llada_sh_dir, canvas))
        print(f"llada plain_logits L={len(canvas)}: {t_first:.2f}s first (load), {t_cached:.3f}s cached")
        # bidirectionality: changing the LAST token changes the FIRST position's logits
        alt = list(canvas)
        alt[-1] = ltok.token_to_id("hello")
        assert not torch.allclose(plain_logits(llada_dir, alt)[0], ll[0])
        masked = torch.tensor([t == M for t in canvas])
        g = _top2_gaps(ll)
        print(
            f"llada top-2 logit gap: masked min {g[masked].min():.4f} median {g[masked].median():.4f}; "
            f"all positions min {g.min():.4f}; logit std {ll.std():.2f}"
        )
        pmax = _softmax(ll).max(dim=-1).values
        print(f"llada top-1 prob at masked: min {pmax[masked].min():.4f} max {pmax[masked].max():.4f}")

        dtok = Tokenizer.from_file(str(dream_dir / "tokenizer.json"))
        dtc = json.loads((dream_dir / "tokenizer_config.json").read_text())
        dprompt = dtok.encode(
            _render_chat(dtc["chat_template"], msgs, dtc["bos_token"], True), add_special_tokens=False
        ).ids
        DM = 151666
        dcanvas = dprompt + [DM] * 16
        dl = plain_logits(dream_dir, dcanvas)
        assert dl.shape == (len(dcanvas), 152064)
        assert torch.equal(dl, plain_logits(dream_sh_dir, dcanvas))
        ds = dream_shift(dl)
        assert torch.equal(ds[0], dl[0]) and torch.equal(ds[1:], dl[:-1])
        dmasked = torch.tensor([t == DM for t in dcanvas])
        dg = _top2_gaps(ds)
        print(
            f"dream top-2 logit gap (shifted): masked min {dg[dmasked].min():.4f} median "
            f"{dg[dmasked].median():.4f}; all positions min {_top2_gaps(dl).min():.4f}; "
            f"logit std {dl.std():.2f}"
        )

        # --- LLaDA reference generation: 8-token prompt, gen 16, block 8, steps 8
        prompt8 = lprompt[:8]
        trace: list = []
        nfe = [0]

        def fn(ids):
            nfe[0] += 1
            return plain_logits(llada_dir, ids)

        t0 = time.perf_counter()
        out = llada_reference_generate(fn, prompt8, steps=8, gen_length=16, block_length=8, trace=trace)
        t_gen = time.perf_counter() - t0
        assert out[:8] == prompt8 and M not in out and len(out) == 24 and nfe[0] == 8
        assert [len(s["committed"]) for s in trace] == [2] * 8
        # replay with plain argmax commits: must reproduce the same canvas
        canvas_r = prompt8 + [M] * 16
        for s in trace:
            lg = plain_logits(llada_dir, canvas_r)
            for j in s["committed"]:
                canvas_r[j] = int(torch.argmax(lg[j]))
        assert canvas_r == out
        min_logit_gap_steps = min(s["min_top2_logit_gap"] for s in trace)
        conf_gaps = [s["boundary_conf_gap"] for s in trace if s["boundary_conf_gap"] is not None]
        all_confs = [c for s in trace for c in s["confidences"].values()]
        print(f"llada_reference_generate (8 NFE) in {t_gen:.2f}s -> {out[8:]}")
        print(f"  decoded answer: {ltok.decode(out[8:], skip_special_tokens=False)!r}")
        print(
            f"  min top-2 logit gap at masked positions over all steps: {min_logit_gap_steps:.4f}; "
            f"min confidence gap at the commit boundary: {min(conf_gaps):.3g}; "
            f"confidences {min(all_confs):.3f}..{max(all_confs):.6f}"
        )
        # schedule sanity
        assert llada_num_transfer_tokens(10, 4) == [3, 3, 2, 2]
        assert llada_num_transfer_tokens(3, 4) == [1, 1, 1, 0]
    print(f"self-check OK in {time.perf_counter() - t_all:.1f}s")


if __name__ == "__main__":
    _self_check()
