"""Calls made of the twelve real human questions and commands in ../shared/data/speech, for the
benchmarks (never copied into the project: written to a folder the caller gives)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf

from voice.pipeline.audio import RATE, load_audio

HUMAN = (
    "ps__goforward",
    "ps__cards_001",
    "ps__cards_002",
    "ps__cards_003",
    "ps__cards_004",
    "ps__cards_005",
    "ps__forever_input_2",
    "sr__english",
    "wfw__turn_on_the_living_room_lamp",
    "gcs__brooklyn_audio",
    "gcs__brooklyn_silence_padding",
    "gas__whattimeisit",
)
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "speech"


def human_calls(out: Path, per_call: int = 4, gap_s: float = 4.0) -> list[str]:
    """`per_call` clips to a call with `gap_s` of silence between, written to `out` with their
    manifest (speech spans where the clip is above 1% of full scale); returns the paths to replay."""
    clips = {
        json.loads(line)["file"].split("/")[-1].removesuffix(".flac"): json.loads(line)
        for line in (SHARED / "manifest.jsonl").read_text().splitlines()
    }
    lines = []
    for c in range(0, len(HUMAN), per_call):
        parts, turns, at = [np.zeros(RATE, np.float32)], [], 1.0
        for name in HUMAN[c : c + per_call]:
            audio = load_audio(SHARED / clips[name]["file"]).samples
            loud = np.flatnonzero(np.abs(audio) > 0.01)
            start, end = (loud[0], loud[-1]) if len(loud) else (0, len(audio))
            span = {"speech_start_s": at + start / RATE, "speech_end_s": at + end / RATE}
            text = clips[name]["transcript"]
            turns.append({"turn": len(turns), "text": text, **span, "expected_tool": None, "facts": []})
            parts += [audio, np.zeros(int(gap_s * RATE), np.float32)]
            at += (len(audio) + gap_s * RATE) / RATE
        name = f"human{c // per_call + 1}"
        sf.write(out / f"{name}.wav", np.concatenate(parts), RATE)
        lines.append(json.dumps({"call": name, "file": f"{name}.wav", "turns": turns}))
    (out / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    return [str(out)]


def phone_line(paths: list[str], out: Path) -> list[str]:
    """The calls of `paths` as a phone line carries them (8 kHz μ-law, back at 16 kHz, as `ttfat
    serve-agent` decodes a Twilio stream), written to `out` with their manifest; returns the paths."""
    from voice.pipeline.audio import resample
    from voice.runs.replay import find_calls
    from voice.runs.telephony import Twilio

    out.mkdir(parents=True, exist_ok=True)
    wire, lines = Twilio(), []
    for call in find_calls(paths):
        narrow = wire.carried(resample(load_audio(call.path, call.channel).samples, RATE, wire.rate))
        sf.write(out / f"{call.name}.wav", resample(narrow, wire.rate, RATE), RATE)
        lines.append({"call": call.name, "file": f"{call.name}.wav", "turns": call.reference or []})
    (out / "manifest.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return [str(out)]
