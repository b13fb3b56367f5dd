"""Decoding rules: which token each masked position would take, and which positions to commit now.

Committed tokens are never remasked. Three commit rules:
- fixed: the k most confident masked positions of the block (LLaDA low-confidence remasking);
- threshold: every masked position with confidence above the threshold, at least `floor` of them
  (Fast-dLLM parallel decoding; SDAR's and LLaDA2's `low_confidence_dynamic`, whose floor is the
  fixed schedule's count for the step); a threshold of 1 is the fixed rule;
- factor: the n most confident, where the i-th (1-based) needs confidence >= 1 - factor / (i + 1)
  (Fast-dLLM's factor rule); again at least `floor`.

How many tokens the fixed rule commits a step (`schedule`): "even", a block's tokens shared evenly by its
steps, the remainder first (LLaDA); "timesteps", Dream's: with t falling from 1 to 1e-3 over the steps,
a step commits the share 1 - t_next / t of the masks still left (rounded down, in float32 as Dream
computes it), and the last step all that are left.

Confidence (`confidence`) is read from a softmax over the whole vocabulary, the mask token included, as
every reference computes it: the candidate's probability, the margin between the two likeliest tokens
(Dream's topk_margin) or the negative entropy (Dream's entropy). The candidate itself is never the mask
token.
"""

from __future__ import annotations

import torch


def propose(
    logits: torch.Tensor,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    mask_id: int | None = None,
    confidence: str = "probability",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Candidate token and its confidence (softmax probability) for each row of logits [N, V].

    At temperature 0 the candidate is the argmax. Above it, the Gumbel-max trick picks a sample from
    softmax(logits / temperature) (LLaDA's `add_gumbel_noise`, in float64 as there); the confidence
    is always the model's own probability of the chosen token, over the whole vocabulary. The mask
    token itself is never a candidate: committing it would leave the position masked forever.
    """
    logits = logits.float()
    probs = torch.softmax(logits, dim=-1)
    if mask_id is not None:
        logits = logits.clone()
        logits[:, mask_id] = float("-inf")
    if temperature > 0:
        noise = torch.rand(logits.shape, dtype=torch.float64, generator=generator, device=logits.device)
        tokens = (logits.double() / temperature - torch.log(-torch.log(noise))).argmax(-1)
    else:
        tokens = logits.argmax(-1)
    if confidence == "margin":
        best = probs.topk(2, dim=-1).values
        return tokens, best[:, 0] - best[:, 1]
    if confidence == "entropy":
        return tokens, (probs * torch.log(probs + 1e-10)).sum(-1)
    return tokens, probs.gather(-1, tokens[:, None]).squeeze(-1)


# A floored token the model gives less than this at the opening is no contender: the model is not
# weighing it, so the floor leaves the reply alone. One that contends but sits under its floor is ruled
# out, and the opening, in doubt, is committed alone so that the rest of the reply follows from it
# rather than from a half-taken opening.
CONTENDER = 0.05


def floor_opening(logits: torch.Tensor, floor: dict[int, float]) -> torch.Tensor | None:
    """`logits` [N, V], whose first row is the answer's first position, with each token of `floor` that
    contends for the opening but sits under its floor ruled out there; None when no token does. In a
    shifted block-causal model that row is read from the prompt's last output, so it depends on the
    prompt alone; otherwise it is read again at every step while the opening is masked.
    """
    probs = torch.softmax(logits[0].float(), dim=-1)
    out = [t for t, f in floor.items() if CONTENDER <= probs[t] < f]
    if not out:
        return None
    logits = logits.clone()
    logits[0, out] = float("-inf")
    return logits


def timestep_count(masked: int, step: int, steps: int, eps: float = 1e-3) -> int:
    """Dream's count for `step` of `steps` with `masked` masks left."""
    if step >= steps - 1:
        return masked
    t = torch.linspace(1, eps, steps + 1, dtype=torch.float32)
    return int(torch.tensor(float(masked), dtype=torch.float32) * (1 - t[step + 1] / t[step]))


def fixed_schedule(num_masked: int, steps: int) -> list[int]:
    """Tokens to commit at each of `steps` steps: as even as possible, the remainder first."""
    base, extra = divmod(num_masked, steps)
    return [base + (1 if i < extra else 0) for i in range(steps)]


def select(
    confidence: torch.Tensor,
    *,
    k: int | None = None,
    threshold: float | None = None,
    factor: float | None = None,
    floor: int = 1,
) -> torch.Tensor:
    """Indices (into `confidence`, the masked positions of the current block) to commit this step."""
    n = confidence.numel()
    order = torch.argsort(confidence, descending=True, stable=True)
    if threshold is not None:
        count = int((confidence > threshold).sum())
    elif factor is not None:
        ranks = torch.arange(1, n + 1, device=confidence.device, dtype=confidence.dtype)
        passing = confidence[order] >= 1 - factor / (ranks + 1)
        count = int(passing.long().cumprod(0).sum())
    else:
        assert k is not None, "select needs k, threshold or factor"
        return order[:k]  # a fixed schedule may ask for none this step
    return order[: max(count, floor)]
