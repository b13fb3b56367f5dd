"""Load held, measured (issue 22): N callers at once replaying recordings/ in a loop, in fast mode so
the cores are saturated, against one LLM server, for a given time. Prints turns completed, failed by
status, turns lost (started but never recorded: must be 0), the resident memory of the voice process
and of the server every 30 s with the leak check (after warm-up, the last third's mean within 5% of the
first third's), open server requests at the end (must be 0), file descriptors and threads at the start
and the end, and latency percentiles per minute (so that degradation over time shows).

    python bench/soak.py [--callers 16] [--minutes 10] [--json FILE]

Exits 1 when a check fails (lost turns, leaked requests, memory grown). The test suite runs a short one.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from asr.whisper import Transcriber
from llm.serving.client import OpenAIChat
from llm.serving.process import ServerProcess
from llm.support.models import BUNDLED
from llm.support.tools import store_agent
from tts.piper import Synthesizer
from voice.pipeline.settings import Settings
from voice.pipeline.stages import Stages
from voice.record.runlog import RunLog
from voice.reports.summary import percentile
from voice.runs.replay import find_calls, replay_call
from voice.timing.timeline import Timeline

SAMPLE_S = 30.0
# The voice process's resident memory rises fast for the first minutes of a 16-caller soak, while the
# malloc heap fills to what the busiest moments need (2026-12-02, 2 cores: 364 -> 720 MiB in 3 min,
# 790 by 6 min, then flat: +0.8% from minute 5 to 10). What is allocated swings by 150 MiB with the
# turns in flight. Of the creep seen before (+7%, 59 MiB, from minute 5 to 20), about half was the run
# log keeping every turn record for its summary (8.5 KiB each: 30 MiB in 20 minutes), which the soak's log
# no longer does; the rest, the heap still filling at minute 5 and 6.
WARMUP_S = 300.0


def rss_mib(pid: int | str = "self") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def threads(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


class _MallInfo2(ctypes.Structure):
    names = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    _fields_ = [(name, ctypes.c_size_t) for name in (*names, "keepcost")]


def heap_mib() -> dict:
    """This process's malloc heap as glibc sees it (every arena): `heap_mib`, all it has taken from the
    system (in use + freed but kept, the part of the resident memory malloc owns), and `heap_in_use_mib`,
    what is allocated now (native libraries' buffers included), which rises and falls with the turns in
    flight: a leak shows in the first; the second tells memory held from memory malloc keeps."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
    except (OSError, AttributeError):  # not glibc >= 2.33
        return {}
    mib = 1024 * 1024
    in_use = info.uordblks + info.hblkhd
    return {"heap_mib": round((in_use + info.fordblks) / mib, 1), "heap_in_use_mib": round(in_use / mib, 1)}


def deep_size(obj) -> int:
    """Bytes of a JSON-like object and everything in it (strings shared between records counted each
    time: an upper bound)."""
    if isinstance(obj, dict):
        return sys.getsizeof(obj) + sum(deep_size(k) + deep_size(v) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        return sys.getsizeof(obj) + sum(deep_size(v) for v in obj)
    return sys.getsizeof(obj)


def fds(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def handles(server_pid: int) -> dict:
    return {
        "fds": fds(),
        "threads": threads(),
        "server_fds": fds(server_pid),
        "server_threads": threads(server_pid),
    }


@dataclass
class Written:
    """What the soak keeps of a record (not the record: thousands of them would be memory the voice
    process is charged with, growing for as long as the soak runs)."""

    at: float  # monotonic s
    call: str
    turn: int
    status: str
    heard_ms: float | None  # first useful audio heard
    error: str | None = None


class SoakLog(RunLog):
    """The run log, noting when each record was written and which turns were ever started."""

    def __init__(self, out: Path):
        super().__init__(out)
        self.written: list[Written] = []
        self.started: set[tuple[str, int]] = set()

    def watch(self, timeline: Timeline) -> None:
        super().watch(timeline)
        timeline.observers.append(lambda e: e.turn >= 0 and self.started.add((timeline.call, e.turn)))

    def write_turn(self, record: dict) -> None:
        """To turns.jsonl, and kept only as a `Written`: the base log also keeps every record, for the
        summary at the end of a replay, memory that would grow for as long as the soak runs."""
        self._write(self.turns, record)
        self.written.append(
            Written(
                time.monotonic(),
                record["call"],
                record["turn"],
                record["status"],
                record.get("first_useful_audio_ms"),
                record.get("error"),
            )
        )


def leak_check(memory: list[dict], key: str, warmup_s: float = 0.0) -> dict:
    """The last third's mean against the first third's, of the samples taken after `warmup_s` (the one
    taken at the start, before any call, never counts)."""
    kept = [m[key] for m in memory if m["s"] > warmup_s]
    third = max(1, len(kept) // 3)
    first, last = kept[:third], kept[-third:]
    mean = lambda xs: sum(xs) / len(xs) if xs else 0.0  # noqa: E731
    growth = mean(last) / mean(first) - 1 if first and mean(first) else 0.0
    return {
        "first_third_mib": round(mean(first), 1),
        "last_third_mib": round(mean(last), 1),
        "growth": round(growth, 4),
        "ok": growth <= 0.05,
    }


async def soak(
    stages: Stages,
    server_pid: int,
    url: str,
    callers: int,
    seconds: float,
    out: Path,
    warmup_s: float = 0.0,
    record_audio: bool = True,
) -> dict:
    calls = find_calls(["recordings"])
    settings = Settings("fast", record_audio=record_audio)
    log = SoakLog(out)
    names = itertools.count()
    deadline = time.monotonic() + seconds
    memory: list[dict] = []
    start = handles(server_pid)

    async def caller(k: int) -> None:
        for call in itertools.cycle(calls[k % len(calls) :] + calls[: k % len(calls)]):
            if time.monotonic() >= deadline:
                return
            await replay_call(replace(call, name=f"{call.name}-{next(names)}"), stages, settings, log)

    async def sampler() -> None:
        t0 = time.monotonic()
        while True:
            memory.append(
                {
                    "s": round(time.monotonic() - t0),
                    "voice_mib": round(rss_mib(), 1),
                    "server_mib": round(rss_mib(server_pid), 1),
                    **heap_mib(),
                }
            )
            await asyncio.sleep(SAMPLE_S)

    await stages.warm_up()
    began = time.monotonic()
    sampling = asyncio.create_task(sampler())
    await asyncio.gather(*(caller(k) for k in range(callers)))
    sampling.cancel()
    memory.append(
        {
            "s": round(time.monotonic() - began),
            "voice_mib": round(rss_mib(), 1),
            "server_mib": round(rss_mib(server_pid), 1),
            **heap_mib(),
        }
    )
    health = httpx.get(url.removesuffix("/v1") + "/health", timeout=10).json()
    records = log.written
    recorded = {(r.call, r.turn) for r in records}
    by_status = Counter(r.status for r in records)
    by_error = Counter(r.error for r in records if r.error)
    minutes = []
    for minute in range(int((time.monotonic() - began) // 60) + 1):
        heard = [r.heard_ms for r in records if int((r.at - began) // 60) == minute]
        values = [float("inf") if v is None else v for v in heard]
        minutes.append(
            {
                "minute": minute + 1,
                "turns": len(values),
                "p50": percentile(values, 50) if values else None,
                "p95": percentile(values, 95) if values else None,
            }
        )
    log.close({"soak": True})
    kept = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    end = handles(server_pid)
    return {
        "callers": callers,
        "seconds": round(time.monotonic() - began, 1),
        "turns": len(records),
        "by_status": dict(by_status),
        "by_error": dict(by_error.most_common()),
        "lost": sorted(f"{c}/{t}" for c, t in log.started - recorded),
        "open_requests_at_end": health["running"] + health["waiting"],
        "memory": memory,
        "voice_leak": leak_check(memory, "voice_mib", warmup_s),
        "server_leak": leak_check(memory, "server_mib", warmup_s),
        "voice_heap": leak_check(memory, "heap_mib", warmup_s) if "heap_mib" in memory[0] else None,
        "start": start,
        "end": end,
        "per_minute": minutes,
        "records_mib": round(deep_size(kept) / 2**20, 1),  # what a RunLog keeping them would hold
    }


def print_report(r: dict) -> None:
    print(
        f"# soak: {r['callers']} callers, {r['seconds']:.0f} s, fast replay of recordings/ in a loop, "
        f"{os.cpu_count()} cores"
    )
    print(
        f"turns {r['turns']}  by status {r['by_status']}  lost {len(r['lost'])}  "
        f"open requests at the end {r['open_requests_at_end']}"
    )
    for error, n in r["by_error"].items():
        print(f"  {n:5d} x {error}")
    samples = [f"{m['s']}s: voice {m['voice_mib']:.0f} / server {m['server_mib']:.0f}" for m in r["memory"]]
    print("memory (MiB)  " + "  ".join(samples))
    for who in ("voice", "server"):
        leak = r[f"{who}_leak"]
        verdict = "ok" if leak["ok"] else "GROWN"
        print(
            f"{who} leak check: first third {leak['first_third_mib']} MiB, last third "
            f"{leak['last_third_mib']} MiB, growth {100 * leak['growth']:+.1f}% ({verdict})"
        )
    if heap := r.get("voice_heap"):
        in_use = [m["heap_in_use_mib"] for m in r["memory"][1:]]
        print(
            f"voice malloc heap: first third {heap['first_third_mib']} MiB, last third "
            f"{heap['last_third_mib']} MiB, growth {100 * heap['growth']:+.1f}% (in use "
            f"{min(in_use, default=0):.0f}-{max(in_use, default=0):.0f} MiB)"
        )
    print(
        f"turn records: {r['records_mib']} MiB as Python objects (a replay's log keeps them for its "
        "summary; the soak's does not, so that its memory is the pipeline's)"
    )
    print(
        f"fds {r['start']['fds']} -> {r['end']['fds']} (server {r['start']['server_fds']} -> "
        f"{r['end']['server_fds']}), threads {r['start']['threads']} -> {r['end']['threads']} (server "
        f"{r['start']['server_threads']} -> {r['end']['server_threads']})"
    )
    print(
        "first useful audio heard per minute (ms): "
        + "  ".join(
            f"m{m['minute']} p50 {m['p50']:.0f} p95 {m['p95']:.0f} (n {m['turns']})"
            for m in r["per_minute"]
            if m["turns"]
        )
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--callers", type=int, default=16)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--json", help="also write the figures as JSON here")
    ap.add_argument("--no-audio", action="store_true", help="keep no turn clips (as replay --no-audio)")
    ap.add_argument(
        "--warmup-s",
        type=float,
        default=None,
        help="seconds of samples the leak check leaves out (default: 300, at most half the run: "
        "the voice process's memory fills for the first minutes, see WARMUP_S)",
    )
    args = ap.parse_args()
    warmup_s = min(WARMUP_S, args.minutes * 30) if args.warmup_s is None else args.warmup_s
    global SAMPLE_S
    SAMPLE_S = min(SAMPLE_S, args.minutes * 60 / 6)  # at least six samples, for the thirds
    out = Path(tempfile.mkdtemp(prefix="ttfat-soak-"))
    server = ServerProcess(BUNDLED["bundled"], "bundled")
    with server as url:
        agent = store_agent(OpenAIChat(url, model="bundled"))
        stages = Stages(Transcriber(window="auto"), agent, Synthesizer())
        result = asyncio.run(
            soak(
                stages,
                server.proc.pid,
                url,
                args.callers,
                args.minutes * 60,
                out,
                warmup_s,
                record_audio=not args.no_audio,
            )
        )
    shutil.rmtree(out, ignore_errors=True)  # its records and turn clips: the figures are all in `result`
    print_report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    ok = (
        not result["lost"]
        and result["open_requests_at_end"] == 0
        and result["voice_leak"]["ok"]
        and (result["server_leak"]["ok"])
    )
    print("checks: " + ("all passed" if ok else "FAILED"), file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
