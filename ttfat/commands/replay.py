"""`ttfat replay`: call recordings through the voice pipeline, with the TTFAT report."""

from __future__ import annotations

import argparse

from ttfat.commands.report import add_gate_args
from ttfat.stack import (
    StackPlan,
    add_mirror_args,
    add_mode_args,
    add_stack_args,
    endpoints,
    mirrors_from_args,
    open_stack,
    plan_stack,
    settings_from_args,
)
from voice.pipeline.settings import Settings, SettingsError


def add_parser(sub) -> None:

    p = sub.add_parser(
        "replay",
        help="replay recordings through the pipeline; print the report",
        description="Replay recordings (files, folders, manifests; WAV FLAC MP3 OGG, any rate, mono\n"
        "or stereo) through turn detection, ASR, the agent on the LLM server, TTS and a\n"
        "simulated speaker, write the run directory (turns.jsonl, events.jsonl,\n"
        "summary.json, each turn's audio) and print the report. Without --llm-url it\n"
        "starts our LLM server on a free port. A file that cannot be read, a turn the\n"
        "detector missed or a call with no speech is recorded as a failed turn; the run\n"
        "goes on.",
        epilog="examples:\n"
        "  ttfat replay recordings/  # real time: the bundled agent and model\n"
        "  ttfat replay recordings/ --mode fast --out runs/fast --html fast.html\n"
        "  ttfat replay my-calls/ --agent agent.toml --llm-url http://localhost:30000/v1\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: every option of ttfat replay, the run directory\n"
        "  docs/agent-files.md: your own agent, endpoint and manifest",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="audio files, folders or manifest.jsonl files")
    add_mode_args(p)
    p.add_argument("--concurrency", type=int, default=1, help="calls replayed at once (default %(default)s)")
    add_run_dir_args(p, "replay")
    p.add_argument(
        "--channel",
        default="auto",
        type=channel_arg,
        help="caller channel of stereo files: auto (loudest), 0, 1",
    )
    p.add_argument("--html", metavar="FILE", help="also write the HTML report (one offline page, every turn)")
    add_stack_args(p)
    add_mirror_args(p)
    add_gate_args(p)
    p.set_defaults(func=run)


def add_run_dir_args(p: argparse.ArgumentParser, command: str) -> None:
    """--out, --force, --resume: where a run of calls goes, and what becomes of a run already there."""
    p.add_argument(
        "--out",
        help=f"run directory (default runs/{command}-DATE-TIME); one that holds a run "
        "is refused unless --resume or --force",
    )
    p.add_argument("--force", action="store_true", help="with --out: replace the run the directory holds")
    p.add_argument(
        "--resume",
        action="store_true",
        help=f"with --out: {command} only the calls the run directory does not hold complete "
        "(after a crash or Ctrl-C); a call cut short is done again whole; the report covers "
        "all",
    )


def channel_arg(value: str) -> int | str:
    if value == "auto":
        return value
    if value.isdigit():
        return int(value)
    raise argparse.ArgumentTypeError(f"auto or a channel number (0, 1, ...), not {value!r}")


def prepare(args: argparse.Namespace) -> tuple[Settings, StackPlan]:
    """The settings and the stack plan `args` ask for. Everything that can be wrong is found here, in
    milliseconds, before a model loads (issue 45). bench/pipeline.py builds each of its configs through
    this and `open_stack`, from replay's own arguments: its default row is what a user gets."""
    settings = settings_from_args(args, args.mode, playback_latency_ms=args.playback_latency_ms)
    for flag, what in (("resume", "finish"), ("force", "replace")):
        if getattr(args, flag) and not args.out:
            raise SettingsError(f"--{flag} needs --out: the run directory to {what}")
    if args.concurrency < 1:
        raise SettingsError(f"--concurrency must be at least 1, not {args.concurrency}")
    if len(endpoints(args)) > 1 and (
        args.concurrency != 1 or args.mqtt or args.otlp or args.html or args.resume or args.slo or args.junit
    ):
        raise SettingsError(
            "an A/B run replays one call at a time, without --mqtt, --otlp, --html, --resume, "
            "--slo or --junit (ttfat report each run directory after it)"
        )
    return settings, plan_stack(args)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib
    import time
    from pathlib import Path

    from ttfat.commands.report import gate, write_html
    from voice.record.runlog import check_run_dir
    from voice.reports.summary import compare_report, text_report
    from voice.runs.replay import check_calls, find_calls, run_ab
    from voice.runs.replay import run as replay

    settings, plan = prepare(args)
    calls = find_calls(args.paths, args.channel)
    check_calls(calls)
    out = Path(args.out or time.strftime("runs/replay-%Y%m%d-%H%M%S"))
    check_run_dir(out, resume=args.resume, force=args.force)
    with contextlib.ExitStack() as stack:
        arms = open_stack(
            args, stack, settings, plan, mode=args.mode, concurrency=args.concurrency, inputs=args.paths
        )
        if len(arms) > 1:
            summaries = asyncio.run(run_ab(calls, arms, settings, out))
        else:
            [(_, stages, env)] = arms
            mirrors = mirrors_from_args(args, out.name, env)  # --mqtt, --otlp
            summaries = [
                asyncio.run(
                    replay(calls, stages, settings, out, args.concurrency, env, mirrors, resume=args.resume)
                )
            ]
    if len(arms) > 1:
        names = [str(out / label) for label, _, _ in arms]
        for name, summary in zip(names[1:], summaries[1:], strict=True):
            print(compare_report(summaries[0], summary, names[0], name))
        print(f"\nrun directories: {', '.join(names)}  (ttfat compare {names[0]} {names[1]})")
        return 0
    summary = summaries[0]
    print(text_report(summary))
    if args.html:
        write_html(out, args.html, summary, audio=settings.record_audio)
    print(f"\nrun directory: {out}  (ttfat report {out} --html report.html)")
    return gate(args, out)
