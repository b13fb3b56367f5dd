"""Training speed of the bundled models' recipe: ms per step and examples per second for the AR and the
diffusion layout, side by side in one run: examples one a row (padded to the longest: how training ran
first); packed several to a row (how it ran up to now); packed, with a turn's two calls drawn together
and sharing one AR row (the second call's prompt is the first call's row) and diffusion rows without the
clean copy's last block (no noisy block sees it): how it runs now, eager and with the loss compiled
(`compile = true` in the recipe). Also the share of each batch tensor that holds real tokens, the real
tokens an example, and the step in the other autocast: bf16 where the trainer picks fp32
(`native_bf16`), and the other way round; bf16 autocast on a CPU without bf16 hardware is the slow one,
so it gets fewer timed steps (`--other-steps`). The speed-up is in examples per second (whole turns
make a batch of 32 or 33 examples).

    python bench/train_step.py [--steps 40] [--other-steps 3] [--threads 2] [--no-compile]

The recipe's two-hour budget on two CPU cores (issue 20) is spent almost all in these steps.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from llm.engine.checkpoint import native_bf16
from llm.engine.model import Transformer
from llm.engine.tokenizer import Tokenizer
from llm.support.conversations import make_examples
from llm.support.models import BUNDLED
from llm.support.recipe import RECIPE, load_recipe, stage_config
from llm.support.train import Batches, batch_loss, new_model_config, render
from voice.record.environment import cpu_name


@dataclass
class Layout:
    name: str
    packed: bool
    lean: bool  # whole turns drawn, a turn's calls in one AR row; no clean last block in diffusion rows
    compiled: bool
    bf16: bool
    warmup: int
    steps: int


def layouts(args, bf16: bool) -> list[Layout]:
    """The layouts in the order they run."""
    timed = (args.warmup, args.steps)
    runs = [
        Layout("one a row (first)", False, False, False, bf16, *timed),
        Layout("packed (before)", True, False, False, bf16, *timed),
        Layout("packed, lean (now)", True, True, False, bf16, *timed),
    ]
    runs += [] if args.no_compile else [Layout("lean, compiled", True, True, True, bf16, *timed)]
    other = "lean, fp32" if bf16 else "lean, bf16 autocast"
    return [*runs, Layout(other, True, True, False, not bf16, 1, args.other_steps)]  # eager: one warms up


def measure(stage, pairs, tok, run: Layout) -> dict:
    cfg = new_model_config(stage, tok)
    cfg.block_size = stage.block_size
    torch.manual_seed(0)
    model = Transformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=stage.lr)
    batches = Batches(pairs, cfg, stage.block_size, stage.min_t, stage.complementary, clean_tail=not run.lean)
    loss_of = torch.compile(batch_loss, dynamic=True) if run.compiled else batch_loss
    gen, order = torch.Generator().manual_seed(0), random.Random(0)  # the same draws in every layout
    times, fill, examples, tokens = [], [], 0, 0  # seconds a step; share of each batch that holds tokens
    for step in range(run.warmup + run.steps):
        if run.lean:
            idx = batches.draw(order, stage.batch_size)
        else:  # examples one by one, as the trainer drew them before
            idx = [order.randrange(len(pairs)) for _ in range(stage.batch_size)]
        batch = batches.make(idx, gen, run.packed)
        batch.pop("segments")
        real = batch["ids"] != cfg.pad_token_id
        fill.append(float(real.float().mean()))  # the rest is padding
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=run.bf16):
            loss = loss_of(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= run.warmup:
            times.append(time.perf_counter() - start)
            examples += len(idx)
            tokens += int(real.sum())
    return {
        "ms": 1000 * statistics.mean(times),
        "examples_s": examples / sum(times),
        "fill": statistics.mean(fill),
        "tokens": tokens / examples,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=40, help="timed steps per layout (batches differ in width)")
    p.add_argument("--other-steps", type=int, default=3, help="timed steps in the other autocast")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (compiling, caches)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-compile", action="store_true", help="leave out the compiled run (a minute each)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    recipe = load_recipe(RECIPE)
    tok = Tokenizer(Path(BUNDLED["bundled"]))
    pairs = [render(tok, e.messages, e.target) for e in make_examples(4000, seed=0)]
    cpu = cpu_name()
    batch = stage_config(recipe, recipe.stages[0], Path("unused")).batch_size
    bf16 = native_bf16("cpu")
    autocast = "bf16 autocast (the CPU computes in bf16)" if bf16 else "fp32 (no bf16 hardware on this CPU)"
    print(f"{cpu}, {args.threads} threads, torch {torch.__version__}; batch {batch}, {args.steps} steps each")
    print(f"the trainer's autocast here: {autocast}")
    head = ("stage", "layout", "ms/step", "examples/s", "real tokens", "tokens/ex", "speed-up")
    print("{:<10} {:<20} {:>8} {:>11} {:>12} {:>10} {:>9}".format(*head))
    for stage in recipe.stages:
        tc = stage_config(recipe, stage, Path("unused"))
        base = None
        for run in layouts(args, bf16):
            r = measure(tc, pairs, tok, run)
            base = base or r["examples_s"]
            speed = r["examples_s"] / base
            row = (stage.name, run.name, r["ms"], r["examples_s"], 100 * r["fill"], r["tokens"], speed)
            print("{:<10} {:<20} {:8.0f} {:11.1f} {:11.0f}% {:10.1f} {:8.2f}x".format(*row))


if __name__ == "__main__":
    main()
