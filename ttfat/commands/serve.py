"""`ttfat serve`: the diffusion LLM server (options: llm/serving/server.py)."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    from llm.serving.server import add_arguments

    p = sub.add_parser(
        "serve",
        help="the diffusion LLM server (OpenAI-compatible)",
        description="Serve a model at /v1/chat/completions: streaming or not, tools,\n"
        "reasoning_content, and the decoding knobs (those of ttfat generate --help,\n"
        "named without dashes) as extra fields next to OpenAI's max_tokens, temperature\n"
        "and seed; per-request timings in ttfat_timings. Also /v1/models, /health (with\n"
        "the decoding it applies by default) and Prometheus /metrics. Binds 127.0.0.1\n"
        "unless told otherwise.",
        epilog="examples:\n"
        "  ttfat serve  # the bundled model on http://127.0.0.1:8000/v1\n"
        "  ttfat serve --model bundled-ar --port 8001\n"
        "  ttfat serve --api-key secret --max-concurrent 8\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: ttfat serve, its answers to bad requests",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", default="bundled", help="bundled, bundled-ar or a checkpoint directory")
    add_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from llm.serving.models import model_dir, served_name
    from llm.serving.server import config_from_args, serve

    config = config_from_args(args, model_dir(args.model), served_name(args.model))
    print(f"ttfat: serving {args.model} on http://{config.host}:{config.port}/v1", file=sys.stderr)
    serve(config)
    return 0
