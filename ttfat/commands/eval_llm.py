"""`ttfat eval-llm`: tool-call and answer accuracy of the bundled models against decoding settings."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval-llm",
        help="tool-call and answer accuracy against decoding settings",
        description="Evaluate a support-line model on held-out calls and real out-of-scope queries,\n"
        "sweeping threshold / block length / fixed steps, with tokens per forward and\n"
        "time per answer: tool-call and answer-fact accuracy with 95% intervals, the\n"
        "invented-fact rate, and the steps-vs-quality sweep (a table, eval.json and a\n"
        "plot in --out).",
        epilog="examples:\n"
        "  ttfat eval-llm\n"
        "  ttfat eval-llm -n 2000 --default-only  # figures to about +-1.5 points\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: ttfat eval-llm",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="bundled", help="bundled, bundled-ar or a checkpoint dir")
    p.add_argument("--ar-model", default="bundled-ar", help="autoregressive twin to compare (or 'none')")
    p.add_argument("-n", type=int, default=300, help="held-out model calls per setting (default 300)")
    p.add_argument(
        "--default-only",
        action="store_true",
        help="only the default decoding setting (and the twin): with -n 2000 the tool-call figure is "
        "known to about +-1.5 points instead of +-4",
    )
    p.add_argument(
        "--out-of-scope",
        type=int,
        default=400,
        metavar="N",
        help="real out-of-scope queries asked (default %(default)s)",
    )
    p.add_argument("--out", default="runs/eval-llm", help="where eval.json and the plot go")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from llm.serving.models import model_dir
    from llm.support.evaluate import sweep

    ar = None if args.ar_model == "none" else model_dir(args.ar_model)
    sweep(
        model_dir(args.model),
        ar,
        args.n,
        Path(args.out),
        default_only=args.default_only,
        out_of_scope=args.out_of_scope,
    )
    return 0
