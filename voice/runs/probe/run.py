"""`ttfat probe`'s run: every call to the agent, N at a time (each its own connection), into a run directory
that `ttfat report`, `compare` and the HTML page read as they read a replay's.

Calls, manifests, resume and mirrors are as in `ttfat replay` (voice/runs/replay.py): a reference turn the
turn detector missed, a file that cannot be read, a call the agent ended: all are failed records, and
the other calls go on.

The probe never disturbs what it measures: the calls are made and recorded first, and heard (Whisper)
only once every call has ended, so no transcription shares the cores with a call's timestamps. How late
the event loop ran while the calls were made goes into the run's environment. The recordings wait in
memory until heard (about 64 KB a second of call at 8 kHz): beyond some thousands of calls, shard.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from voice.pipeline.audio import AudioError, load_audio
from voice.pipeline.settings import VadConfig
from voice.record.runlog import RunLog
from voice.record.turnaudio import CallAudio
from voice.runs.probe.lag import LoopLag, paused_gc
from voice.runs.probe.listening import Heard, Listener, write_turns
from voice.runs.probe.session import Session, call
from voice.runs.replay import CallInput, References, failed_records, opened
from voice.runs.telephony import protocol
from voice.timing.timeline import Timeline

# what a probe cannot see from outside; the report leaves these rows out (voice/timing/anchors.py, `outside`)
UNSEEN = "the endpoint, ASR, LLM (TTFAT), tools and TTS: only the agent sees them"


@dataclass
class Line:
    """How the probe calls: the agent's URL, the wire, how it plays what comes back."""

    url: str
    protocol: str = "twilio"
    rate: int = 16000  # the pcm protocol's
    playout_delay_ms: float = 0.0
    linger_s: float = 3.0  # after the recording, the call lasts until the agent has been quiet this long
    max_wait_s: float = 20.0  # ... at most this long


async def make_call(c: CallInput, line: Line, log: RunLog, level: int) -> Session | None:
    """The call, recorded (None: its file could not be read, recorded as a failed call)."""
    try:
        audio = await asyncio.to_thread(load_audio, c.path, c.channel)  # off the loop: other calls run
    except AudioError as e:
        print(f"ttfat: {e}", file=sys.stderr)
        log.write_records(at_level(failed_records(c.name, str(e), "error", c.reference or []), level))
        log.call_done(c.name)
        return None
    return await call(
        line.url,
        audio.samples,
        protocol(line.protocol, line.rate, c.name),
        delay_ms=line.playout_delay_ms,
        linger_s=line.linger_s,
        max_wait_s=line.max_wait_s,
    )


async def hear_call(
    c: CallInput, session: Session, line: Line, listener: Listener, vad: VadConfig, log: RunLog, level: int
):
    """A recorded call heard (Whisper), its turns written."""
    timeline = Timeline(c.name)
    log.watch(timeline)
    timeline.emit(-1, "call_start", session.origin_ns, url=line.url, protocol=line.protocol)
    refs = References(c.reference)
    heard = Heard.of(session)
    n = await write_turns(session, heard, timeline, listener, vad, refs, concurrency=level)
    timeline.emit(-1, "call_end", session.ended_ns, turns=n, failure=session.failure)
    log.write_audio(timeline, CallAudio.whole(session.origin_ns, session.sent, heard.audio))
    missed = refs.missed()
    if c.reference and missed:
        failed = failed_records(c.name, "the turn detector missed this turn", "no_answer", missed, n)
        log.write_records(at_level(failed, level))
    elif not n and not c.reference:
        log.write_records(
            at_level(failed_records(c.name, f"{c.path}: no speech found", "no_answer", []), level)
        )
    log.call_done(c.name)


def at_level(records: list[dict], level: int) -> list[dict]:
    return [{**r, "concurrency": level} for r in records]


def leveled(calls: list[CallInput], levels: Sequence[int]) -> list[tuple[int, list[CallInput]]]:
    """The calls of each level of a load curve: the same calls, named `CALL@LEVEL` when there are several."""
    if len(levels) == 1:
        return [(levels[0], calls)]
    return [(n, [replace(c, name=f"{c.name}@{n}") for c in calls]) for n in levels]


async def run_level(
    calls: list[CallInput], level: int, line: Line, listener: Listener, vad: VadConfig, log: RunLog
) -> dict:
    """The calls, `level` at once, then heard; returns how late the event loop ran while they were made."""
    from tqdm import tqdm

    gate, made = asyncio.Semaphore(level), {}
    with tqdm(total=len(calls), unit="call", desc=f"calls, {level} at once", file=sys.stderr) as bar:
        async with LoopLag() as lag, paused_gc():

            async def one(c: CallInput) -> None:
                async with gate:
                    made[c.name] = await make_call(c, line, log, level)
                bar.update()

            await asyncio.gather(*(one(c) for c in calls))
    for c in tqdm(calls, unit="call", desc="hearing", file=sys.stderr):
        if (session := made.pop(c.name)) is not None:
            await hear_call(c, session, line, listener, vad, log, level)
    return lag.stats()


async def run(
    calls: list[CallInput],
    line: Line,
    listener: Listener,
    out: Path,
    concurrency: int | Sequence[int],
    env: dict,
    mirrors: Sequence = (),
    resume: bool = False,
    vad: VadConfig | None = None,
) -> dict:
    """Every call, `concurrency` at once; several levels (a load curve) run one after the other."""
    from voice.reports.summary import LOOP_LAG, summarize

    vad = vad or VadConfig()
    levels = leveled(calls, [concurrency] if isinstance(concurrency, int) else list(concurrency))
    async with opened(out, [c for _, cs in levels for c in cs], env, mirrors, resume) as (log, todo, env):
        left, lags = {c.name for c in todo}, {}
        for level, cs in levels:
            lags[level] = await run_level([c for c in cs if c.name in left], level, line, listener, vad, log)
        lag = lags[level] if len(lags) == 1 else {f"{n} at once": v for n, v in lags.items()}
        env.setdefault("probe", {})[LOOP_LAG] = lag
        summary = summarize(log.records, env)
        log.close(summary)
    return summary
