"""Load checkpoints from a local directory, in any layout of `families` (LLaDA, Dream, SDAR, ... and our
own). Never touches a network.

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
from llm.engine.families import FAMILIES
from llm.engine.model import Transformer
from llm.engine.tokenizer import Tokenizer


@dataclass
class Checkpoint:
    path: Path
    config: ModelConfig
    model: Transformer
    tokenizer: Tokenizer


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
    if kind not in FAMILIES:
        known = ", ".join(sorted(FAMILIES))
        raise CheckpointError(f"{file}: unknown model_type {raw.get('model_type')!r} (supported: {known})")
    try:
        cfg = FAMILIES[kind].config(raw)
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
    family = FAMILIES[cfg.model_type]
    if hasattr(family, "split"):
        family.split(tensors, cfg)
    names = family.names(cfg, model)
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
