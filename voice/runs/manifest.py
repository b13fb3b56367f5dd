"""A manifest skeleton for a folder of recordings (`ttfat manifest DIR`): one line per call and, in it,
one entry per turn the turn detector finds, with its transcript and times, for the user to correct and
fill in (expected tool calls, facts). `ttfat replay DIR` then scores quality against it.

A manifest line: ``{"call", "file", "turns": [{"turn", "text", "speech_start_s", "speech_end_s",
"expected_tools": [{"name", "arguments": {subset}}], "facts": [string or {"regex": ...}]}]}``; a file
that cannot be read gets a line with its error and no turns, so nothing is silently left out."""

from __future__ import annotations

import json
from pathlib import Path

from voice.pipeline.audio import RATE, AudioError, load_audio
from voice.pipeline.settings import VadConfig
from voice.pipeline.turns import Turn, TurnDetector
from voice.runs.replay import CallInput


def detected_turns(samples, config: VadConfig | None = None) -> list[Turn]:
    """The turns the replay's detector finds in a whole recording (16 kHz float32). Speech that comes
    back within the merge window continues the turn before it, as in a replay where the agent has not
    spoken yet."""
    detector = TurnDetector(RATE, config or VadConfig())
    n = detector.frame_len
    turns: list[Turn] = []

    def add(turn: Turn) -> None:
        if turn.continues and turns:
            turns[-1] = turn  # it spans the turn before it
        else:
            turns.append(turn)

    for i in range(0, len(samples) - n + 1, n):
        event = detector.push(samples[i : i + n])
        if detector.resuming:
            detector.resume()
        if isinstance(event, Turn):
            add(event)
    if (last := detector.flush()) is not None:
        add(last)
    return turns


def skeleton_line(call: CallInput, base: Path, transcribe) -> dict:
    """One manifest line; ``transcribe(audio) -> text``."""
    line: dict = {"call": call.name, "file": str(call.path.relative_to(base))}
    try:
        audio = load_audio(call.path, call.channel)
    except AudioError as e:
        return {**line, "error": str(e), "turns": []}
    line["turns"] = [
        {
            "turn": i,
            "text": transcribe(turn.audio),
            "speech_start_s": round(turn.start / RATE, 3),
            "speech_end_s": round(turn.end / RATE, 3),
            "expected_tools": [],
            "facts": [],
        }
        for i, turn in enumerate(detected_turns(audio.samples))
    ]
    return line


def write_skeleton(calls: list[CallInput], base: Path, out: Path, transcribe, progress=None) -> int:
    """Write the skeleton for ``calls`` (files under ``base``) to ``out``; returns the turns found."""
    turns = 0
    with out.open("w") as f:
        for call in calls:
            line = skeleton_line(call, base, transcribe)
            turns += len(line["turns"])
            f.write(json.dumps(line) + "\n")
            if progress is not None:
                progress.update(1)
    return turns
