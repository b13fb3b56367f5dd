"""`ttfat serve`: the diffusion LLM server (options: llm/serving/server.py)."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    from llm.knobs import REQUEST_KNOBS
    from llm.serving.server import add_arguments

    p = sub.add_parser(
        "serve",
        help="the diffusion LLM server (OpenAI-compatible, streaming, batched)",
        description="Serve a model at /v1/chat/completions (stream or not, tools, the decoding knobs "
        f"{' '.join(k.field for k in REQUEST_KNOBS)}; per-request timings in ttfat_timings), /v1/models, "
        "/health (with the decoding it applies by default) and Prometheus /metrics. Binds 127.0.0.1 "
        "unless told otherwise.",
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
