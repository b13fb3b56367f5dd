"""`ttfat collect`: one run directory from the MQTT messages of replay/talk workers."""

from __future__ import annotations

import argparse
import sys

from voice.record.mqtt import add_auth_args


def add_parser(sub) -> None:
    from voice.record.collect import IDLE_TIMEOUT_S

    p = sub.add_parser(
        "collect",
        help="one run directory from the events of --mqtt workers",
        description="Subscribe to a broker and write one run directory (events.jsonl, turns.jsonl,\n"
        "summary.json) from every worker that runs with --mqtt, for `ttfat report`.\n"
        "Start it before the workers, and give them the same --mqtt-run. It ends when\n"
        "every worker it heard from has sent its end message (use --workers N when\n"
        "workers start at different times), after --idle-timeout seconds without a\n"
        "message, or on Ctrl-C, and always writes a complete directory. Messages that\n"
        "never arrived (a broker outage) are counted per call as mqtt_gaps in\n"
        "summary.json.",
        epilog="examples:\n"
        "  ttfat collect --mqtt broker.lan --out runs/fleet --run fleet\n"
        "  ttfat replay calls/ --mqtt broker.lan --mqtt-run fleet  # on each worker\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: ttfat collect, live events and traces",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--mqtt", required=True, metavar="HOST[:PORT]", help="the broker (port 1883 by default)")
    p.add_argument("--out", required=True, help="run directory to write")
    p.add_argument("--run", help="run id to collect (default: the first one heard)")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=IDLE_TIMEOUT_S,
        metavar="S",
        help="stop after S seconds without a message (default %(default)s; 0 waits forever)",
    )
    p.add_argument("--workers", type=int, metavar="N", help="stop once N workers have ended")
    add_auth_args(p.add_argument_group("broker authentication"))
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from voice.record.collect import collect
    from voice.record.mqtt import auth_from_args, broker_from_args
    from voice.record.runlog import read_run
    from voice.reports.summary import text_report

    host, port = broker_from_args(args)
    try:
        asyncio.run(
            collect(host, port, args.out, args.run, args.idle_timeout, args.workers, **auth_from_args(args))
        )
    except KeyboardInterrupt:
        print("ttfat: interrupted; the run directory holds what arrived", file=sys.stderr)
    _, summary = read_run(args.out)
    print(text_report(summary))
    print(f"\nrun directory: {args.out}  (ttfat report {args.out} --html report.html)")
    return 0
