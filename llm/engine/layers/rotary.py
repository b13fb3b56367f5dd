"""Rotary position embedding in the Llama "rotate half" convention (shared by LLaDA and Qwen2/Dream).

Positions are explicit per token so that a batch can mix sequences of different lengths and a query
block can sit anywhere after its cached keys. The model computes the cos/sin tables once per forward
pass and every layer applies them.
"""

import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        self.head_dim, self.theta = head_dim, theta

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """positions: [batch, seq] -> (cos, sin), each [batch, 1, seq, head_dim / 2], float32."""
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.float64, device=positions.device)
        inv_freq = (1.0 / self.theta ** (exponents / self.head_dim)).float()
        angles = positions.float()[:, None, :, None] * inv_freq
        return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """x: [batch, heads, seq, head_dim], rotated in float32; a rope for fewer dims than the head's rotates
    the first ones and passes the rest (partial rotary, LLaDA2)."""
    cos, sin = rope
    rotated = 2 * cos.shape[-1]
    x1, x2 = x[..., :rotated].float().chunk(2, dim=-1)
    out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
    return out if rotated == x.shape[-1] else torch.cat((out, x[..., rotated:]), dim=-1)
