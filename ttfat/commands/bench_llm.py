"""`ttfat bench-llm`: load-test OpenAI-compatible endpoints with support-line conversations."""

from __future__ import annotations

import argparse

from ttfat.decoding import add_decoding_args, decoding_knobs


def add_parser(sub) -> None:
    p = sub.add_parser(
        "bench-llm",
        help="load-test OpenAI-compatible endpoints: TTFT / TTFAT percentiles, tokens/s, errors",
        description="Held-out support-line conversations at concurrency 1, 2, 4, 8, 16 against each --url "
        "(compare two servers in one run), or against the bundled model on a local server started for "
        "the run.",
    )
    p.add_argument("--url", action="append", help="base URL such as http://127.0.0.1:8000/v1 (repeatable)")
    p.add_argument("--model", default="bundled", help="model for the local server when no --url is given")
    p.add_argument("--api-key", default="none")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--requests-per-worker", type=int, default=6)
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
        bench(urls, answer_prompts(), args.levels, args.requests_per_worker, args.api_key,
              request_fields(decoding_knobs(args)), args.min_requests)  # fmt: skip
    return 0
