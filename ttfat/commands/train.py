"""`ttfat train`: train the bundled models (the options are llm/support/recipe.py's)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "train", help="train the bundled models (see python -m llm.support.recipe --help)", add_help=False
    )
    p.add_argument("train_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from llm.support.recipe import main

    main(args.train_args)
    return 0
