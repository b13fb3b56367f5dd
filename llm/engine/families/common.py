"""What the family translations share."""

from __future__ import annotations


def ids(value) -> list[int]:
    """A config's token id or list of ids, as a list."""
    if value is None:
        return []
    return [int(v) for v in value] if isinstance(value, list) else [int(value)]


def prefixed(model, tied: bool = False) -> dict[str, str]:
    """Qwen2 / Qwen3 names: ours with a `model.` prefix; the LM head has none, or is the embedding."""
    names = {name: "model." + name for name in model.state_dict()}
    names["lm_head.weight"] = "model.embed_tokens.weight" if tied else "lm_head.weight"
    return names
