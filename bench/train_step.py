"""Training speed of the bundled models' recipe: ms per step and examples per second for the AR and the
diffusion layout, with examples one a row (padded to the longest: how training ran before) and packed
several to a row, each eager and with the loss compiled (`compile = true` in the recipe), side by side
in one run on the same batches. Also the share of each batch tensor that holds real tokens, and the
packed eager step in the other autocast: bf16 where the trainer picks fp32 (`native_bf16`), and
the other way round; bf16 autocast was always on before, which on a CPU without bf16 hardware is the
slow one, so it gets fewer timed steps (`--other-steps`).

    python bench/train_step.py [--steps 20] [--other-steps 3] [--threads 2] [--no-compile]

The recipe's two-hour budget on two CPU cores (issue 20) is spent almost all in these steps.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import torch

from llm.engine.checkpoint import native_bf16
from llm.engine.model import Transformer
from llm.engine.tokenizer import Tokenizer
from llm.support.dataset import make_examples
from llm.support.models import BUNDLED
from llm.support.recipe import RECIPE, load_recipe, stage_config
from llm.support.train import Batches, batch_loss, new_model_config, render
from voice.environment import cpu_name


def layouts(args, bf16: bool) -> list[tuple[str, bool, bool, bool, int, int]]:
    """(name, packed, compiled, bf16 autocast, untimed steps, timed steps) in the order they run."""
    timed = (args.warmup, args.steps)
    runs = [("one a row (before)", False, False, bf16, *timed), ("packed", True, False, bf16, *timed)]
    runs += [] if args.no_compile else [("packed, compiled", True, True, bf16, *timed)]
    other = "packed, fp32" if bf16 else "packed, bf16 autocast"
    return [*runs, (other, True, False, not bf16, 1, args.other_steps)]  # eager: one step warms it up


def measure(stage, pairs, tok, packed: bool, compiled: bool, bf16: bool, warmup: int, steps: int) -> dict:
    cfg = new_model_config(stage, tok)
    cfg.block_size = stage.block_size
    torch.manual_seed(0)
    model = Transformer(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=stage.lr)
    batches = Batches(pairs, cfg, stage.block_size, stage.min_t, stage.complementary)
    loss_of = torch.compile(batch_loss, dynamic=True) if compiled else batch_loss
    gen, order = torch.Generator().manual_seed(0), random.Random(0)  # the same batches in every layout
    times, fill = [], []  # seconds a step; share of each [rows, width] batch that holds tokens
    for step in range(warmup + steps):
        batch = batches.make([order.randrange(len(pairs)) for _ in range(stage.batch_size)], gen, packed)
        batch.pop("segments")
        fill.append(float((batch["ids"] != cfg.pad_token_id).float().mean()))  # the rest is padding
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_of(model, batch)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step >= warmup:
            times.append(time.perf_counter() - start)
    ms = 1000 * statistics.median(times)
    return {"ms": ms, "examples_s": stage.batch_size / ms * 1000, "fill": statistics.mean(fill)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20, help="timed steps per layout")
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
    print(f"{cpu}, {args.threads} threads, torch {torch.__version__}; batch {batch}, median of {args.steps}")
    print(f"the trainer's autocast here: {autocast}")
    head = ("stage", "layout", "ms/step", "examples/s", "real tokens", "speed-up")
    print("{:<10} {:<20} {:>8} {:>11} {:>12} {:>9}".format(*head))
    for stage in recipe.stages:
        tc = stage_config(recipe, stage, Path("unused"))
        base = None
        for name, *run in layouts(args, bf16):
            r = measure(tc, pairs, tok, *run)
            base = base or r["ms"]
            row = (stage.name, name, r["ms"], r["examples_s"], 100 * r["fill"], base / r["ms"])
            print("{:<10} {:<20} {:8.0f} {:11.1f} {:11.0f}% {:8.2f}x".format(*row))


if __name__ == "__main__":
    main()
