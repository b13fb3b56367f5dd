"""`ttfat bench-llm`: load-test OpenAI-compatible endpoints with support-line conversations."""

from __future__ import annotations

import argparse

from ttfat.decoding import add_decoding_args, decoding_knobs


def add_parser(sub) -> None:
    p = sub.add_parser(
        "bench-llm",
        help="load-test OpenAI-compatible endpoints (TTFT, TTFAT, tok/s)",
        description="Held-out support-line conversations at concurrency 1, 2, 4, 8, 16 against each\n"
        "--url (compare two servers in one run), or against the bundled model on a\n"
        "local server started for the run: TTFT / TTFAT p50 p95 p99, tokens/s, errors\n"
        "and HTTP overhead per level (the official openai client, asyncio). The\n"
        "decoding knobs are sent with each request.",
        epilog="examples:\n"
        "  ttfat bench-llm  # the bundled model, on a server it starts\n"
        "  ttfat bench-llm --url http://127.0.0.1:8000/v1 --url http://127.0.0.1:8001/v1\n"
        "  ttfat bench-llm --levels 1 4 16 --min-requests 48\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: ttfat bench-llm",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--url", action="append", help="base URL such as http://127.0.0.1:8000/v1 (repeatable)")
    p.add_argument("--model", default="bundled", help="model for the local server when no --url is given")
    p.add_argument("--api-key", default="none", help="the endpoints' API key")
    p.add_argument(
        "--levels",
        type=int,
        nargs="+",
        default=[1, 2, 4, 8, 16],
        help="concurrency levels (default: 1 2 4 8 16)",
    )
    p.add_argument(
        "--requests-per-worker",
        type=int,
        default=6,
        help="each level sends concurrency x this many requests (default 6), at least --min-requests",
    )
    p.add_argument("--min-requests", type=int, default=24, help="at least this many per level (default 24)")
    add_decoding_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import contextlib

    from llm.knobs import request_fields
    from llm.serving.loadgen import bench
    from llm.serving.models import model_dir, served_name
    from llm.serving.process import ServerProcess
    from llm.support.conversations import answer_prompts

    with contextlib.ExitStack() as stack:
        urls = args.url or [
            stack.enter_context(ServerProcess(model_dir(args.model), served_name(args.model)))
        ]
        bench(
            urls,
            answer_prompts(),
            args.levels,
            args.requests_per_worker,
            args.api_key,
            request_fields(decoding_knobs(args)),
            args.min_requests,
        )
    return 0
