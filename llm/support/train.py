"""One training stage of the bundled support-line models (run by `recipe.py`: `ttfat train`).

Stage 1 (`--block-size 1`) trains an autoregressive model from scratch: next-token loss on the
assistant's reply. Stage 2 (`--block-size 8 --init DIR`) adapts those weights to block diffusion,
keeping the shift by one so the AR head is reused (the route of Dream and Fast-dLLM v2; block
diffusion from scratch never learned to copy order numbers on this CPU: the model card,
`weights/README.md`, says more).

A diffusion training sequence is [prompt | clean answer | noisy answer]: the clean and noisy copies
share positions; the prompt is causal (so its keys equal the inference cache), clean block k sees the
prompt and clean blocks <= k, noisy block k sees the prompt, clean blocks < k and itself. A masked
token at answer offset o is predicted from the output at o - 1: the noisy copy's, or for a block's
first token the clean copy's last token before it — exactly what the engine computes when decoding.
With `--complementary` a second noisy copy masks exactly the tokens the first left visible.

Every example starts with the same system prompt; its keys/values are computed once per batch and
shared (exact: the prompt is causal), which halves the work on this 2-core CPU.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm

from llm.engine.checkpoint import load_checkpoint, native_bf16, save_checkpoint
from llm.engine.config import ModelConfig
from llm.engine.model import Transformer
from llm.engine.prefix_cache import common_prefix_len
from llm.engine.tokenizer import Tokenizer
from llm.support.bpe import save_tokenizer, train_tokenizer
from llm.support.conversations import make_examples
from llm.support.policy import FILLERS, SYSTEM_PROMPT

# A reply may open with a tool call's filler word only when the model gives it at least this probability
# (GenerationParams.opening_floor). Read off the shipped models on the development slice of the real
# out-of-scope queries (400 to 1,200): 16 of the 47 that drew a tool call opened it below 0.8, and no
# held-out tool call of 794 in one draw did; the evaluation's draw loses 1 of 782 (model card).
OPENING_FLOOR = 0.8


@dataclass
class TrainConfig:
    out: Path
    block_size: int = 1
    init: Path | None = None
    steps: int = 2000
    batch_size: int = 32
    lr: float = 6e-4
    warmup: int = 50
    weight_decay: float = 0.1
    examples: int = 60000
    seed: int = 0
    hidden_size: int = 256
    num_layers: int = 6
    num_heads: int = 4
    intermediate_size: int = 768
    vocab_size: int = 1024
    min_t: float = 0.05
    complementary: bool = False
    tokenizer_examples: int = 20000
    save_every: int = 200
    bf16: bool | None = None  # bf16 autocast; None: where the hardware computes in bf16 (native_bf16)
    compile: bool = False  # torch.compile the loss: ~1.3x the steps/s here, after a minute compiling
    device: str = "cpu"


def render(tok: Tokenizer, messages: list[dict], target: dict) -> tuple[list[int], list[int]]:
    prompt = tok.encode_chat(messages)
    full = tok.encode_chat([*messages, target], add_generation_prompt=False)
    assert full[: len(prompt)] == prompt, "chat template does not extend the prompt"
    return prompt, full[len(prompt) :]


def build_tokenizer(out: Path, seed: int, n: int = 20000) -> Tokenizer:
    """Train the BPE on rendered training conversations (the template is needed to render them)."""
    save_tokenizer(train_tokenizer([]), out, SYSTEM_PROMPT)  # the chat template, to render with
    tok = Tokenizer(out)
    texts = [
        tok.apply_chat_template([*e.messages, e.target], add_generation_prompt=False)
        for e in make_examples(n, seed=seed + 1000)
    ]
    save_tokenizer(train_tokenizer(texts), out, SYSTEM_PROMPT)
    return Tokenizer(out)


def common_prefix(seqs: list[list[int]]) -> int:
    return min(common_prefix_len(tuple(seqs[0]), s) for s in seqs)


def first_fit(lengths: list[int], capacity: int) -> list[list[int]]:
    """Indices grouped into bins whose lengths sum to at most ``capacity``: first fit, longest first."""
    bins: list[list[int]] = []
    free: list[int] = []
    for j in sorted(range(len(lengths)), key=lambda j: -lengths[j]):
        k = next((k for k, f in enumerate(free) if f >= lengths[j]), len(bins))
        if k == len(bins):
            bins.append([])
            free.append(capacity)
        bins[k].append(j)
        free[k] -= lengths[j]
    return bins


def turn_chains(pairs: list[tuple[list[int], list[int]]]) -> list[list[int]]:
    """Runs of consecutive examples each of whose prompt begins with the one before it, reply included
    (a data turn's second call sees the first call's tool call): the examples that can share one
    autoregressive row. Every example is in exactly one run, in order."""
    chains: list[list[int]] = []
    for i, (prompt, _) in enumerate(pairs):
        before = pairs[i - 1][0] + pairs[i - 1][1] if i else None
        if before is not None and prompt[: len(before)] == before:
            chains[-1].append(i)
        else:
            chains.append([i])
    return chains


class Batches:
    """Encoded examples -> packed tensors for one stage (AR or block diffusion)."""

    def __init__(
        self,
        pairs: list[tuple[list[int], list[int]]],
        cfg: ModelConfig,
        block: int,
        min_t: float,
        complementary: bool = False,
        clean_tail: bool = False,
    ):
        """`complementary`: a second noisy copy masks exactly what the first left visible, so every
        answer token is trained on in every example (Fast-dLLM v2's complementary masks).
        `clean_tail`: keep the clean copy's last block, which no noisy block sees (rows were built so
        before; it changes no loss, and bench/train_step.py times both)."""
        self.pairs, self.cfg, self.block, self.min_t = pairs, cfg, block, min_t
        self.complementary, self.clean_tail = complementary, clean_tail
        self.shared = common_prefix([p for p, _ in pairs]) - 1  # keep >= 1 own prompt token each
        self.eos = cfg.eos_token_ids[0]
        self.chains = turn_chains(pairs)
        self._chain_of = {i: c for c in self.chains for i in c}

    def draw(self, rng: random.Random, n: int) -> list[int]:
        """Whole turns (`turn_chains`) at random until there are at least ``n`` examples: each example
        as likely as before, and a turn's calls arrive together so an AR row can hold them once."""
        idx: list[int] = []
        while len(idx) < n:
            idx += self.chains[rng.randrange(len(self.chains))]
        return idx

    def make(self, idx: list[int], gen: torch.Generator, packed: bool = True) -> dict:
        """The examples ``idx`` packed into as few rows as the longest of them allows (``packed=False``:
        one a row, padded to the longest, which left half of a batch padding). Examples in one row see
        the shared prompt and themselves only; ``src`` indexes the flattened rows, and ``segments``
        says where each example went: (row, offset, number of labels), labels in example order.
        Packed AR rows also hold a turn's calls once (`turn_chains`): the second call's prompt is the
        first call's row, so its tokens are not computed twice (a quarter of an AR batch's tokens)."""
        units = self._units(idx) if packed and self.block == 1 else [[j] for j in range(len(idx))]
        rows = [self._row(*self.pairs[idx[u[-1]]], gen) for u in units]
        lengths = [len(r["ids"]) for r in rows]
        n, s = max(lengths), self.shared
        bins = first_fit(lengths, n) if packed else [[j] for j in range(len(rows))]
        b = len(bins)
        ids = torch.full((b, n), self.cfg.pad_token_id)
        pos = torch.zeros((b, n), dtype=torch.long)
        mask = torch.zeros((b, 1, n, s + n), dtype=torch.bool)
        mask[:, 0, torch.arange(n), s + torch.arange(n)] = True  # padding sees itself
        placed = [(0, 0)] * len(rows)
        for i, members in enumerate(bins):
            at = 0
            for j in members:
                r, m = rows[j], len(rows[j]["ids"])
                ids[i, at : at + m], pos[i, at : at + m] = r["ids"], r["pos"]
                mask[i, 0, at : at + m, :s] = True
                mask[i, 0, at : at + m, s + at : s + at + m] = r["mask"]
                placed[j] = (i, at)
                at += m
        src, labels, segments = [None] * len(idx), [None] * len(idx), [(0, 0, 0)] * len(idx)
        for u, r, (i, at) in zip(units, rows, placed, strict=True):
            for j, (own_src, own_labels) in zip(u, self._members(u, idx, r), strict=True):
                src[j], labels[j], segments[j] = i * n + at + own_src, own_labels, (i, at, len(own_labels))
        return {
            "prefix": torch.tensor([self.pairs[0][0][:s]]),
            "ids": ids,
            "pos": pos,
            "mask": mask,
            "src": torch.cat(src),
            "labels": torch.cat(labels),
            "segments": segments,
        }

    def _units(self, idx: list[int]) -> list[list[int]]:
        """Positions in ``idx`` grouped into one row each: a turn's consecutive calls together."""
        units: list[list[int]] = []
        for j, e in enumerate(idx):
            if units and idx[units[-1][-1]] == e - 1 and e - 1 in self._chain_of[e]:
                units[-1].append(j)
            else:
                units.append([j])
        return units

    def _members(self, unit: list[int], idx: list[int], row: dict) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(src, labels) of each example of a row; earlier calls of a turn are read off the last one's
        causal row at their own answer's place (their prompt and reply are its first tokens)."""
        if len(unit) == 1:
            return [(row["src"], row["labels"])]
        out = []
        for j in unit:
            prompt, answer = self.pairs[idx[j]]
            start = len(prompt) - self.shared
            out.append((torch.arange(start - 1, start - 1 + len(answer)), torch.tensor(answer)))
        return out

    def _row(self, prompt: list[int], answer: list[int], gen: torch.Generator) -> dict:
        s, p = self.shared, len(prompt)
        own = torch.tensor(prompt[s:])
        if self.block == 1:  # autoregressive: causal over prompt + answer, next-token labels
            seq = torch.tensor(prompt[s:] + answer)
            m = len(seq)
            return {
                "ids": seq,
                "pos": torch.arange(s, s + m),
                "mask": torch.ones(m, m, dtype=torch.bool).tril(),
                "src": torch.arange(len(own) - 1, m - 1),
                "labels": torch.tensor(answer),
            }
        b = self.block
        a = math.ceil(len(answer) / b) * b
        clean = torch.tensor(answer + [self.eos] * (a - len(answer)))
        t = torch.rand(a // b, generator=gen).clamp(min=self.min_t).repeat_interleave(b)
        masked = torch.rand(a, generator=gen) < t
        copies = [masked, ~masked] if self.complementary else [masked]
        q, c0 = len(own), a if self.clean_tail else a - b  # no noisy block sees the clean last block
        noisy = [torch.where(m, self.cfg.mask_token_id, clean) for m in copies]
        ids = torch.cat((own, clean[:c0], *noisy))
        noisy_pos = [torch.arange(p, p + a)] * len(copies)
        pos = torch.cat((torch.arange(s, p), torch.arange(p, p + c0), *noisy_pos))
        # prompt causal; clean block k sees prompt + clean <= k; noisy k sees prompt + clean < k + noisy k
        blk = torch.arange(a) // b
        m = q + c0 + len(copies) * a
        mask = torch.zeros(m, m, dtype=torch.bool)
        mask[:q, :q] = torch.ones(q, q, dtype=torch.bool).tril()
        mask[q:, :q] = True
        mask[q : q + c0, q : q + c0] = blk[None, :c0] <= blk[:c0, None]
        src, labels = [], []
        for c, chosen in enumerate(copies):
            lo = q + c0 + c * a
            mask[lo : lo + a, q : q + c0] = blk[None, :c0] < blk[:, None]
            mask[lo : lo + a, lo : lo + a] = blk[None, :] == blk[:, None]
            offsets = torch.nonzero(chosen).flatten()
            first = offsets % b == 0  # a block's first token is read from the clean copy
            src.append(torch.where(first, q + offsets - 1, lo + offsets - 1))
            labels.append(clean[offsets])
        return {"ids": ids, "pos": pos, "mask": mask, "src": torch.cat(src), "labels": torch.cat(labels)}


def batch_logits(model: Transformer, batch: dict) -> torch.Tensor:
    """Logits [labels, V] at the labelled positions; the shared system prompt runs once per batch."""
    prefix = batch["prefix"]
    s = prefix.shape[1]
    causal = torch.ones(s, s, dtype=torch.bool).tril()[None, None]
    _, kv = model(prefix, torch.arange(s)[None], causal)
    b = batch["ids"].shape[0]
    past = [(k.expand(b, -1, -1, -1), v.expand(b, -1, -1, -1)) for k, v in kv]
    hidden, _ = model(batch["ids"], batch["pos"], batch["mask"], past)
    return model.logits(hidden.flatten(0, 1)[batch["src"]])


def batch_loss(model: Transformer, batch: dict) -> torch.Tensor:
    logits = batch_logits(model, batch)
    return F.cross_entropy(logits, batch["labels"])


def new_model_config(tc: TrainConfig, tok: Tokenizer) -> ModelConfig:
    ids = {t: tok.token_to_id(t) for t in ("<|mask|>", "<|eos|>", "<|pad|>")}
    return ModelConfig(
        vocab_size=tok.vocab_size,
        hidden_size=tc.hidden_size,
        num_layers=tc.num_layers,
        num_heads=tc.num_heads,
        num_kv_heads=tc.num_heads,
        intermediate_size=tc.intermediate_size,
        mask_token_id=ids["<|mask|>"],
        eos_token_ids=[ids["<|eos|>"]],
        pad_token_id=ids["<|pad|>"],
        attention="block",
        block_size=1,
        shift_logits=True,
        max_position=1024,
    )


def train(tc: TrainConfig) -> dict:
    """Train one stage into ``tc.out`` (resuming from its last checkpoint there); return what the run
    was: steps, seconds (over all runs of the stage), threads and device."""
    torch.manual_seed(tc.seed)
    random.seed(tc.seed)
    tc.out.mkdir(parents=True, exist_ok=True)
    if tc.init is not None:
        ckpt = load_checkpoint(tc.init, device="cpu", dtype=torch.float32)
        model, tok = ckpt.model.train(), ckpt.tokenizer
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (tc.out / name).write_bytes((tc.init / name).read_bytes())
    else:
        tok = build_tokenizer(tc.out, tc.seed, tc.tokenizer_examples)
        model = Transformer(new_model_config(tc, tok))
        for p in model.parameters():
            if p.dim() > 1:
                torch.nn.init.normal_(p, std=0.02)
    cfg = model.config
    cfg.block_size = tc.block_size
    decoding = {"threshold": 0.9} if tc.block_size > 1 else {}
    openings = sorted({tok.encode(filler)[0] for filler in FILLERS.values()})  # a tool call's first word
    cfg.extra["generation"] = {**decoding, "opening_floor": {str(t): OPENING_FLOOR for t in openings}}
    examples = make_examples(tc.examples, seed=tc.seed)
    pairs = [render(tok, e.messages, e.target) for e in examples]
    batches = Batches(pairs, cfg, tc.block_size, tc.min_t, tc.complementary)
    model.to(tc.device)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=tc.weight_decay, betas=(0.9, 0.95))
    state_file = tc.out / "train_state.pt"
    step, seconds = 0, 0.0
    gen = torch.Generator().manual_seed(tc.seed)  # the masks
    order = random.Random(tc.seed)  # the batches
    if state_file.exists():  # resume where the last checkpoint left off: same batches and masks next
        state = torch.load(state_file, weights_only=False, map_location=tc.device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, seconds = state["step"], state.get("seconds", 0.0)
        gen.set_state(state["masks"])
        order.setstate(state["batches"])
    loss_of = torch.compile(batch_loss, dynamic=True) if tc.compile else batch_loss
    log_file = tc.out / "train_log.jsonl"
    if log_file.exists():  # steps logged after the checkpoint run again: keep them once
        kept = [line for line in log_file.read_text().splitlines() if json.loads(line)["step"] <= step]
        log_file.write_text("".join(line + "\n" for line in kept))
    log = log_file.open("a")  # noqa: SIM115 (closed below)
    bf16 = native_bf16(tc.device) if tc.bf16 is None else tc.bf16
    started = time.monotonic()
    bar = tqdm(total=tc.steps, initial=step, desc=f"train block={tc.block_size}", unit="step")
    while step < tc.steps:
        lr = tc.lr * min(1.0, (step + 1) / tc.warmup) * 0.5 * (1 + math.cos(math.pi * step / tc.steps))
        for group in opt.param_groups:
            group["lr"] = lr
        idx = batches.draw(order, tc.batch_size)
        batch = {k: v.to(tc.device) for k, v in batches.make(idx, gen).items() if k != "segments"}
        with torch.autocast(torch.device(tc.device).type, dtype=torch.bfloat16, enabled=bf16):
            loss = loss_of(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.4f}")
        log.write(json.dumps({"step": step, "loss": round(loss.item(), 5), "lr": lr}) + "\n")
        if step % tc.save_every == 0 or step == tc.steps:
            log.flush()  # every step up to the checkpoint is logged before it is saved
            done = seconds + time.monotonic() - started
            state = {
                "model": model.state_dict(),
                "optimizer": opt.state_dict(),
                "step": step,
                "seconds": done,
                "masks": gen.get_state(),
                "batches": order.getstate(),
            }
            torch.save(state, state_file)
            save_checkpoint(model, tc.out)
    bar.close()
    log.close()
    return {
        "steps": step,
        "seconds": round(seconds + time.monotonic() - started, 1),  # what the last save recorded
        "threads": torch.get_num_threads(),
        "autocast": "bfloat16" if bf16 else "float32",
        "device": torch.cuda.get_device_name(tc.device) if tc.device.startswith("cuda") else "cpu",
    }
