"""ASR window against quality and cost (issue 19, lever 1): word error rate, numbers heard right and
compute per utterance, for Whisper's 30 s window and for windows fitted to the audio, on the human
clips and 8 kHz telephone prompts of ../shared/data/speech and the caller turns of recordings/.

Numbers: on recordings/, the order number parsed from the transcript equals the one the caller said;
on the shared clips, the digits said (as words) equal the reference's, for references holding digits.

The last rows keep a fitted window's words when the bundled agent reads a whole order number in them
(`numbers_whole`), and hear only the others again: at 30 s, or first among the fitted window's 10
likeliest readings (the likeliest whole one is taken, unless far less likely than the best or saying its
words twice) and at 30 s only when none will do; a number that cannot spell three digits is not heard
again, and the last row shows what hearing it again at 30 s (as before issue 46's lever 6) gave.

    python bench/asr_window.py [--models tiny.en base] [--floors 6 8 10 15] [--only "30 s" readings]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from asr.whisper import Transcriber
from llm.support.spoken import holds_order_id, parse_order_id
from voice.pipeline.audio import load_audio
from voice.record.environment import cpu_name
from voice.reports.summary import normalize, percentile, wer

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "speech"
RECORDINGS = Path(__file__).resolve().parents[1] / "recordings"
DIGITS = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}


def shared(telephony: bool) -> list[tuple[object, str, str | None]]:
    """(audio, reference, None) of the human clips, or of the telephone prompts."""
    out = []
    for line in (SHARED / "manifest.jsonl").read_text().splitlines():
        r = json.loads(line)
        if not r.get("transcript") or r["file"].startswith("telephony") != telephony or r["duration_s"] > 25:
            continue
        if telephony or r["speech_origin"] == "human":
            out.append((load_audio(SHARED / r["file"]).samples, r["transcript"], None))
    return out


def recording_turns() -> list[tuple[object, str, str | None]]:
    """Each caller turn of recordings/ as the turn detector hands it over (300 ms either side), with the
    order number it says."""
    out = []
    for line in (RECORDINGS / "manifest.jsonl").read_text().splitlines():
        call = json.loads(line)
        audio = load_audio(RECORDINGS / call["file"], call.get("caller_channel", "auto")).samples
        for t in call["turns"]:
            a, b = int((t["speech_start_s"] - 0.3) * 16000), int((t["speech_end_s"] + 0.3) * 16000)
            said = ((t.get("expected_tool") or {}).get("arguments") or {}).get("order_id")
            out.append((audio[max(0, a) : b], t["text"], said))
    return out


def digits(text: str) -> list[str]:
    return [w for w in normalize(text) if w in DIGITS]


def score(transcriber: Transcriber, items) -> dict:
    pairs, ms, right, numbers = [], [], 0, 0
    for audio, reference, order_id in items:
        t = transcriber.transcribe(audio)
        pairs.append((reference, t.text))
        ms.append(t.compute_ms)
        if order_id:
            numbers += 1
            right += parse_order_id(t.text) == order_id
        elif digits(reference):
            numbers += 1
            right += digits(t.text) == digits(reference)
    return {
        "wer": wer(pairs),
        "right": right,
        "numbers": numbers,
        "p50": statistics.median(ms),
        "p95": percentile(ms, 95),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=["tiny.en", "base"])
    ap.add_argument("--floors", type=float, nargs="+", default=[6, 8, 10, 15])
    ap.add_argument("--only", nargs="+", metavar="WORDS", help="only the rows whose name holds one of these")
    args = ap.parse_args()
    sets = {"human clips": shared(False), "telephony 8 kHz": shared(True), "recordings/": recording_turns()}
    print(f"# ASR window: {cpu_name()}; int8 on the CPU, greedy")
    print("# " + ", ".join(f"{name} {len(items)} utterances" for name, items in sets.items()))
    header = f"{'model':<8} {'window':<26}" + "".join(f"{name:>34}" for name in sets)
    print(header + "\n" + f"{'':<35}" + "   WER  numbers  p50 ms  p95 ms" * len(sets))
    for model in args.models:
        configs = [("30 s (faster-whisper)", {"window": "full"})]
        configs += [(f"fit: +2 s, floor {f:g} s", {"window": "fit", "min_window_s": f}) for f in args.floors]
        configs += [("auto: fit 10 s, numbers at 30", {"window": "auto", "min_window_s": 10})]
        whole = {"window": "auto", "min_window_s": 10, "numbers_whole": holds_order_id}
        configs += [("auto, whole numbers kept", {**whole, "nbest": 0})]
        configs += [("auto, kept, 10 readings", {**whole, "nbest": 10})]
        configs += [
            ("auto, kept, 10 readings, short numbers again", {**whole, "nbest": 10, "long_digits": 1})
        ]
        for name, options in configs:
            if args.only and not any(words in name for words in args.only):
                continue
            transcriber = Transcriber(model, **options)
            transcriber.transcribe(sets["human clips"][0][0])  # warm-up
            cells = ""
            for items in sets.values():
                s = score(transcriber, items)
                cells += (
                    f"{100 * s['wer']:6.1f}% {s['right']:>3}/{s['numbers']:<3} {s['p50']:7.0f} "
                    f"{s['p95']:7.0f}"
                )
            print(f"{model:<8} {name:<26}{cells}", flush=True)


if __name__ == "__main__":
    main()
