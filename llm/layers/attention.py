"""Multi-head attention with grouped-query heads, optional q/k/v bias and a key/value prefix.

The caller owns the mask, so the same layer serves bidirectional diffusion, block diffusion and
autoregressive decoding; cached keys (`past`) are already rotated and are simply prepended.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from llm.layers.rotary import Rotary


class Attention(nn.Module):
    def __init__(self, hidden: int, num_heads: int, num_kv_heads: int, rope_theta: float, qkv_bias: bool):
        super().__init__()
        self.num_heads, self.num_kv_heads = num_heads, num_kv_heads
        self.head_dim = hidden // num_heads
        self.q_proj = nn.Linear(hidden, num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden, num_kv_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden, num_kv_heads * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden, bias=False)
        self.rotary = Rotary(self.head_dim, rope_theta)

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        mask: torch.Tensor,
        past: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """x: [B, Q, hidden]; mask: bool [B, 1, Q, P + Q] (True = may attend); past: ([B, Hkv, P, D]) * 2.

        Returns the output and this call's own rotated keys/values (for the caller to cache).
        """
        b, q, _ = x.shape
        qh = self.q_proj(x).view(b, q, self.num_heads, self.head_dim).transpose(1, 2)
        kh = self.k_proj(x).view(b, q, self.num_kv_heads, self.head_dim).transpose(1, 2)
        vh = self.v_proj(x).view(b, q, self.num_kv_heads, self.head_dim).transpose(1, 2)
        qh, kh = self.rotary(qh, positions), self.rotary(kh, positions)
        keys, values = kh, vh
        if past is not None:
            keys, values = torch.cat((past[0], kh), dim=2), torch.cat((past[1], vh), dim=2)
        out = F.scaled_dot_product_attention(
            qh, keys, values, attn_mask=mask, enable_gqa=self.num_heads != self.num_kv_heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(b, q, -1)), (kh, vh)
