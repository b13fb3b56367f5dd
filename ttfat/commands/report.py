"""`ttfat report`: the report of a run directory."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser(
        "report",
        help="the report of a run directory (--html: one offline page)",
        description="Print the report of a run directory (failed turns count as never answered):\n"
        "latency from the end of the caller's speech, the stages of the wait and the\n"
        "LLM's share of it, quality against the manifest, and where it was measured.",
        epilog="examples:\n"
        "  ttfat report runs/demo\n"
        "  ttfat report runs/demo --html report.html  # an offline page of every turn\n"
        "  ttfat report runs/demo --json\n"
        "  ttfat report runs/demo --slo 'first_useful_audio_heard p95<800' --slo 'answered>=0.98'\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: ttfat report, the run directory's files\n"
        "  docs/timing.md: what each figure means, from when it counts",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run", help="run directory (from ttfat replay, talk or collect)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write the HTML report: one offline page with the "
        "figures, interactive plots, every turn opening to its timeline and audio",
    )
    p.add_argument(
        "--no-audio",
        action="store_true",
        help="with --html: leave the turns' audio out of the "
        "page (it holds each turn's clip, Opus: about 8 KB a second)",
    )
    add_gate_args(p)
    p.set_defaults(func=run)


def add_gate_args(p: argparse.ArgumentParser) -> None:
    """--slo and --junit, on replay, probe and report: a run as a CI gate (exit 3 when it fails)."""
    p.add_argument(
        "--slo",
        action="append",
        default=[],
        type=objective,
        metavar="OBJECTIVE",
        help="an objective the run must meet, repeatable: a latency's percentile in ms "
        "('first_useful_audio_heard p95<800', 'ttfat_ms p50<=300'), or a share of the turns "
        "('answered>=0.98', 'talked_over<=0', 'fact_accuracy>=90%%'); each broken one is a "
        "line, and the exit code is 3",
    )
    p.add_argument(
        "--junit",
        metavar="FILE",
        type=junit_file,
        help="write JUnit XML for CI: a test case per objective and per call (failed when one of "
        "its turns failed)",
    )


def objective(text: str):
    from voice.reports.slo import ObjectiveError, parse

    try:
        return parse(text)
    except ObjectiveError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def junit_file(path: str) -> str:
    from pathlib import Path

    if not Path(path).resolve().parent.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: its folder does not exist")
    return path


def gate(args: argparse.Namespace, run_dir) -> int:
    """The run's objectives, one line each, and --junit: 3 when one is broken, else 0."""
    if not args.slo and not args.junit:
        return 0
    from voice.record.runlog import read_run
    from voice.reports.slo import judge_run, knee, write_junit
    from voice.reports.summary import summarize

    turns, saved = read_run(run_dir)
    summary = summarize(turns, saved.get("environment"))
    verdicts = judge_run(args.slo, turns, summary)
    broken = sum(not v.met for v in verdicts)
    if verdicts:
        print(f"\nobjectives (--slo): {len(verdicts) - broken} of {len(verdicts)} met")
        print("\n".join(f"  {v.line()}" for v in verdicts))
    if verdicts and summary["load_curve"]:
        most = knee(verdicts)
        print(
            f"knee: {most} calls at once, the most that meet every objective"
            if most
            else "knee: none, even the fewest calls at once break an objective"
        )
    if args.junit:
        write_junit(args.junit, verdicts, turns)
        print(f"ttfat: wrote {args.junit}", file=sys.stderr)
    return 3 if broken else 0


def run(args: argparse.Namespace) -> int:
    from voice.record.runlog import read_run
    from voice.reports.summary import summarize, text_report

    turns, saved = read_run(args.run)
    summary = summarize(turns, saved.get("environment"))
    if saved.get("mqtt_gaps"):
        print(
            f"ttfat: warning: MQTT messages are missing for {len(saved['mqtt_gaps'])} call(s): "
            "this collected run is incomplete (see summary.json, mqtt_gaps)",
            file=sys.stderr,
        )
    if args.html:
        write_html(args.run, args.html, summary, audio=not args.no_audio)
    print(json.dumps(summary, indent=2) if args.json else text_report(summary))
    return gate(args, args.run)


def write_html(run_dir, path: str, summary: dict, audio: bool = True) -> None:
    from pathlib import Path

    from voice.record.runlog import read_audio, read_run
    from voice.reports.html import html_report

    clips = read_audio(run_dir) if audio else {}
    Path(path).write_text(html_report(read_run(run_dir)[0], summary, audio=clips))
    print(f"ttfat: wrote {path}", file=sys.stderr)
