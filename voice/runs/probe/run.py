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
from dataclasses import dataclass
from pathlib import Path

from voice.pipeline.audio import AudioError, load_audio
from voice.pipeline.settings import VadConfig
from voice.record.runlog import RunLog
from voice.record.turnaudio import CallAudio
from voice.runs.probe.lag import LoopLag
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


async def make_call(c: CallInput, line: Line, log: RunLog) -> Session | None:
    """The call, recorded (None: its file could not be read, recorded as a failed call)."""
    try:
        audio = await asyncio.to_thread(load_audio, c.path, c.channel)  # off the loop: other calls run
    except AudioError as e:
        print(f"ttfat: {e}", file=sys.stderr)
        log.write_records(failed_records(c.name, str(e), "error", c.reference or []))
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
    c: CallInput, session: Session, line: Line, listener: Listener, vad: VadConfig, log: RunLog
):
    """A recorded call heard (Whisper), its turns written."""
    timeline = Timeline(c.name)
    log.watch(timeline)
    timeline.emit(-1, "call_start", session.origin_ns, url=line.url, protocol=line.protocol)
    refs = References(c.reference)
    heard = Heard.of(session)
    n = await write_turns(session, heard, timeline, listener, vad, refs)
    timeline.emit(-1, "call_end", session.ended_ns, turns=n, failure=session.failure)
    log.write_audio(timeline, CallAudio.whole(session.origin_ns, session.sent, heard.audio))
    missed = refs.missed()
    if c.reference and missed:
        missed_turn = "the turn detector missed this turn"
        log.write_records(failed_records(c.name, missed_turn, "no_answer", missed, n))
    elif not n and not c.reference:
        log.write_records(failed_records(c.name, f"{c.path}: no speech found", "no_answer", []))
    log.call_done(c.name)


async def run(
    calls: list[CallInput],
    line: Line,
    listener: Listener,
    out: Path,
    concurrency: int,
    env: dict,
    mirrors: Sequence = (),
    resume: bool = False,
    vad: VadConfig | None = None,
) -> dict:
    from tqdm import tqdm

    from voice.reports.summary import summarize

    vad = vad or VadConfig()
    async with opened(out, calls, env, mirrors, resume) as (log, calls, env):
        gate, made = asyncio.Semaphore(concurrency), {}
        with tqdm(total=len(calls), unit="call", desc="calls", file=sys.stderr) as bar:
            async with LoopLag() as lag:

                async def one(c: CallInput) -> None:
                    async with gate:
                        made[c.name] = await make_call(c, line, log)
                    bar.update()

                await asyncio.gather(*(one(c) for c in calls))
        env.setdefault("probe", {})["event loop lag during the calls (ms)"] = lag.stats()
        for c in tqdm(calls, unit="call", desc="hearing", file=sys.stderr):
            if (session := made.pop(c.name)) is not None:
                await hear_call(c, session, line, listener, vad, log)
        summary = summarize(log.records, env)
        log.close(summary)
    return summary
