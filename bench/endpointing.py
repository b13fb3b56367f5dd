"""End of turn that listens to the words (issue 19, lever 4): at every pause inside a caller's turn
(where the caller goes on) and at every pause that ends one, what each rule would have decided.

A rule that calls a pause "complete" ends the turn there (at once with Smart Turn; on the usual 300 ms
end window with the words rule), so a mid-turn pause called complete cuts the caller off once answers
come fast; a turn end called "goes on" waits the longer window (600 ms) for nothing.

    python bench/endpointing.py [--calls recordings human]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from calls import human_calls

from asr.whisper import Transcriber
from voice.pipeline.audio import load_audio
from voice.pipeline.endpointing import SmartTurn, goes_on
from voice.pipeline.settings import VadConfig
from voice.pipeline.turns import Pause, Resume, Turn, TurnDetector
from voice.record.environment import cpu_name
from voice.runs.replay import find_calls


def pauses(paths: list[str]) -> list[tuple[Pause, bool]]:
    """Every pause of every turn, and whether the caller went on after it (an end window of 1.5 s keeps
    a turn whole across its pauses)."""
    out = []
    for call in find_calls(paths):
        samples = load_audio(call.path, call.channel).samples
        detector = TurnDetector(config=VadConfig(end_ms=1500))
        n, last = detector.frame_len, None
        for i in range(len(samples) // n):
            event = detector.push(samples[i * n : (i + 1) * n])
            if isinstance(event, Pause):
                last = event
            elif isinstance(event, (Resume, Turn)) and last is not None:
                out.append((last, isinstance(event, Resume)))
                last = None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", nargs="+", choices=["recordings", "human"], default=["recordings", "human"])
    args = ap.parse_args()
    asr, model = Transcriber(window="auto"), SmartTurn()
    print(f"# end of turn: {cpu_name()}; tiny.en fitted window, Smart Turn v3.2")
    print(
        f"\n{'calls':<12}{'rule':<24}{'mid-turn pauses called complete':>34}"
        f"{'turn ends called goes on':>28}{'ms per judgement':>20}"
    )
    for name in args.calls:
        paths = human_calls(Path(tempfile.mkdtemp())) if name == "human" else ["recordings"]
        found = pauses(paths)
        verdicts = {"Smart Turn >= 0.5": [], "words (goes_on)": []}
        cost = {"Smart Turn >= 0.5": [], "words (goes_on)": []}
        for pause, went_on in found:
            start = time.perf_counter()
            complete = model.complete(pause.audio) >= 0.5
            cost["Smart Turn >= 0.5"].append((time.perf_counter() - start) * 1e3)
            words = asr.first_pass(pause.audio)
            cost["words (goes_on)"].append(words.compute_ms)
            verdicts["Smart Turn >= 0.5"].append((went_on, complete))
            verdicts["words (goes_on)"].append((went_on, not goes_on(words.text)))
        mid = sum(went_on for _, went_on in found)
        for rule, pairs in verdicts.items():
            cut = sum(went_on and complete for went_on, complete in pairs)
            wait = sum(not went_on and not complete for went_on, complete in pairs)
            print(
                f"{name:<12}{rule:<24}{f'{cut} of {mid}':>34}{f'{wait} of {len(found) - mid}':>28}"
                f"{statistics.median(cost[rule]):>17.0f} ms"
            )


if __name__ == "__main__":
    main()
