"""Tiny random-weight checkpoints in our own format, for engine tests that need block diffusion."""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, models, pre_tokenizers

from llm.engine.checkpoint import save_checkpoint
from llm.engine.config import ModelConfig
from llm.engine.model import Transformer

VOCAB = 64
MASK, EOS, PAD = 63, 62, 61


def write_own_checkpoint(
    path, *, attention="block", block_size=4, shift=True, seed=0, eos=EOS, std=0.5
) -> ModelConfig:
    cfg = ModelConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_layers=2,
        num_heads=4,
        num_kv_heads=2,
        intermediate_size=64,
        mask_token_id=MASK,
        eos_token_ids=[eos],
        pad_token_id=PAD,
        attention=attention,
        block_size=block_size,
        shift_logits=shift,
        qkv_bias=True,
    )
    torch.manual_seed(seed)
    model = Transformer(cfg)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=std)
    save_checkpoint(model, path)
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.save(str(path / "tokenizer.json"))
    return cfg
