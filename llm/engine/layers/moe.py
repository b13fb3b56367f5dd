"""A sigmoid-routed mixture of experts with group-limited top-k and a shared expert (LLaDA2, after
DeepSeek-V3); `config.MoE` says how it routes. The router runs in float32; each chosen expert runs on
the tokens routed to it only."""

from __future__ import annotations

import torch
from torch import nn

from llm.engine.config import MoE
from llm.engine.layers.mlp import SwiGLU


class Router(nn.Module):
    def __init__(self, hidden: int, experts: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(experts, hidden))
        self.register_buffer("expert_bias", torch.zeros(experts))  # for choosing experts only

    def forward(self, x: torch.Tensor, moe: MoE) -> tuple[torch.Tensor, torch.Tensor]:
        """x [T, hidden] -> (the chosen experts [T, per_token], their weights [T, per_token])."""
        scores = torch.sigmoid(x.float() @ self.weight.float().T)
        biased = scores + self.expert_bias.float()
        grouped = biased.view(len(x), moe.groups, -1)
        best_groups = grouped.topk(2, dim=-1).values.sum(-1).topk(moe.topk_groups, dim=-1).indices
        kept = torch.zeros_like(grouped[..., 0], dtype=torch.bool).scatter_(1, best_groups, True)
        biased = biased.masked_fill(~kept.repeat_interleave(grouped.shape[-1], dim=1), float("-inf"))
        chosen = biased.topk(moe.per_token, dim=-1).indices
        weights = scores.gather(1, chosen)
        return chosen, weights / (weights.sum(-1, keepdim=True) + 1e-20) * moe.scaling


class MixtureOfExperts(nn.Module):
    def __init__(self, hidden: int, moe: MoE):
        super().__init__()
        self.moe = moe
        self.gate = Router(hidden, moe.experts)
        self.experts = nn.ModuleList(SwiGLU(hidden, moe.size) for _ in range(moe.experts))
        self.shared_experts = SwiGLU(hidden, moe.size * moe.shared) if moe.shared else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])
        chosen, weights = self.gate(flat, self.moe)
        out = torch.zeros(flat.shape, dtype=torch.float32, device=x.device)
        for e in chosen.unique().tolist():
            rows, slot = torch.nonzero(chosen == e, as_tuple=True)
            out.index_add_(0, rows, weights[rows, slot, None] * self.experts[e](flat[rows]).float())
        out = out.to(x.dtype)
        if self.shared_experts is not None:
            out = out + self.shared_experts(flat)
        return out.view(x.shape)
