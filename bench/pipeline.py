"""Realtime replay through the whole pipeline, the serial one and the overlapped one side by side, and
what each lever of the overlap gives on its own (issue 19): first useful audio heard p50/p95 (targets
<= 450 / 800 ms on recordings/, <= 500 / 900 ms on calls made of the human clips of ../shared), the
stages of the wait, quality beside latency (WER, tool calls, answer facts, turns talked over and split),
wasted speculative work and CPU time per turn, the critical path (what each turn's caller was still
waiting on when the turn was over, and for how long), and the pipeline's own overhead and memory.

    python bench/pipeline.py [--calls recordings|human] [--line direct|phone] [--configs serial ...]
        [--mode fast]

Each config is `ttfat replay` with a few options (CONFIGS), built by replay's own code: "overlapped", with
none, is what `ttfat replay recordings/` runs (tests/test_pipeline.py holds the two equal).

Turns talked over and split: against the references (voice/reports/talkover.py, docs/timing.md). CPU
time is the voice process's and the LLM server's together, over the whole run, per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from calls import human_calls, phone_line

from llm.serving.models import model_dir, served_name
from llm.serving.process import ServerProcess
from llm.support.models import register_bundled
from ttfat.cli import build_parser
from ttfat.commands.replay import prepare
from ttfat.stack import open_stack
from voice.record.environment import cpu_name
from voice.reports.summary import percentile
from voice.runs.replay import find_calls, run
from voice.timing.anchors import STAGES
from voice.timing.timeline import CRITICAL_PATH, Timeline, waiting_on

# Each config is `ttfat replay` with these options, built by replay's own code (ttfat/commands/replay.py
# `prepare`, ttfat/stack.py `open_stack`: the agent file, its ASR and decoding): "overlapped", no options,
# is what a user gets. Each lever of the overlap alone on top of the serial pipeline, and all of them.
LEVER_FLAGS = {
    "speculate": "--no-speculate",
    "preempt": "--no-preempt",
    "first_clause_first": "--no-first-clause-first",
    "split_first_clause": "--no-split-first-clause",
    "stream_speech": "--no-stream-speech",
    "words_end_turns": "--no-words-end-turns",
}


def serial_but(*levers: str, window: str = "full") -> list[str]:
    """The serial pipeline (`--serial`: every lever off, Whisper's 30 s window) with `levers` on."""
    return [flag for lever, flag in LEVER_FLAGS.items() if lever not in levers] + ["--asr-window", window]


CONFIGS = {
    "serial": ["--serial"],
    "speculative asr": serial_but("speculate"),
    "+ preempted answer": serial_but("speculate", "preempt"),
    "first clause first": serial_but("first_clause_first"),
    "split first clause": serial_but("split_first_clause"),
    "words end turns": serial_but("speculate", "words_end_turns", window="auto"),
    "smart turn": [*serial_but(), "--smart-turn"],
    "whole numbers kept": [*serial_but(window="auto"), "--asr-readings", "0"],
    "numbers from 10 readings": serial_but(window="auto"),
    "streamed speech": serial_but("stream_speech"),
    "overlapped": [],
    "overlapped, numbers at 30 s": ["--asr-readings", "0"],
    "overlapped, first clause whole": ["--no-split-first-clause"],
    "overlapped, clauses whole": ["--no-stream-speech"],
    "overlapped, text turn": ["--text-turn"],
    "overlapped, smart turn": ["--smart-turn"],
}


def replay_args(name: str, paths: list[str], url: str, mode: str) -> argparse.Namespace:
    """`ttfat replay PATHS --llm-url URL --mode MODE` with the config's options, as its parser reads them."""
    return build_parser().parse_args(["replay", *paths, "--llm-url", url, "--mode", mode, *CONFIGS[name]])


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


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def replay_config(name: str, paths: list[str], server: str, pid: int, out: Path, mode: str) -> dict:
    args = replay_args(name, paths, server, mode)
    settings, plan = prepare(args)
    with contextlib.ExitStack() as stack:  # holds nothing: the server is the bench's (--llm-url)
        [(_, stages, env)] = open_stack(
            args, stack, settings, plan, mode=mode, config=name, options=CONFIGS[name]
        )
    lags: list[float] = []
    emit_ns.clear()
    cpu = time.process_time(), cpu_s(pid)

    async def replayed() -> dict:
        try:
            return await with_lag_probe(run(find_calls(paths), stages, settings, out, 1, env), lags)
        finally:  # closed on its own loop: left to the collector, it closes on the next config's, and fails
            await stages.agent.llm.client.close()

    summary = asyncio.run(replayed())
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    cpu_ms = ((time.process_time() - cpu[0]) * 1e3, (cpu_s(pid) - cpu[1]) * 1e3)
    waste = [t.get("discarded") or {} for t in turns]
    per_turn = [v / 1e6 for (_, turn), v in emit_ns.items() if turn >= 0]
    wasted = {
        k: sum(w.get(k, 0) for w in waste) / len(turns) for k in ("asr_runs", "asr_ms", "llm_runs", "llm_ms")
    }
    return {
        "summary": summary,
        "turns": turns,
        "lags": lags,
        "cpu_ms": [c / len(turns) for c in cpu_ms],
        "waste": wasted,
        "emit_ms": statistics.median(per_turn) if per_turn else 0.0,
    }


def fmt(v: float | None) -> str:
    return "-" if v is None else "inf" if v == float("inf") else f"{v:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", choices=["recordings", "human"], default="recordings")
    ap.add_argument(
        "--line", choices=["direct", "phone"], default="direct", help="phone: the calls through 8 kHz μ-law"
    )
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--mode", default="realtime", choices=["realtime", "fast"])
    ap.add_argument("--llm-model", default="bundled")
    ap.add_argument("--out", default="runs/bench-pipeline")
    args = ap.parse_args()
    register_bundled()
    Timeline.emit = timed_emit(Timeline.emit)
    tmp = Path(tempfile.mkdtemp(prefix="ttfat-human-"))
    paths = human_calls(tmp) if args.calls == "human" else ["recordings"]
    if args.line == "phone":
        paths = phone_line(paths, tmp / "phone")
    print(
        f"# pipeline bench: {cpu_name()}, {os.cpu_count()} cores; {args.calls} calls ({args.line} line), "
        f"{args.mode} replay, the bundled models (ASR tiny.en int8)"
    )
    results = {}
    process = ServerProcess(model_dir(args.llm_model), served_name(args.llm_model))
    with process as url:
        pid = process.proc.pid
        for name in args.configs:
            out = Path(args.out) / name.replace(" ", "-").replace("+", "plus").replace(",", "")
            results[name] = replay_config(name, paths, url, pid, out, args.mode)
            m = results[name]["summary"]["metrics"]["first_useful_audio_ms"]
            print(
                f"  {name}: first useful audio heard p50 {fmt(m['p50'])} ms, p95 {fmt(m['p95'])} ms",
                file=sys.stderr,
            )
    report(results)


def report(results: dict) -> None:
    base = results.get("serial")
    print(
        f"\n{'':<20}{'first useful audio':>20}{'TTFAT':>12}   {'quality (%)':<26}{'wasted per turn':>24}"
        f"{'CPU ms/turn':>14}"
    )
    print(
        f"{'config':<20}{'p50':>6}{'p95':>6}{'/serial':>8}{'p50':>6}{'p95':>6}   {'WER':>5}{'tools':>6}"
        f"{'facts':>6}"
        f"{'over':>5}{'split':>6}{'   ASR runs/ms  LLM runs/ms':>28}{'voice + LLM':>14}"
    )
    for name, r in results.items():
        print(row(name, r, base))
    print(f"\nstages of the wait, p50 / p95 ms (ok turns){'':<2}" + "".join(f"{n[:16]:>18}" for n in results))
    for stage in STAGES[:-1]:
        cells = ""
        for r in results.values():
            v = [t[stage.key] for t in r["turns"] if t["status"] == "ok" and t.get(stage.key) is not None]
            cells += f"{fmt(statistics.median(v)) + ' / ' + fmt(percentile(v, 95)) if v else '-':>18}"
        print(f"  {stage.label:<43}{cells}")
    print(critical_paths(results))
    for name, r in results.items():
        share = [100 * t["llm_share"] for t in r["turns"] if t.get("llm_share") is not None]
        s, lags = r["summary"], r["lags"]
        print(
            f"\n{name}: {s['turns']} turns, success {100 * s['success_rate']:.1f}%; LLM share p50 "
            f"{statistics.median(share) if share else 0:.1f}%; events {r['emit_ms']:.2f} ms/turn; "
            f"loop lag p50 {statistics.median(lags):.2f} / p95 {percentile(lags, 95):.2f} ms"
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\nvoice process peak memory {rss:.0f} MiB (torch loaded: {'torch' in sys.modules})")


def critical_paths(results: dict) -> str:
    """Per config, what the caller was still waiting on when each turn was declared over (`waiting_on`):
    how many turns, how long that work went on after the endpoint, and the whole wait after it; and that
    wait over all turns heard (the target: p50 <= 60, p95 <= 250 ms)."""
    head = f"{'turns':>6}{'ends after, p50 / p95':>24}{'heard after, p50 / p95':>25}"
    lines = [f"\n{'critical path: the work still running at the endpoint':<56}{head}"]
    for name, r in results.items():
        by_stage: dict[str, list[tuple[float, float]]] = {}
        for t in r["turns"]:
            if found := waiting_on(t):
                after = t["first_useful_audio_ms"] - t["endpoint_ms"]
                by_stage.setdefault(found[0], []).append((found[1], after))
        every = [row[1] for rows in by_stage.values() for row in rows]
        lines.append(f"  {name}: first useful audio heard after the endpoint, p50 / p95 {span(every)} ms")
        for waits, _ in CRITICAL_PATH:
            rows = by_stage.get(waits, [])
            cells = "".join(f"{span([r[i] for r in rows]):>{w}}" for i, w in ((0, 24), (1, 25)))
            lines.append(f"    {waits:<52}{len(rows):>6}{cells}")
    return "\n".join(lines)


def span(values: list[float]) -> str:
    return f"{fmt(statistics.median(values))} / {fmt(percentile(values, 95))}" if values else "-"


def row(name: str, r: dict, base: dict | None) -> str:
    metrics, q, w = r["summary"]["metrics"], r["summary"]["quality"], r["waste"]
    useful, ttfat = metrics["first_useful_audio_ms"], metrics["ttfat_ms"]
    ratio = ""
    if base:
        b = base["summary"]["metrics"]["first_useful_audio_ms"]
        ratio = f"{useful['p50'] / b['p50']:.2f}"
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}"  # noqa: E731
    over = r["summary"]["talked_over"]
    waste = f"{w['asr_runs']:.2f} / {w['asr_ms']:3.0f}  {w['llm_runs']:.2f} / {w['llm_ms']:3.0f}"
    return (
        f"{name:<20}{fmt(useful['p50']):>6}{fmt(useful['p95']):>6}{ratio:>8}{fmt(ttfat['p50']):>6}"
        f"{fmt(ttfat['p95']):>6}   {pct(q['wer']):>5}{pct(q['tool_call_accuracy']):>6}"
        f"{pct(q['fact_accuracy']):>6}"
        f"{over['turns']:>5}{over['split']:>6}{waste:>28}{r['cpu_ms'][0]:>8.0f} + {r['cpu_ms'][1]:.0f}"
    )


if __name__ == "__main__":
    main()
