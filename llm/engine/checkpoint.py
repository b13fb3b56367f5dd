"""Load checkpoints from a local directory: LLaDA, Dream and our own format. Never touches a network.

Each layout is a translation of config keys and tensor names onto `ModelConfig` and `Transformer`.
Anything wrong with a directory raises `CheckpointError` with one line naming the file and the problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from llm.engine.config import ModelConfig
from llm.engine.errors import CheckpointError
from llm.engine.model import Transformer
from llm.engine.tokenizer import Tokenizer


@dataclass
class Checkpoint:
    path: Path
    config: ModelConfig
    model: Transformer
    tokenizer: Tokenizer


def _ids(value) -> list[int]:
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


def _llada_config(c: dict) -> ModelConfig:
    eos = _ids(c.get("eos_token_id", 126081))
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


def _llada_names(cfg: ModelConfig) -> dict[str, str]:
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


def _dream_config(c: dict) -> ModelConfig:
    eos = _ids(c.get("eos_token_id", 151643))
    return ModelConfig(
        model_type="dream",
        vocab_size=int(c["vocab_size"]),
        hidden_size=int(c["hidden_size"]),
        num_layers=int(c["num_hidden_layers"]),
        num_heads=int(c["num_attention_heads"]),
        num_kv_heads=int(c.get("num_key_value_heads") or c["num_attention_heads"]),
        intermediate_size=int(c["intermediate_size"]),
        mask_token_id=int(c.get("mask_token_id", 151666)),
        eos_token_ids=eos + [151645] * (int(c["vocab_size"]) > 151645),  # <|im_end|> ends a turn too
        pad_token_id=int(c.get("pad_token_id") or eos[0]),
        rope_theta=float(c.get("rope_theta", 10000.0)),
        rms_norm_eps=float(c.get("rms_norm_eps", 1e-6)),
        qkv_bias=True,
        tie_embeddings=bool(c.get("tie_word_embeddings", False)),
        attention="bidirectional",
        shift_logits=True,
        max_position=int(c.get("max_position_embeddings", 4096)),
    )


def _dream_names(cfg: ModelConfig, model: Transformer) -> dict[str, str]:
    """Dream uses the Qwen2 names, which are ours with a `model.` prefix (the LM head has none)."""
    names = {name: "model." + name for name in model.state_dict()}
    names["lm_head.weight"] = "model.embed_tokens.weight" if cfg.tie_embeddings else "lm_head.weight"
    return names


def read_config(path: Path) -> ModelConfig:
    file = path / "config.json"
    if not path.is_dir():
        raise CheckpointError(f"{path}: not a directory")
    if not file.exists():
        raise CheckpointError(f"{file}: missing (a checkpoint directory needs config.json)")
    try:
        raw = json.loads(file.read_text())
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{file}: not valid JSON ({e})") from None
    kind = str(raw.get("model_type", "")).lower()
    try:
        if kind == "llada":
            cfg = _llada_config(raw)
        elif kind == "dream":
            cfg = _dream_config(raw)
        elif kind == "ttfat":
            cfg = ModelConfig.from_dict(raw)
        else:
            raise CheckpointError(
                f"{file}: unknown model_type {raw.get('model_type')!r} (supported: llada, Dream, ttfat)"
            )
        cfg.validate()
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{file}: bad or missing field ({e})") from None
    return cfg


def _weight_files(path: Path) -> list[Path]:
    index = path / "model.safetensors.index.json"
    if index.exists():
        shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        files = [path / s for s in shards]
        for f in files:
            if not f.exists():
                raise CheckpointError(f"{f}: missing (listed in {index.name})")
        return files
    single = path / "model.safetensors"
    if single.exists():
        return [single]
    raise CheckpointError(f"{single}: missing (no model.safetensors or model.safetensors.index.json)")


def _load_tensors(files: list[Path]) -> dict[str, tuple[Path, torch.Tensor]]:
    tensors = {}
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as st:
                for key in st.keys():  # noqa: SIM118 (safe_open is not iterable)
                    tensors[key] = (f, st.get_tensor(key))
        except Exception as e:  # safetensors raises several types for a damaged file
            raise CheckpointError(f"{f}: unreadable safetensors file ({e})") from None
    return tensors


def native_bf16(device: str) -> bool:
    """Whether the hardware computes in bf16: a GPU that supports it, a CPU with AVX512-BF16 or AMX.
    Elsewhere oneDNN emulates bf16, and a training step on an AVX2-only AMD EPYC took 30 to 37 times as
    long as in fp32 (bench/train_step.py)."""
    if torch.device(device).type == "cuda":
        return torch.cuda.is_bf16_supported()
    return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()


def default_device_dtype(device: str | None, dtype: torch.dtype | None) -> tuple[str, torch.dtype]:
    """CUDA in bf16 when present, CPU in fp32 otherwise; either can be overridden."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    return device, dtype or (torch.bfloat16 if device.startswith("cuda") else torch.float32)


def load_checkpoint(
    path: str | Path, device: str | None = None, dtype: torch.dtype | None = None
) -> Checkpoint:
    path = Path(path)
    cfg = read_config(path)
    tok_file = path / "tokenizer.json"
    if not tok_file.exists():
        raise CheckpointError(f"{tok_file}: missing")
    tensors = _load_tensors(_weight_files(path))
    with torch.device("meta"):
        model = Transformer(cfg)
    if cfg.model_type == "llada":
        names = _llada_names(cfg)
    elif cfg.model_type == "dream":
        names = _dream_names(cfg, model)
    else:
        names = {n: n for n in model.state_dict()}
        if cfg.tie_embeddings:
            names["lm_head.weight"] = "embed_tokens.weight"
    expected = model.state_dict()
    state = {}
    for ours, theirs in names.items():
        if theirs not in tensors:
            raise CheckpointError(f"{path}: tensor {theirs!r} missing from the weight files")
        file, tensor = tensors[theirs]
        if tuple(tensor.shape) != tuple(expected[ours].shape):
            raise CheckpointError(
                f"{file}: tensor {theirs!r} has shape {tuple(tensor.shape)}, config.json implies "
                f"{tuple(expected[ours].shape)}"
            )
        state[ours] = tensor
    device, dtype = default_device_dtype(device, dtype)
    model = model.to(dtype).to_empty(device=device)  # no random init of weights about to be replaced
    model.load_state_dict(state)
    model.eval()
    try:
        tokenizer = Tokenizer(path)
    except Exception as e:
        raise CheckpointError(f"{tok_file}: unreadable tokenizer ({e})") from None
    return Checkpoint(path=path, config=cfg, model=model, tokenizer=tokenizer)


def save_checkpoint(model: Transformer, path: str | Path) -> None:
    """Write our own format: config.json (model_type "ttfat") and model.safetensors.

    The tokenizer files are written by whoever built the tokenizer."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.config.save(path / "config.json")
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_embeddings:
        state.pop("lm_head.weight")
    save_file(state, str(path / "model.safetensors"))
