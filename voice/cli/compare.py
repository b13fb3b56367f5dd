"""`ttfat compare`: two runs side by side."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="two runs side by side with ratios (e.g. diffusion vs autoregressive twin)",
        description="Latency percentiles, stages and the LLM's share of the wait of two runs, with B/A "
        "ratios (below 1: B is faster), and quality beside them. "
        "Example: ttfat replay recordings/ --llm-model bundled-ar --out runs/ar; "
        "ttfat compare runs/demo runs/ar",
    )
    p.add_argument("a", metavar="DIR_A")
    p.add_argument("b", metavar="DIR_B")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voice.report import compare_report, summarize
    from voice.runlog import read_run

    (a, _), (b, _) = (read_run(d) for d in (args.a, args.b))
    print(compare_report(summarize(a), summarize(b), args.a, args.b))
    return 0
