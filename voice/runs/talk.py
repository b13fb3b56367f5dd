"""`ttfat talk`: one live call through the same pipeline, run directory and report as replay.

The console is one more observer of the timeline: it prints the caller's words when the transcript is
final, and the answer with its timings when the turn is done. Ctrl-C (or `--seconds`) ends the call;
turns still running are recorded as unanswered and the run directory is completed either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Sequence

from voice.pipeline.call import Call
from voice.pipeline.settings import Settings
from voice.pipeline.stages import Stages
from voice.record.runlog import RunLog
from voice.reports.summary import summarize
from voice.timing.anchors import ANCHORS
from voice.timing.timeline import Event, Timeline


def console(timeline: Timeline, out=sys.stdout):
    """An observer that shows the conversation and each turn's timings as they happen."""

    def show(event: Event) -> None:
        if event.name == "asr_final":
            print(f"caller: {event.data.get('text') or '(no words)'}", file=out, flush=True)
        elif event.name == "barge_in":
            print(f"  (barge-in: playback stopped {event.data['stop_ms']:.0f} ms after you spoke)", file=out)
        elif event.name == "turn_done":
            record = timeline.turns[event.turn]
            ms = record.ms()
            shown = [
                f"{a.label} {'-' if ms[a.metric] is None else f'{ms[a.metric]:.0f} ms'}"
                for a in ANCHORS
                if a.console
            ]
            print(f"agent:  {record.answer or '(' + (record.error or record.status) + ')'}", file=out)
            print(f"  {' · '.join(shown)}  [{record.status}]", file=out, flush=True)

    return show


async def greet(timeline: Timeline, stages: Stages, speaker, text: str) -> None:
    """The agent file's greeting, spoken when the call starts and heard in full before the agent
    listens (the `greeting` event: when it was heard, until when)."""
    start = None
    async with contextlib.aclosing(stages.speak(text)) as pieces:  # Ctrl-C frees the voice at once
        async for piece in pieces:
            heard, end = await speaker.play(piece, time.monotonic_ns())
            start = heard if start is None else start
    timeline.emit(-1, "greeting", start, text=text, heard_until_ns=end)
    await speaker.drain(end)


async def talk(
    stages: Stages,
    settings: Settings,
    out,
    microphone,
    speaker,
    env: dict,
    mirrors: Sequence = (),
    seconds: float | None = None,
) -> dict:
    """`mirrors`: the MQTT publisher, the trace exporter (each an async context manager)."""
    async with contextlib.AsyncExitStack() as stack:
        for mirror in mirrors:
            await stack.enter_async_context(mirror)
        log = RunLog(out, mirrors)
        warmup = await stages.warm_up()
        call = Call("talk", None, stages, settings, speaker=speaker)
        log.watch(call.timeline)
        call.timeline.observers.append(console(call.timeline))
        print("ttfat: listening (Ctrl-C ends the call)", file=sys.stderr, flush=True)
        if stages.agent.greeting:
            await greet(call.timeline, stages, speaker, stages.agent.greeting)
        # the end of the call (Ctrl-C or --seconds): every turn already has its record
        with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError, KeyboardInterrupt):
            await asyncio.wait_for(call.run(microphone), seconds)
        if call.audio:
            await asyncio.to_thread(log.write_audio, call.timeline, call.audio)
        # input overflows mean captured audio was lost, so live timings for it are not to be trusted
        live = {"input_overflows": microphone.overflows}
        summary = summarize(log.records, {**env, **live, "warmup_ms (excluded)": warmup})
        log.close(summary)
    return summary
