"""Hearing good enough to judge (issue 56): our agent's answers as a probe heard them over the phone line
(the turn clips of `bench/probe.py --keep DIR`: `ttfat serve-agent` probed with recordings/ over Twilio,
μ-law at 8 kHz), heard again by each Whisper model we bundle through the probe's own listening
(voice/runs/probe/listening.py: stretches, clauses, numbers as said). Prints, per model, the share of
turns whose facts were all heard, beside the share whose facts the agent's own words hold as far as they
were played (a caller who speaks again stops the agent: what was never played cannot be heard; the most
hearing can give), and the hearing's CPU time per call (all threads) and wall time.

    python bench/probe.py --keep DIR && python bench/hearing.py DIR [--models tiny.en base]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import time
from pathlib import Path

import soundfile as sf

from asr.whisper import Transcriber
from llm.agentfile import BUNDLED_AGENT, load_agent_file
from voice.pipeline.settings import Settings
from voice.record.environment import cpu_name
from voice.record.runlog import read_audio, read_run
from voice.reports.summary import facts_correct
from voice.runs.probe.agreement import same_turn
from voice.runs.probe.listening import Heard, Listener, heard_answer


def own_answer(probed: dict, agent: list[dict], until_s: float) -> str | None:
    """What the agent itself recorded saying to the turn a probe heard (joined as bench/probe.py does),
    up to `until_s` in the call's audio: a caller who speaks again there stops it (a barge-in), and
    what was never played cannot be heard."""
    if (near := same_turn(probed, agent)) is None:
        return None
    played = [c for c in near["clauses"] if near["speech_end_s"] + (c["heard_ms"] or 0) / 1000 < until_s]
    return " ".join(c["text"] for c in played)


def hear(model: str, clips: dict, fillers: tuple[str, ...]) -> tuple[dict, float, float]:
    """Each clip's answer as `model` hears it: {(call, turn): text}, CPU s and wall s of the hearing."""
    transcriber = Transcriber(model)
    cpu = 0.0

    async def words_of(audio):
        nonlocal cpu
        start = time.process_time()
        words = transcriber.words(audio)
        cpu += time.process_time() - start
        return words

    listener = Listener(words_of, Settings.min_clause_words, fillers)
    heard, wall = {}, time.monotonic()
    for key, clip in clips.items():
        audio = Heard.of_audio(sf.read(io.BytesIO(clip["data"]), dtype="float32")[0][:, 1])
        t0 = round(-clip["start_ms"] / 10)  # the clip starts before t0, on 10 ms frames
        heard[key] = asyncio.run(heard_answer(audio, t0, len(audio.loud), listener)).text
    return heard, cpu, time.monotonic() - wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="a `bench/probe.py --keep` directory (probe/ and agent/)")
    ap.add_argument("--models", nargs="+", default=["tiny.en", "base"])
    args = ap.parse_args()
    probed, _ = read_run(args.dir / "probe")
    agent, _ = read_run(args.dir / "agent")
    clips = read_audio(args.dir / "probe")
    calls = len({call for call, _ in clips})
    judged = [r for r in probed if r.get("reference") and r["reference"].get("facts")]
    judged = [r for r in judged if (r["call"], r["turn"]) in clips]
    key = lambda r: (r["call"], r["turn"])  # noqa: E731

    def right(r: dict, answer: str | None) -> bool:
        return answer is not None and facts_correct({"answer": answer}, r["reference"]["facts"])

    def row(name: str, ok: int, cost: str = "") -> None:
        print(f"{name:<28}{ok:>6} of {len(judged):<4}{ok / len(judged):>8.1%}{cost}")

    starts = {(r["call"], r["turn"]): r["reference"]["speech_start_s"] for r in probed if r.get("reference")}
    until = lambda r: starts.get((r["call"], r["turn"] + 1), float("inf"))  # noqa: E731  (the next turn)
    said = [r for r in judged if right(r, own_answer(r, agent, until(r)))]
    print(f"# {cpu_name()}; {len(clips)} turns of {calls} calls over Twilio μ-law, {len(judged)} with facts")
    print(f"{'heard by':<28}{'facts all heard':>16}{'share':>8}   hearing per call")
    row("the agent's own words, played", len(said))
    row("the probe's run (tiny.en)", sum(right(r, r["answer"]) for r in judged))
    for model in args.models:
        heard, cpu, wall = hear(model, clips, tuple(load_agent_file(BUNDLED_AGENT).fillers))
        row(
            model,
            sum(right(r, heard[key(r)]) for r in judged),
            f"   CPU {cpu / calls:.2f} s, wall {wall / calls:.2f} s",
        )
        for r in said:  # what the agent said and this model did not hear
            if not right(r, heard[key(r)]):
                print(f"    {r['call']} {r['turn']}: heard {heard[key(r)]!r}")


if __name__ == "__main__":
    main()
