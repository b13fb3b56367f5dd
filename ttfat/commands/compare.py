"""`ttfat compare`: two runs side by side."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="two runs side by side, with B/A ratios",
        description="Latency percentiles, stages and the LLM's share of the wait of two runs, with\n"
        "B/A ratios (below 1: B is faster), and quality beside them. Either run may be\n"
        "a probe run.",
        epilog="examples:\n"
        "  # the autoregressive twin\n"
        "  ttfat replay recordings/ --llm-model bundled-ar --out runs/ar\n"
        "  ttfat compare runs/demo runs/ar --html compare.html\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: ttfat compare",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("a", metavar="DIR_A")
    p.add_argument("b", metavar="DIR_B")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write the page of both runs: ratios, both CDFs on "
        "one plot, and the turns whose latency or correctness changed most",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from voice.record.runlog import read_run
    from voice.reports.summary import compare_report, summarize

    (a, saved_a), (b, saved_b) = (read_run(d) for d in (args.a, args.b))
    sa, sb = summarize(a, saved_a.get("environment")), summarize(b, saved_b.get("environment"))
    print(compare_report(sa, sb, args.a, args.b))
    if args.html:
        import sys
        from pathlib import Path

        from voice.reports.html import compare_page

        Path(args.html).write_text(compare_page([(args.a, a, sa), (args.b, b, sb)]))
        print(f"ttfat: wrote {args.html}", file=sys.stderr)
    return 0
