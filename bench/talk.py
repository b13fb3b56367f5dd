"""Live talk against replay on the same audio (issue 19, lever 6): caller turns cut from recordings/ are
said into `ttfat talk` through virtual PulseAudio devices (tests/pulse.py), one at a time, and then
replayed in real time through `ttfat replay` as one call with each turn at the moment it was said, so
both see the same conversation (an answer depends on the turns before it); first useful audio heard
and its stages, side by side. The target: talk within 100 ms of replay.

    python bench/talk.py [--turns 8] [--options --serial]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import soundfile as sf

from voice.pipeline.audio import RATE, load_audio
from voice.record.environment import cpu_name
from voice.runs.replay import find_calls
from voice.timing.anchors import STAGES

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the virtual devices are the tests' helper
from tests.pulse import say, session, virtual_devices, wait_for_turns  # noqa: E402

METRICS = [("first_useful_audio_ms", "first useful audio heard"), ("ttfat_ms", "TTFAT")] + [
    (s.key, s.label) for s in STAGES[:-1]
]


def clips(out: Path, n: int) -> list[Path]:
    """The first `n` caller turns of recordings/, each with half a second of the call around it."""
    paths = []
    for call in find_calls(["recordings"]):
        audio = load_audio(call.path, call.channel).samples
        for ref in call.reference:
            a, b = int((ref["speech_start_s"] - 0.5) * RATE), int((ref["speech_end_s"] + 0.5) * RATE)
            paths.append(out / f"{call.name}-{ref['turn']}.wav")
            sf.write(paths[-1], audio[max(0, a) : b], RATE)
            if len(paths) == n:
                return paths
    return paths


def talk(paths: list[Path], out: Path, options: list[str]) -> tuple[list[dict], list[float]]:
    """The turns' records, and when each clip began to be said (s from the first)."""
    said = []
    with virtual_devices(out / "pulse") as env, session(env, out / "talk", *options):
        for i, path in enumerate(paths):
            said.append(time.monotonic())
            say(env, path)
            (turn,) = wait_for_turns(out / "talk", i + 1)[i:]
            time.sleep(max(0.5, ((turn["complete_ms"] or 0) - (turn["first_audio_ms"] or 0)) / 1e3 + 0.8))
    records = [json.loads(line) for line in (out / "talk" / "turns.jsonl").read_text().splitlines()]
    return records, [t - said[0] for t in said]


def replay(paths: list[Path], said_s: list[float], out: Path, options: list[str]) -> list[dict]:
    """One call: each clip where it was said in the live call, silence between."""
    clips = [load_audio(p).samples for p in paths]
    audio = np.zeros(int((said_s[-1] + 10) * RATE) + len(clips[-1]), dtype=np.float32)
    for clip, at in zip(clips, said_s, strict=True):
        audio[int(at * RATE) : int(at * RATE) + len(clip)] = clip
    sf.write(out / "call.wav", audio, RATE)
    cmd = [sys.executable, "-m", "ttfat", "replay", str(out / "call.wav"), "--out", str(out / "replay")]
    cmd += options
    subprocess.run(cmd, check=True, capture_output=True)
    return [json.loads(line) for line in (out / "replay" / "turns.jsonl").read_text().splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=8)
    ap.add_argument("--options", nargs=argparse.REMAINDER, default=[], help="for both (e.g. --serial)")
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="ttfat-talk-"))
    paths = clips(out, args.turns)
    machine = cpu_name()
    options = " ".join(args.options) or "defaults"
    print(f"# talk vs replay: {machine}; {len(paths)} turns of recordings/; {options}")
    live, said_s = talk(paths, out, args.options)
    replayed = replay(paths, said_s, out, args.options)
    print(f"\n{'p50 ms (ok turns)':<44}{'talk':>8}{'replay':>8}{'talk - replay':>15}")
    for key, label in METRICS:
        a = [t[key] for t in live if t["status"] == "ok" and t.get(key) is not None]
        b = [t[key] for t in replayed if t["status"] == "ok" and t.get(key) is not None]
        if a and b:
            pa, pb = statistics.median(a), statistics.median(b)
            print(f"{label:<44}{pa:>8.0f}{pb:>8.0f}{pa - pb:>15.0f}")
    ok = lambda ts: sum(t["status"] == "ok" for t in ts)  # noqa: E731
    print(
        f"\nanswered: talk {ok(live)} of {len(live)}, replay {ok(replayed)} of {len(replayed)}; runs in {out}"
    )


if __name__ == "__main__":
    main()
