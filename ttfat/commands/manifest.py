"""`ttfat manifest`: a manifest skeleton for a folder of recordings, to fill in."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub) -> None:
    p = sub.add_parser(
        "manifest",
        help="a manifest skeleton for a folder of recordings, to fill in",
        description="Find the caller's turns in every recording of a folder (the replay's own turn\n"
        "detector) and transcribe them, and write FOLDER/manifest.jsonl: one line per\n"
        "call, one entry per turn with its text and times, and empty expected_tools and\n"
        "facts for you to fill in (tool name and the arguments that matter; facts as\n"
        'strings or {"regex": ...}). Correct the texts: they are the reference for the\n'
        "word error rate.",
        epilog="examples:\n"
        "  ttfat manifest my-calls/  # writes my-calls/manifest.jsonl\n"
        "  ttfat replay my-calls/    # once it is filled in: quality beside latency\n"
        "\n"
        "see also:\n"
        "  docs/agent-files.md: the manifest format, expected_tools and facts",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("folder", help="a folder of recordings (WAV FLAC MP3 OGG)")
    p.add_argument("--out", help="where to write it (default FOLDER/manifest.jsonl)")
    p.add_argument("--force", action="store_true", help="overwrite an existing manifest")
    p.add_argument("--channel", default="auto", help="caller channel of stereo files: auto (loudest), 0, 1")
    p.add_argument("--asr-model", default="tiny.en", help="tiny.en (bundled), base, or a CTranslate2 dir")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tqdm import tqdm

    from asr.whisper import Transcriber
    from voice.pipeline.audio import AUDIO_SUFFIXES, AudioError
    from voice.runs.manifest import write_skeleton
    from voice.runs.replay import CallInput

    folder = Path(args.folder)
    if not folder.is_dir():
        raise AudioError(f"{folder}: not a folder")
    out = Path(args.out) if args.out else folder / "manifest.jsonl"
    if out.exists() and not args.force:
        raise AudioError(f"{out}: a manifest is already there (--force to overwrite it, --out elsewhere)")
    files = sorted(f for f in folder.rglob("*") if f.suffix.lower() in AUDIO_SUFFIXES)
    if not files:
        raise AudioError(f"{folder}: no audio files ({', '.join(AUDIO_SUFFIXES)}) in this folder")
    channel = args.channel if args.channel == "auto" else int(args.channel)
    transcriber = Transcriber(args.asr_model, window="full")
    calls = [CallInput(f.stem, f, channel) for f in files]
    with tqdm(total=len(calls), desc="manifest", unit="call") as bar:
        turns = write_skeleton(calls, folder, out, lambda audio: transcriber.transcribe(audio).text, bar)
    print(
        f"wrote {out}: {len(calls)} calls, {turns} turns; fill in expected_tools and facts", file=sys.stderr
    )
    return 0
