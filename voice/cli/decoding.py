"""The decoding options of the commands that run the engine in-process (`generate`, `ask`); their
defaults are GenerationParams' (None: the model's own default)."""

from __future__ import annotations

import argparse


def add_decoding_args(p: argparse.ArgumentParser) -> None:
    from llm.engine.params import CACHE_MODES, GenerationParams

    g = p.add_argument_group("decoding (defaults come from the model)")
    g.add_argument(
        "--gen-length",
        type=int,
        default=GenerationParams.gen_length,
        help="answer canvas / token budget, rounded up to whole blocks (default %(default)s)",
    )
    g.add_argument(
        "--block-length", type=int, help="tokens per block (default: the model's block size, or 32)"
    )
    g.add_argument("--steps", type=int, help="fixed denoising steps over the canvas (LLaDA's reference rule)")
    g.add_argument(
        "--threshold", type=float, help="commit every position at least this confident (Fast-dLLM)"
    )
    g.add_argument("--factor", type=float, help="Fast-dLLM factor rule instead of a threshold")
    g.add_argument("--cache", choices=CACHE_MODES, help="key/value cache mode")
    g.add_argument("--temperature", type=float, default=GenerationParams.temperature,
                   help="0 = greedy (default %(default)s)")  # fmt: skip
    g.add_argument("--seed", type=int, help="random seed for sampling at temperature > 0")
    g.add_argument("--no-early-stop", action="store_true", help="denoise the whole canvas even after EOS")


def decoding_params(args: argparse.Namespace):
    from llm.engine.params import GenerationParams

    return GenerationParams(
        gen_length=args.gen_length,
        block_length=args.block_length,
        steps=args.steps,
        threshold=args.threshold,
        factor=args.factor,
        cache=args.cache,
        temperature=args.temperature,
        seed=args.seed,
        early_stop=not args.no_early_stop,
    )


def add_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="bundled", help="bundled, bundled-ar or a checkpoint directory")
    p.add_argument("--device", help="cuda or cpu (default: cuda when available)")
