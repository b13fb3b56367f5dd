"""`ttfat talk`: a live call with the agent, through microphone and speaker."""

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
        "talk",
        help="talk to the agent through microphone and speaker",
        description="Live conversation: microphone -> turns -> ASR -> agent -> TTS -> speaker, with\n"
        "the same run directory and report as replay. Speaking while the agent talks\n"
        "interrupts it (barge-in). Use headphones: there is no echo cancellation, so\n"
        "the agent would interrupt itself. Ctrl-C ends the session and writes the\n"
        "report.",
        epilog="examples:\n"
        "  ttfat talk --list-devices\n"
        "  ttfat talk --input-device 2 --output-device 3\n"
        "  ttfat talk --seconds 120 --out runs/talk1\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: ttfat talk",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--list-devices", action="store_true", help="list audio devices and exit")
    p.add_argument("--input-device", help="microphone: index or name (default: the system default)")
    p.add_argument("--output-device", help="speaker: index or name (default: the system default)")
    p.add_argument("--out", help="run directory (default runs/talk-DATE-TIME)")
    p.add_argument("--seconds", type=float, help="end the session after this long (default: Ctrl-C)")
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
    from voice.runs.live import DeviceSpeaker, Microphone, device_arg, list_devices
    from voice.runs.talk import talk

    if args.list_devices:
        print(list_devices())
        return 0
    if len(endpoints(args)) > 1:
        raise SettingsError("talk measures one endpoint: give one --llm-url (or --llm-model)")
    settings = settings_from_args(args, "realtime")
    plan = plan_stack(args)  # before a device opens or a model loads
    out = Path(args.out or time.strftime("runs/talk-%Y%m%d-%H%M%S"))
    check_run_dir(out)
    mic = Microphone(device_arg(args.input_device), settings.vad.frame_ms)
    with contextlib.ExitStack() as stack:
        speaker = DeviceSpeaker(device_arg(args.output_device))
        stack.callback(speaker.close)
        devices = {"input": args.input_device, "output": args.output_device, "latency_ms": speaker.latency_ms}
        [(_, stages, env)] = open_stack(args, stack, settings, plan, mode="live", devices=devices)
        mirrors = mirrors_from_args(args, out.name, env)  # --mqtt, --otlp
        summary = asyncio.run(talk(stages, settings, out, mic, speaker, env, mirrors, args.seconds))
    print(text_report(summary))
    print(f"\nrun directory: {out}")
    return 0
