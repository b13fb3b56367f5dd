"""Multi-head attention with grouped-query heads, optional q/k/v bias and a key/value prefix.

The caller owns the mask, so the same layer serves bidirectional diffusion, block diffusion and
autoregressive decoding; cached keys (`past`) are already rotated and are simply prepended.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from llm.layers.rotary import Rotary


@dataclass
class Packed:
    """Several requests packed into one row: request i owns query rows [q_lo, q_hi) and cached rows
    [p_lo, p_hi) of the packed past, and attends only to those (`masks[i]`: [1, 1, Qi, Pi + Qi]).
    Attention runs per request, so its cost is the sum of each request's own, not the square of the
    whole row's."""

    segments: list[tuple[int, int, int, int]]
    masks: list[torch.Tensor]


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
        mask: torch.Tensor | Packed,
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
        if isinstance(mask, Packed):
            pk, pv = past if past is not None else (kh[:, :, :0], vh[:, :, :0])
            out = torch.cat(
                [
                    self._attend(
                        qh[:, :, qa:qb],
                        torch.cat((pk[:, :, pa:pb], kh[:, :, qa:qb]), dim=2),
                        torch.cat((pv[:, :, pa:pb], vh[:, :, qa:qb]), dim=2),
                        m,
                    )  # fmt: skip
                    for (qa, qb, pa, pb), m in zip(mask.segments, mask.masks, strict=True)
                ],
                dim=2,
            )
        else:
            keys, values = kh, vh
            if past is not None:
                keys, values = torch.cat((past[0], kh), dim=2), torch.cat((past[1], vh), dim=2)
            out = self._attend(qh, keys, values, mask)
        return self.o_proj(out.transpose(1, 2).reshape(b, q, -1)), (kh, vh)

    def _attend(self, q, k, v, mask) -> torch.Tensor:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, enable_gqa=self.num_heads != self.num_kv_heads
        )
