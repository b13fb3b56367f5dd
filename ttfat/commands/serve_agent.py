"""`ttfat serve-agent`: our voice agent on a Twilio-compatible media-stream WebSocket."""

from __future__ import annotations

import argparse

from ttfat.stack import (
    add_mirror_args,
    add_stack_args,
    endpoints,
    mirrors_from_args,
    open_stack,
    plan_stack,
    settings_from_args,
)
from voice.pipeline.settings import SettingsError


def add_parser(sub) -> None:
    p = sub.add_parser(
        "serve-agent",
        help="our voice agent on a Twilio-compatible WebSocket",
        description="Answer calls on a WebSocket that speaks Twilio Media Streams (μ-law at 8 kHz):\n"
        "each connection is a call through the same pipeline as talk, with its records\n"
        "in --out (one per turn, on the agent's own clock; the summary when the server\n"
        "stops: Ctrl-C or SIGTERM). The first line printed is the ws:// URL served. A\n"
        "phone provider can stream a call to it (behind a public wss:// proxy), and\n"
        "ttfat probe can measure it from outside.",
        epilog="examples:\n"
        "  ttfat serve-agent --out runs/agent                 # prints its ws:// URL\n"
        "  ttfat probe ws://127.0.0.1:8765/ recordings/       # from another shell\n"
        "  ttfat serve-agent --port 0 --llm-model bundled-ar  # free port, AR twin\n"
        "\n"
        "see also:\n"
        "  docs/probe.md: serve-agent, and measuring an agent from outside",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8765, help="port (0: a free one; default %(default)s)")
    p.add_argument("--out", help="run directory (default runs/agent-DATE-TIME)")
    add_stack_args(p)
    add_mirror_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib
    import time
    from pathlib import Path

    from voice.record.runlog import check_run_dir
    from voice.reports.summary import text_report
    from voice.runs.serve_agent import serve

    if len(endpoints(args)) > 1:
        raise SettingsError("serve-agent answers with one endpoint: give one --llm-url (or --llm-model)")
    if not 0 <= args.port < 65536:
        raise SettingsError(f"--port must be 0 to 65535, not {args.port}")
    settings = settings_from_args(args, "realtime")
    plan = plan_stack(args)
    out = Path(args.out or time.strftime("runs/agent-%Y%m%d-%H%M%S"))
    check_run_dir(out)
    with contextlib.ExitStack() as stack:
        [(_, stages, env)] = open_stack(args, stack, settings, plan, mode="live", served_on="media stream")
        mirrors = mirrors_from_args(args, out.name, env)
        ready = lambda url: print(url, flush=True)  # noqa: E731  the first line out: what to call
        try:
            summary = asyncio.run(serve(stages, settings, out, args.host, args.port, env, mirrors, ready))
        except KeyboardInterrupt:
            return 130
    print(text_report(summary))
    print(f"\nrun directory: {out}")
    return 0
