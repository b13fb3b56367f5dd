"""Realtime replay of recordings/ with the bundled defaults: first useful audio heard p50/p95 (targets
<= 1000 / 1500 ms), TTFAT, the stages of the wait and the LLM's share of it, and the pipeline's own
overhead per turn and memory.

Overhead is what the pipeline adds on top of the stages: the time spent emitting and logging events
(measured around every `Timeline.emit`), the hand-off from transcript to LLM request, and event-loop
lag (how late a 10 ms ticker wakes up while calls run). The voice process's peak resident memory is
its own: the LLM server runs in a process of its own.

    python bench/pipeline.py [--mode realtime|fast] [--concurrency N] [--llm-model bundled|bundled-ar]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import sys
import time
from pathlib import Path

from asr.whisper import Transcriber
from llm.serving.client import OpenAIChat
from llm.serving.process import ServerProcess
from llm.support.models import model_dir, served_name
from llm.support.tools import store_agent
from tts.piper import Synthesizer
from voice.anchors import STAGES
from voice.environment import environment
from voice.replay import find_calls, run
from voice.report import percentile, text_report
from voice.settings import Settings
from voice.stages import Stages
from voice.timeline import Timeline

emit_ns: dict[tuple[str, int], int] = {}


def timed_emit(original):
    def emit(self, turn, name, t_ns=None, **data):
        start = time.perf_counter_ns()
        try:
            return original(self, turn, name, t_ns, **data)
        finally:
            key = (self.call, turn)
            emit_ns[key] = emit_ns.get(key, 0) + time.perf_counter_ns() - start

    return emit


async def with_lag_probe(work, lags: list[float]):
    async def probe():
        while True:
            start = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append((time.perf_counter() - start - 0.01) * 1e3)

    task = asyncio.create_task(probe())
    try:
        return await work
    finally:
        task.cancel()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="realtime", choices=["realtime", "fast"])
    ap.add_argument("--concurrency", type=int, default=1)
    ap.add_argument("--llm-model", default="bundled")
    ap.add_argument("--out", default="runs/bench-pipeline")
    args = ap.parse_args()
    Timeline.emit = timed_emit(Timeline.emit)
    calls = find_calls(["recordings"])
    settings = Settings(args.mode)
    lags: list[float] = []
    with ServerProcess(model_dir(args.llm_model), served_name(args.llm_model)) as url:
        stages = Stages(Transcriber(), store_agent(OpenAIChat(url)), Synthesizer())
        env = environment(mode=args.mode, concurrency=args.concurrency, llm_model=args.llm_model)
        summary = asyncio.run(
            with_lag_probe(run(calls, stages, settings, Path(args.out), args.concurrency, env), lags)
        )
    print(text_report(summary))
    turns = [json.loads(line) for line in (Path(args.out) / "turns.jsonl").read_text().splitlines()]
    ok = [t for t in turns if t["status"] == "ok"]
    stage = {
        s.label: [t[s.key] for t in ok if t[s.key] is not None]
        for s in STAGES if s.end != "last_audio_heard"
    }  # fmt: skip
    print(f"\nstage times over {len(ok)} answered turns (what first useful audio heard is made of):")
    for name, values in stage.items():
        show(name, values)
    print(f"dominant stage: {max(stage, key=lambda k: statistics.median(stage[k]))}")
    share = [100 * t["llm_share"] for t in ok if t.get("llm_share") is not None]
    show("LLM share of first useful audio heard", share, "%")
    per_turn = [v / 1e6 for (call, turn), v in emit_ns.items() if turn >= 0]
    handoff = [t["llm_request_ms"] - t["asr_ms"] for t in turns if t.get("llm_request_ms") is not None]
    print("\npipeline overhead per turn:")
    show("events emitted and logged", per_turn)
    show("transcript -> LLM request", handoff)
    show("event-loop lag (10 ms ticker)", lags)
    total = statistics.median(per_turn) + statistics.median(handoff)
    print(f"  total (events + hand-off), p50 {total:.2f} ms (target <= 5 ms)")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  voice process peak memory {rss:.0f} MiB (torch loaded: {'torch' in sys.modules})")
    m = summary["metrics"]["first_useful_audio_ms"]
    print(
        f"\nfirst useful audio heard: p50 {m['p50']} ms (target <= 1000), p95 {m['p95']} ms (target <= 1500)"
    )


def show(name: str, values: list[float], unit: str = "ms") -> None:
    p50, p95 = statistics.median(values), percentile(values, 95)
    print(f"  {name:<42} p50 {p50:8.2f} {unit:<2}   p95 {p95:8.2f} {unit:<2}   max {max(values):8.2f} {unit}")


if __name__ == "__main__":
    main()
