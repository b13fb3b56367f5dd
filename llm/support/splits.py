"""The train / held-out partition of phrasings, order ids and product names: a stable hash puts about
15% of each into the held-out split, which training never sees (evaluation and the sample recordings
draw from it)."""

from __future__ import annotations

import hashlib
import math

HELDOUT_FRACTION = 0.15
SPLITS = ("train", "heldout")


def stable_hash(*parts: str) -> int:
    return int(hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:12], 16)


def split_items(items: list[str], tag: str, split: str) -> list[str]:
    """Deterministic ~15% / 85% partition of a list (heldout gets at least one item)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    ranked = sorted(items, key=lambda s: (stable_hash(tag, s), s))
    k = max(1, math.ceil(HELDOUT_FRACTION * len(ranked)))
    held = set(ranked[:k])
    return [s for s in items if (s in held) == (split == "heldout")]


def in_heldout_id(order_id: str) -> bool:
    """Whether an order id (in the database or not) belongs to the heldout split."""
    return stable_hash("order_id", order_id) % 100 < round(100 * HELDOUT_FRACTION)
