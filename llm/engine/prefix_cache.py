"""Prompt key/value reuse across requests, for block-diffusion and autoregressive models.

Their prompts are causal (or, for models whose blocks start at position 0, causal across blocks), so
the keys and values of a prompt's first n tokens (whole blocks) depend on those tokens alone: a later
prompt that starts the same way — the system prompt of every call, the whole conversation so far on
the next LLM call of a turn — copies them instead of recomputing them.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]


def common_prefix_len(a: tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


class PrefixCache:
    """The prompts of recently finished requests with their keys/values, least recently used out."""

    def __init__(self, capacity: int = 8, min_tokens: int = 8):
        self.capacity, self.min_tokens = capacity, min_tokens
        self.entries: OrderedDict[tuple[int, ...], KV] = OrderedDict()
        self.hits = self.reused_tokens = 0

    def store(self, tokens: list[int], kv: KV) -> None:
        if self.capacity <= 0:
            return
        key = tuple(tokens)
        self.entries[key] = kv
        self.entries.move_to_end(key)
        while len(self.entries) > self.capacity:
            self.entries.popitem(last=False)

    def lookup(self, tokens: list[int], align: int = 1) -> tuple[int, KV | None]:
        """The longest reusable prefix (at most len(tokens) - 1: the last prompt token must run, its
        output predicts the first answer token; a multiple of `align`, where the prompt is in blocks that
        see themselves whole) and its keys/values."""
        best, best_key = 0, None
        for key in self.entries:
            n = min(common_prefix_len(key, tokens), len(tokens) - 1) // align * align
            if n > best:
                best, best_key = n, key
        if best < self.min_tokens or best_key is None:
            return 0, None
        self.entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        return best, self.entries[best_key]
