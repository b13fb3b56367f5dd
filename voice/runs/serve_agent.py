"""`ttfat serve-agent`: our voice agent on a Twilio-compatible media-stream WebSocket, for a phone provider
or any media-stream client (`ttfat probe` among them). Each connection is one call through the same
pipeline as `talk` (voice/pipeline/call.py), its audio through `LineSource` and `LineSpeaker`
(voice/runs/line.py), into one run directory: a record per turn on the agent's own clock, the summary
when the server stops.

A connection that closes before `start` is no call (a probe checking the URL). The caller's `start` may
name the call (`customParameters.call`); else the stream's id does. When the caller hangs up (`stop`,
or the connection closes), what is still running is recorded as cut short, as `talk` does on Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from collections.abc import Callable, Sequence

from voice.pipeline.call import Call
from voice.pipeline.settings import Settings
from voice.pipeline.stages import Stages
from voice.pipeline.turns import TurnDetector
from voice.record.runlog import RunLog
from voice.reports.summary import summarize
from voice.runs.line import LineSource, LineSpeaker
from voice.runs.talk import greet
from voice.runs.telephony import Media, Start, Stop, Twilio, WireError


async def answer_call(ws, stages: Stages, settings: Settings, log: RunLog, number: int) -> bool:
    """One connection: wait for `start`, then run the call until the caller hangs up. Whether it was a
    call (a connection closed before `start` is not)."""
    from websockets.exceptions import ConnectionClosed

    wire = Twilio()
    source = LineSource(TurnDetector(16000, settings.vad).frame_len, time.monotonic_ns)
    call: Call | None = None
    running: asyncio.Task | None = None
    try:
        async for message in ws:
            parsed = wire.parse(message)
            if isinstance(parsed, Start) and call is None:
                name = str(parsed.parameters.get("call") or parsed.stream_sid or f"call{number}")
                speaker = LineSpeaker(ws.send, wire, time.monotonic_ns)
                call = Call(name, None, stages, settings, speaker=speaker)
                log.watch(call.timeline)
                running = asyncio.create_task(_run(call, source, stages))
            elif isinstance(parsed, Media) and call is not None:
                source.feed(parsed.samples, wire.rate)
            elif isinstance(parsed, Stop):
                break
    except (ConnectionClosed, WireError) as e:
        if call is not None:
            call.timeline.emit(-1, "line_error", error=str(e))
    source.end()
    if running is None:
        return False
    running.cancel()  # the caller hung up: turns still running are recorded as cut short
    with contextlib.suppress(asyncio.CancelledError):
        await running
    if call.audio:
        await asyncio.to_thread(log.write_audio, call.timeline, call.audio)
    log.call_done(call.name)
    return True


async def _run(call: Call, source: LineSource, stages: Stages) -> None:
    if stages.agent.greeting:
        await greet(call.timeline, stages, call.speaker, stages.agent.greeting)
    await call.run(source)


async def serve(
    stages: Stages,
    settings: Settings,
    out,
    host: str,
    port: int,
    env: dict,
    mirrors: Sequence = (),
    ready: Callable[[str], None] = print,
) -> dict:
    """Serve until Ctrl-C, SIGTERM or cancelled; returns the run's summary. `ready` gets the URL once
    the socket listens."""
    from websockets.asyncio.server import serve as ws_serve

    async with contextlib.AsyncExitStack() as stack:
        for mirror in mirrors:
            await stack.enter_async_context(mirror)
        log = RunLog(out, mirrors)
        warmup = await stages.warm_up()
        calls = 0

        async def handler(ws) -> None:
            nonlocal calls
            answered = await answer_call(ws, stages, settings, log, calls + 1)
            calls += answered  # (not `calls += await ...`: that reads `calls` before the call, and loses
            # the count of any call that ended meanwhile)

        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):  # even where a shell started us with SIGINT ignored
            with contextlib.suppress(NotImplementedError, ValueError, RuntimeError):  # not the main thread
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        try:
            async with ws_serve(handler, host, port, compression=None, ping_interval=None) as server:
                bound = server.sockets[0].getsockname()
                ready(f"ws://{_host(host)}:{bound[1]}/")
                await stop.wait()
        except asyncio.CancelledError:
            pass
        finally:
            summary = summarize(log.records, {**env, "warmup_ms (excluded)": warmup, "calls": calls})
            log.close(summary)
    print(f"ttfat: {calls} calls answered", file=sys.stderr)
    return summary


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
