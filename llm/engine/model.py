"""The transformer shared by every model family (LLaDA, Dream, SDAR, Fast-dLLM v2, LLaDA2, our own).

It knows nothing about diffusion: it maps token ids, positions, an attention mask and optional cached
keys/values to hidden states. Decoding rules live in `sampler.py`, scheduling in `engine.py`.
"""

from __future__ import annotations

import torch
from torch import nn

from llm.engine.config import ModelConfig
from llm.engine.layers.attention import Attention, CacheBatch
from llm.engine.layers.mlp import SwiGLU
from llm.engine.layers.moe import MixtureOfExperts
from llm.engine.layers.norm import RMSNorm
from llm.engine.layers.rotary import Rotary

KV = tuple[torch.Tensor, torch.Tensor]


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, index: int = 0):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        qk_norm = cfg.rms_norm_eps if cfg.qk_norm else None
        self.self_attn = Attention(
            cfg.hidden_size, cfg.num_heads, cfg.num_kv_heads, cfg.qkv_bias, cfg.head_dim, qk_norm
        )
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        sparse = cfg.moe is not None and index >= cfg.moe.dense_layers
        self.mlp = (
            MixtureOfExperts(cfg.hidden_size, cfg.moe)
            if sparse
            else SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        )

    def forward(self, x, rope, mask, past: KV | None) -> tuple[torch.Tensor, KV]:
        h, kv = self.self_attn(self.input_layernorm(x), rope, mask, past)
        x = x + h
        return x + self.mlp(self.post_attention_layernorm(x)), kv


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        cfg.validate()
        self.config = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = Rotary(cfg.rotary_dim or cfg.head_dim, cfg.rope_theta)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed_tokens.weight

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor | CacheBatch,
        past: list[KV] | None = None,
    ) -> tuple[torch.Tensor, list[KV]]:
        """Final-normed hidden states [B, Q, hidden] and each layer's new keys/values.

        `past`: per layer, cached keys/values to prepend (dense mask) or the cache itself (CacheBatch).
        """
        x = self.embed_tokens(input_ids)
        rope = self.rotary(positions)
        new_kv = []
        for i, layer in enumerate(self.layers):
            x, kv = layer(x, rope, mask, None if past is None else past[i])
            new_kv.append(kv)
        return self.norm(x), new_kv

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden).float()

    def full_logits(self, input_ids: torch.Tensor, block_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Raw (unshifted) logits of whole sequences [B, L] with no cache.

        Without `block_ids` attention is bidirectional; with them, position i sees j iff
        block_ids[j] <= block_ids[i] (causal across blocks).
        """
        b, n = input_ids.shape
        positions = torch.arange(n, device=input_ids.device).expand(b, n)
        if block_ids is None:
            mask = torch.ones(b, 1, n, n, dtype=torch.bool, device=input_ids.device)
        else:
            mask = (block_ids[:, None, :] <= block_ids[:, :, None])[:, None]
        hidden, _ = self(input_ids, positions, mask)
        return self.logits(hidden)

    @property
    def device(self) -> torch.device:
        return self.embed_tokens.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.embed_tokens.weight.dtype
