"""The end of turn's trade-off, as the field measures it (issue 57): at every pause in a caller's speech,
what each end-of-turn rule would do. A pause inside a turn that the rule ends is a false cut-off (the
caller is talked over once answers come fast); at a turn's true end, the rule's wait is the caller's.

    python bench/endpointing.py [--sets recordings phone human pauses]

The sets: recordings/ at 16 kHz; recordings/ as a phone line carries it (8 kHz μ-law); calls made of
the human questions of ../shared (bench/calls.py); and the pause set: human turns of ../shared with
pauses inside them (read sentences with commas, numbers read in groups, lists, counting). Every pause is
labelled by the references: inside a turn's speech (mid-turn) or at its end.

The rules: VAD alone; the words rule (voice/pipeline/endpointing.py: goes_on); Smart Turn v3.2 on the
audio; the text model trained here (voice/pipeline/textturn.py) on the pause's transcript; and the two
together (the mean of their probabilities); and the words rule with the text model (a pause either
judges goes on waits `long`: `ttfat replay --text-turn`).

A rule waits `short` ms of silence on a pause it judges the turn's end and `long` on one it judges
goes on (VAD alone: always `short`). Printed, per rule: the false cut-off rate (the share of turns with
a pause inside longer than the rule's wait there: the caller cut off) at a fixed wait of 300 and 600 ms
(`long` 1500 ms, the model's own threshold), and the least mean wait at the turn ends (with its p50 and
the rule's settings) that keeps false cut-offs at none, 5% and 10%, searched over `short`, `long` and
the threshold ("none": what the rule must wait for no caller of the set to be talked over). The
published anchor, on LiveKit's own data: their turn detector v1 has 9.9% false cut-offs at 300 ms and
needs a mean wait of 543 ms for 5%; Smart Turn v3.2 has 35.2% at 300 ms.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from calls import human_calls, pause_calls, phone_line
from tqdm import tqdm

from asr.whisper import Transcriber
from voice.pipeline.audio import RATE, load_audio
from voice.pipeline.endpointing import SmartTurn, goes_on
from voice.pipeline.settings import VadConfig
from voice.pipeline.textturn import TextTurn
from voice.pipeline.turns import Pause, Resume, TurnDetector
from voice.record.environment import cpu_name
from voice.runs.replay import find_calls

SMART_TURN, TEXT_TURN = SmartTurn(), TextTurn()
END_SLACK_S = 0.3  # a pause this near a reference turn's end is that end (the references' own rounding)
SHORTS = range(100, 1550, 50)  # ms
LONGS = (600, 900, 1200, 1500, 2000, 3000)
THRESHOLDS = tuple(np.round(np.arange(0.05, 1.0, 0.05), 2))


@dataclass
class Silence:
    """One pause in a caller's speech, as a rule sees it when it starts."""

    turn: tuple[str, int]  # (call, reference turn)
    end: bool  # the reference turn ends here (else the caller goes on)
    silence_ms: float  # until the caller spoke again
    text: str  # what the ASR heard up to the pause (the pipeline's speculative transcript)
    complete: float  # Smart Turn v3.2: the probability the turn is complete
    said: float  # the text model (voice/pipeline/textturn.py) on `text`: the probability the turn is complete


def silences(samples: np.ndarray) -> list[tuple[Pause, float]]:
    """Each pause of the caller's speech and when speech came back (s; the call's end if never). An end
    window of 3 s keeps a turn whole across its pauses (the recorded callers wait 3.5 s or more)."""
    detector = TurnDetector(config=VadConfig(end_ms=3000))
    n, pending, out = detector.frame_len, [], []
    for i in range(len(samples) // n):
        was = detector.in_turn
        event = detector.push(samples[i * n : (i + 1) * n])
        if isinstance(event, Pause):
            pending.append(event)
        back = (
            event.at
            if isinstance(event, Resume)
            else detector.start
            if detector.in_turn and not was
            else None
        )
        if back is not None:
            out += [(p, back / RATE) for p in pending]
            pending = []
    return out + [(p, len(samples) / RATE) for p in pending]


def label(at_s: float, back_s: float, turns: list[dict]) -> tuple[int, bool] | None:
    """(turn, True) at a reference turn's end, (turn, False) inside its speech; None elsewhere (a noise or
    a breath between turns, or one just after a turn's end and quickly over)."""
    for i, t in enumerate(turns):
        if abs(at_s - t["speech_end_s"]) <= END_SLACK_S:
            return (i, True) if back_s > t["speech_end_s"] + END_SLACK_S else None
        if t["speech_start_s"] <= at_s < t["speech_end_s"]:
            return i, False
    return None


def measure(paths: list[str], asr: Transcriber, name: str) -> tuple[list[Silence], int]:
    """Every labelled pause of the calls, judged; and how many reference turns the calls hold."""
    found, turns = [], 0
    for call in find_calls(paths):
        samples = load_audio(call.path, call.channel).samples
        turns += len(call.reference)
        for pause, back in silences(samples):
            if (labelled := label(pause.end / RATE, back, call.reference)) is not None:
                turn, end = labelled
                found.append(((call.name, turn), end, (back - pause.end / RATE) * 1e3, pause.audio))
    last_end = {f[0]: i for i, f in enumerate(found) if f[1]}  # a turn's end: its last pause by the end
    found = [f for i, f in enumerate(found) if not f[1] or last_end[f[0]] == i]
    judged = []
    for turn, end, ms, audio in tqdm(found, desc=f"{name}: pauses judged", unit="pause"):
        text = asr.first_pass(audio).text
        judged.append(Silence(turn, end, ms, text, SMART_TURN.complete(audio), TEXT_TURN.complete(text)))
    return judged, turns


def waits(rule: str, pauses: list[Silence], short: int, long: int, threshold: float) -> np.ndarray:
    """Each pause's wait (ms) under `rule`."""
    if rule == "VAD alone":
        return np.full(len(pauses), float(short))
    judged_end = np.array([JUDGED[rule](p) >= threshold for p in pauses])
    return np.where(judged_end, short, long).astype(float)


JUDGED = {  # rule -> how sure it is that the turn ends at this pause
    "words rule": lambda p: float(not goes_on(p.text)),
    "Smart Turn v3.2": lambda p: p.complete,
    "text model": lambda p: p.said,
    "text + Smart Turn": lambda p: (p.said + p.complete) / 2,
    "words + text": lambda p: 0.0 if goes_on(p.text) else p.said,
}
RULES = {  # rule -> the settings its search runs over: (shorts, longs, thresholds)
    "VAD alone": (SHORTS, (0,), (0.0,)),
    "words rule": (SHORTS, LONGS, (0.5,)),
    **dict.fromkeys(list(JUDGED)[1:], (SHORTS, LONGS, THRESHOLDS)),
}


def cutoffs(pauses: list[Silence], w: np.ndarray, turns: int) -> float:
    """The share of the `turns` cut off: a pause inside the turn longer than the rule's wait there."""
    return (
        len({p.turn for p, wait in zip(pauses, w, strict=True) if not p.end and wait < p.silence_ms}) / turns
    )


def least_wait(rule: str, pauses: list[Silence], turns: int, most: float) -> tuple[float, float, str] | None:
    """The least mean wait at the turn ends with false cut-offs at or under `most`: (mean, p50, settings)."""
    ends = np.array([p.end for p in pauses])
    best = None
    shorts, longs, thresholds = RULES[rule]
    for short in shorts:
        for long in longs:
            for threshold in thresholds:
                w = waits(rule, pauses, short, max(long, short), threshold)
                if cutoffs(pauses, w, turns) <= most and (best is None or w[ends].mean() < best[0]):
                    knobs = (
                        f"{short}"
                        + (f"/{max(long, short)}" if long else "")
                        + (f" at {threshold}" if len(thresholds) > 1 else "")
                    )
                    best = (float(w[ends].mean()), float(np.median(w[ends])), knobs)
    return best


def report(name: str, pauses: list[Silence], turns: int) -> None:
    mid = [p for p in pauses if not p.end]
    p50 = statistics.median([p.silence_ms for p in mid]) if mid else 0
    print(
        f"\n{name}: {turns} turns, {len({p.turn for p in mid})} with pauses inside ({len(mid)} pauses, "
        f"p50 {p50:.0f} ms), {len(pauses) - len(mid)} ends found"
    )
    print(
        f"  {'rule':<18}{'false cut-offs at 300':>22}{'at 600 ms':>10}   {'wait for none: mean, p50':>24}"
        f"{'(settings)':>18}   {'for 5%':>24}{'(settings)':>18}   {'for 10%':>24}{'(settings)':>18}"
    )
    for rule in RULES:
        fixed = [cutoffs(pauses, waits(rule, pauses, w, 1500, 0.5), turns) for w in (300, 600)]
        cells = ""
        for most in (0.0, 0.05, 0.10):
            found = least_wait(rule, pauses, turns, most)
            mean_p50, knobs = (f"{found[0]:.0f}, {found[1]:.0f}", found[2]) if found else ("none", "")
            cells += f"{mean_p50:>24}{knobs:>18}   "
        print(f"  {rule:<18}{fixed[0]:>21.1%}{fixed[1]:>11.1%}   {cells}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sets = ("recordings", "phone", "human", "pauses")
    ap.add_argument("--sets", nargs="+", choices=sets, default=list(sets))
    args = ap.parse_args()
    asr = Transcriber(window="auto")
    print(f"# end of turn: {cpu_name()}; tiny.en fitted window at each pause, Smart Turn v3.2")
    tmp = Path(tempfile.mkdtemp(prefix="ttfat-endpointing-"))
    made = {
        "recordings": lambda: ["recordings"],
        "phone": lambda: phone_line(["recordings"], tmp / "phone"),
        "human": lambda: human_calls(tmp / "human"),
        "pauses": lambda: pause_calls(tmp / "pauses"),
    }
    for name in args.sets:
        report(name, *measure(made[name](), asr, name))


if __name__ == "__main__":
    main()
