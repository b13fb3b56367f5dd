"""Multi-head attention with grouped-query heads, optional q/k/v bias and a key/value prefix.

The caller owns the mask, so the same layer serves bidirectional diffusion, block diffusion and
autoregressive decoding. Two ways in:
- dense (training, tests): a mask tensor, and cached keys (`past`, already rotated) are prepended;
- `CacheBatch` (the engine): the requests of one step packed into one row; their new keys/values go
  straight into the cache at their positions and attention reads the cache in place.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from llm.engine.layers.norm import RMSNorm
from llm.engine.layers.rotary import apply_rotary


@dataclass
class Part:
    """Requests in slots [first, first + size) whose queries, padded to the same length, attend in
    one call to the first `key_len` positions of their slots under `mask` ([size, 1, Qmax, key_len])."""

    first: int
    size: int
    pad_index: torch.Tensor  # [size * Qmax] packed token behind each padded query row
    mask: torch.Tensor
    key_len: int


@dataclass
class CacheBatch:
    """One engine step: the requests packed into one row (the dense layers see no padding), request i
    in cache slot i. Keys/values are written to the slots at their positions, then each `Part` attends
    over the cache in place, with no copies; `unpad_index` puts the outputs back in packed order."""

    slots: torch.Tensor  # [T] slot of each packed token
    positions: torch.Tensor  # [T] its position in the slot
    parts: list[Part]
    unpad_index: torch.Tensor  # [T] row of each packed token in the parts' concatenated outputs


class Attention(nn.Module):
    def __init__(
        self,
        hidden: int,
        num_heads: int,
        num_kv_heads: int,
        qkv_bias: bool,
        head_dim: int = 0,
        qk_norm_eps: float | None = None,
    ):
        """`qk_norm_eps`: an RMSNorm over each query and key head before the rotation (Qwen3, SDAR)."""
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = head_dim or hidden // num_heads
        self.q_proj = nn.Linear(hidden, num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden, num_kv_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden, num_kv_heads * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden, bias=False)
        if qk_norm_eps is not None:
            self.q_norm = RMSNorm(self.head_dim, qk_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, qk_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        mask: torch.Tensor | CacheBatch,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x: [B, Q, hidden]; rope: the model's cos/sin for these positions.

        Dense: mask bool [B, 1, Q, P + Q] (True = may attend), past ([B, Hkv, P, D]) * 2.
        CacheBatch: B = 1 (the packed row), past = this layer's cache ([slots, Hkv, max_len, D]) * 2.
        Returns the output and this call's own rotated keys/values.
        """
        b, q, _ = x.shape
        qh = self.q_proj(x).view(b, q, self.num_heads, self.head_dim).transpose(1, 2)
        kh = self.k_proj(x).view(b, q, self.num_kv_heads, self.head_dim).transpose(1, 2)
        vh = self.v_proj(x).view(b, q, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if hasattr(self, "q_norm"):
            qh, kh = self.q_norm(qh), self.k_norm(kh)
        qh, kh = apply_rotary(qh, rope), apply_rotary(kh, rope)
        if isinstance(mask, CacheBatch):
            out = self._attend_cache(qh, kh, vh, mask, past)
        else:
            keys, values = kh, vh
            if past is not None:
                keys, values = torch.cat((past[0], kh), dim=2), torch.cat((past[1], vh), dim=2)
            out = self._attend(qh, keys, values, mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, q, -1)), (kh, vh)

    def _attend_cache(self, qh, kh, vh, batch: CacheBatch, cache) -> torch.Tensor:
        k_cache, v_cache = cache
        k_cache[batch.slots, :, batch.positions] = kh[0].transpose(0, 1)
        v_cache[batch.slots, :, batch.positions] = vh[0].transpose(0, 1)
        outs = []
        for p in batch.parts:
            q = qh[0].index_select(1, p.pad_index).view(self.num_heads, p.size, -1, self.head_dim)
            k = k_cache[p.first : p.first + p.size, :, : p.key_len]
            v = v_cache[p.first : p.first + p.size, :, : p.key_len]
            out = self._attend(q.transpose(0, 1), k, v, p.mask)  # [size, H, Qmax, D]
            outs.append(out.transpose(0, 1).reshape(self.num_heads, -1, self.head_dim))
        return torch.cat(outs, dim=1).index_select(1, batch.unpad_index)[None]

    def _attend(self, q, k, v, mask) -> torch.Tensor:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=self.num_heads != self.num_kv_heads
        )
