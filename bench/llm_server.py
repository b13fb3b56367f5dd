"""Server under load (issue 4 targets): at concurrency 8, TTFAT p95 <= 2x concurrency 1 and aggregate
tokens/s >= 4x; HTTP overhead (client TTFAT - engine TTFAT) <= 5 ms at p50.

    python bench/llm_server.py [--model bundled] [--requests-per-worker 8] [--dtype bfloat16] [--threads 1]
"""

from __future__ import annotations

import argparse
import os

import torch

from llm.serving.loadgen import bench
from llm.serving.models import model_dir, served_name
from llm.serving.process import ServerProcess
from llm.support.conversations import answer_prompts
from llm.support.models import register_bundled
from voice.record.environment import cpu_name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--requests-per-worker", type=int, default=8)
    ap.add_argument("--min-requests", type=int, default=64, help="per level, so that p95 is not one request")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), help="the server's (default: its own)")
    ap.add_argument("--threads", type=int, help="the server's CPU threads (default: its own)")
    args = ap.parse_args()
    register_bundled()
    print(f"# server bench: {cpu_name()}, torch {torch.__version__}")
    print(
        f"# model {args.model}, dtype {args.dtype or 'default'}, threads {args.threads or 'default'}; "
        "server in its own process"
    )
    print(f"# client and server share this machine's {os.cpu_count()} cores")
    with ServerProcess(
        model_dir(args.model), served_name(args.model), dtype=args.dtype, threads=args.threads
    ) as url:
        levels = bench(
            [url],
            answer_prompts(),
            (1, 2, 4, 8, 16),
            args.requests_per_worker,
            min_requests=args.min_requests,
        )
        rows = {r["concurrency"]: r for r in levels[url]}
    c1, c8 = rows[1], rows[8]
    print(f"\nTTFAT p95 at 8 / at 1: {c8['ttfat_p95'] / c1['ttfat_p95']:.2f} (target <= 2)")
    print(f"tokens/s at 8 / at 1:  {c8['tokens_per_s'] / c1['tokens_per_s']:.2f} (target >= 4)")
    print(f"HTTP overhead p50 at 1: {c1['http_overhead_p50_ms']:.2f} ms (target <= 5)")


if __name__ == "__main__":
    main()
