"""`ttfat train`: train the bundled models (the options are llm/support/recipe.py's)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser(  # no help of its own: `ttfat train --help` is the recipe's (llm/support/recipe.py)
        "train", help="train the bundled models from scratch (ttfat train --help)", add_help=False
    )
    p.add_argument("train_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from llm.support.recipe import main

    main(args.train_args)
    return 0
