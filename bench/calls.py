"""Calls made of real human speech in ../shared/data/speech for the benchmarks: the twelve questions and
commands, and the human turns with pauses inside them (never copied into the project: written to a
folder the caller gives); and any calls as a phone line carries them."""

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


def manifest_rows() -> dict[str, dict]:
    """The ../shared speech manifest, by clip name."""
    rows = [json.loads(line) for line in (SHARED / "manifest.jsonl").read_text().splitlines()]
    return {r["file"].split("/")[-1].removesuffix(".flac"): r for r in rows}


def human_calls(out: Path, per_call: int = 4, gap_s: float = 4.0) -> list[str]:
    """The twelve human questions, `per_call` clips to a call with `gap_s` of silence between, written to
    `out` with their manifest; returns the paths to replay."""
    clips = manifest_rows()
    return write_calls(out, "human", [clips[name] for name in HUMAN], per_call, gap_s)


def pause_calls(out: Path, per_call: int = 4, gap_s: float = 4.0) -> list[str]:
    """The pause set: every human clip of ../shared with a transcript (up to 20 s, not one of the twelve
    questions) in which the caller pauses inside the turn (webrtcvad, as the pipeline hears it, finds
    speech coming back after a pause): read sentences with commas, numbers read in groups, lists,
    counting, prompts. Written as calls, like `human_calls`."""
    from voice.pipeline.turns import Resume, TurnDetector

    def pauses_inside(row: dict) -> bool:
        audio = load_audio(SHARED / row["file"]).samples
        detector = TurnDetector()
        n = detector.frame_len
        return any(
            isinstance(detector.push(audio[i : i + n]), Resume) for i in range(0, len(audio) - n + 1, n)
        )

    rows = [
        r
        for name, r in manifest_rows().items()
        if r["speech_origin"] == "human" and r["transcript"] and r["duration_s"] <= 20 and name not in HUMAN
    ]
    return write_calls(out, "pauses", [r for r in rows if pauses_inside(r)], per_call, gap_s)


def write_calls(out: Path, prefix: str, rows: list[dict], per_call: int, gap_s: float) -> list[str]:
    """`per_call` clips to a call with `gap_s` of silence between, written to `out` with their manifest
    (speech spans where the clip is above 1% of full scale); returns the paths to replay."""
    out.mkdir(parents=True, exist_ok=True)
    lines = []
    for c in range(0, len(rows), per_call):
        parts, turns, at = [np.zeros(RATE, np.float32)], [], 1.0
        for row in rows[c : c + per_call]:
            audio = load_audio(SHARED / row["file"]).samples
            loud = np.flatnonzero(np.abs(audio) > 0.01)
            start, end = (loud[0], loud[-1]) if len(loud) else (0, len(audio))
            span = {"speech_start_s": at + start / RATE, "speech_end_s": at + end / RATE}
            text = row["transcript"]
            turns.append({"turn": len(turns), "text": text, **span, "expected_tool": None, "facts": []})
            parts += [audio, np.zeros(int(gap_s * RATE), np.float32)]
            at += (len(audio) + gap_s * RATE) / RATE
        name = f"{prefix}{c // per_call + 1}"
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
