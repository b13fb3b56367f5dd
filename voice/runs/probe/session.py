"""One call to a voice agent over its media-stream WebSocket (voice/runs/telephony.py), as a phone line makes
it: the caller's audio goes out at its real pace, 20 ms a message, silence included (and silence after
the recording ends, until the agent has been quiet for `linger_s`); what comes back is stamped on
arrival and played out (`Playout`). Everything is on the probe's monotonic clock: sample 0 of the
caller's audio was "captured" at `origin_ns`, 20 ms before its message went out.

An agent that closes the call, or sends what its protocol does not allow, ends the call: `Session`
says why and when, and keeps what it heard until then. Only a connection that cannot be opened at all
raises (`ProbeConnectError`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from llm.clock import ns
from voice.pipeline.audio import RATE, resample
from voice.runs.probe.playout import Playout
from voice.runs.telephony import FRAME_MS, Clear, Mark, Media, Pcm, Twilio, WireError

MAX_MESSAGE = 1 << 20  # bytes: a message larger than this fails the call (1 s of 8 kHz μ-law is 11 KB)


class ProbeConnectError(ConnectionError):
    """The agent's URL refused the connection or the WebSocket handshake failed."""


@dataclass
class Session:
    """What one call brought back."""

    rate: int  # the wire's
    sent: np.ndarray  # the caller's audio as the agent got it (the wire's encoding undone), at 16 kHz
    playout: Playout
    origin_ns: int = 0
    ended_ns: int = 0
    failure: str | None = None  # why the call ended before the probe ended it
    marks: list[tuple[int, str]] = field(default_factory=list)  # the agent's marks to play: (heard by, name)


@functools.cache
def stamped_connection():
    """A websockets client connection that stamps each message when its bytes reach the connection,
    before it waits its turn in the message queue: under load (many calls' answers arriving at once)
    the queue, not the wire, would otherwise set the time a chunk was heard."""
    from websockets.asyncio.client import ClientConnection
    from websockets.frames import DATA_OPCODES, Frame

    class Stamped(ClientConnection):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.clock, self.stamps = time.monotonic_ns, deque()

        def process_event(self, event) -> None:
            if isinstance(event, Frame) and event.opcode in DATA_OPCODES and event.fin:
                self.stamps.append(self.clock())
            super().process_event(event)

    return Stamped


async def connect(url: str, timeout_s: float = 10.0):
    """The agent's WebSocket, open (stamping its messages); one-line `ProbeConnectError` when it cannot be."""
    from websockets.asyncio.client import connect as ws_connect
    from websockets.exceptions import InvalidHandshake, InvalidURI

    try:
        return await ws_connect(
            url,
            open_timeout=timeout_s,
            max_size=MAX_MESSAGE,
            compression=None,
            proxy=None,
            ping_interval=None,
            create_connection=stamped_connection(),
        )
    except InvalidURI as e:
        raise ProbeConnectError(f"{url}: not a WebSocket URL ({e})") from None
    except InvalidHandshake as e:
        raise ProbeConnectError(f"{url}: the WebSocket handshake failed ({e})") from None
    except (OSError, TimeoutError) as e:
        raise ProbeConnectError(f"{url}: cannot connect ({e.strerror or e or type(e).__name__})") from None


async def check_url(url: str) -> None:
    """Open and close a connection (before anything slow starts): refuses a URL no call could reach."""
    ws = await connect(url)
    await ws.close()


async def call(
    url: str,
    samples: np.ndarray,
    wire: Twilio | Pcm,
    *,
    delay_ms: float = 0.0,
    linger_s: float = 3.0,
    max_wait_s: float = 20.0,
    clock=time.monotonic_ns,
) -> Session:
    """`samples`: the caller's audio at 16 kHz. The call lasts the recording, then until the agent has
    been quiet for `linger_s` (heard and sent), at most `max_wait_s` past the recording's end."""
    frames, received = await asyncio.to_thread(_framed, samples, wire)  # off the loop: other calls run
    session = Session(wire.rate, received, Playout(wire.rate, ns(delay_ms)))
    try:
        ws = await connect(url)
    except ProbeConnectError as e:
        session.failure = str(e)
        session.origin_ns = session.ended_ns = clock()
        return session
    ws.clock = clock
    last = [clock()]  # when the agent last sent something
    async with ws:
        for message in wire.opening():
            await ws.send(message)
        session.origin_ns = clock()
        receiving = asyncio.create_task(_receive(ws, wire, session, last, clock))
        sending = asyncio.create_task(_send(ws, wire, frames, session, last, (linger_s, max_wait_s), clock))
        await asyncio.wait([receiving, sending], return_when=asyncio.FIRST_COMPLETED)
        session.ended_ns = clock()
        for task in (receiving, sending):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if session.failure is None:
            with contextlib.suppress(Exception):
                if (closing := wire.closing()) is not None:
                    await ws.send(closing)
    return session


def _framed(samples: np.ndarray, wire: Twilio | Pcm) -> tuple[list[np.ndarray], np.ndarray]:
    """The caller's audio (16 kHz) in the wire's frames, and as the agent decodes it: the wire's encoding
    undone, back at 16 kHz."""
    out = resample(samples, RATE, wire.rate)
    frame = wire.rate * FRAME_MS // 1000
    frames = [out[i : i + frame] for i in range(0, len(out) - frame + 1, frame)]
    if not frames:
        return frames, np.zeros(0, dtype=np.float32)
    return frames, resample(wire.carried(np.concatenate(frames)), wire.rate, RATE)


async def _send(ws, wire, frames, session: Session, last: list[int], waits: tuple[float, float], clock):
    """The recording at its pace, then silence until the agent has been quiet for `linger_s`."""
    from websockets.exceptions import ConnectionClosed

    linger_s, max_wait_s = waits
    silence = np.zeros(wire.rate * FRAME_MS // 1000, dtype=np.float32)
    step_ns = FRAME_MS * 1_000_000
    end_ns = session.origin_ns + len(frames) * step_ns
    i = 0
    try:
        while True:
            due = session.origin_ns + (i + 1) * step_ns
            if (wait := due - clock()) > 0:
                await asyncio.sleep(wait / 1e9)
            now = clock()
            if i >= len(frames):
                quiet = now - max(last[0], session.playout.busy_until_ns, end_ns)
                if quiet >= linger_s * 1e9 or now - end_ns >= max_wait_s * 1e9:
                    return
            await ws.send(wire.caller_media(frames[i] if i < len(frames) else silence, i * FRAME_MS))
            await _echo(ws, wire, session, now)
            i += 1
    except ConnectionClosed as e:
        _closed(session, e, clock())


async def _receive(ws, wire, session: Session, last: list[int], clock) -> None:
    from websockets.exceptions import ConnectionClosed

    try:
        async for message in ws:
            now = ws.stamps.popleft()  # when it reached the connection
            last[0] = now
            try:
                parsed = wire.parse(message)
            except WireError as e:
                session.failure = f"the agent sent {e} ({_at(session, now)})"
                return
            if isinstance(parsed, Media):
                session.playout.arrive(now, parsed.samples)
            elif isinstance(parsed, Clear):
                session.playout.clear(now)
                await _echo(ws, wire, session, None)  # a clear plays out every mark at once
            elif isinstance(parsed, Mark):
                session.marks.append((session.playout.busy_until_ns, parsed.name))
            # a queued message is handed over without yielding: yield, so that the other calls' bytes
            # are stamped as they come, not after this call's burst
            await asyncio.sleep(0)
    except ConnectionClosed as e:
        _closed(session, e, clock())


async def _echo(ws, wire, session: Session, now: int | None) -> None:
    """Tell the agent which of its marks have played by `now` (all of them when `now` is None)."""
    due = [m for m in session.marks if now is None or m[0] <= now]
    session.marks = [m for m in session.marks if m not in due]
    for _, name in due:
        if (message := wire.mark_played(name)) is not None:
            await ws.send(message)


def _closed(session: Session, e, now: int) -> None:
    from websockets.exceptions import PayloadTooBig

    if session.failure is not None:
        return
    cause = e.__cause__ if e.__cause__ else None
    if isinstance(cause, PayloadTooBig):
        session.failure = f"the agent sent a message over {MAX_MESSAGE} bytes ({_at(session, now)})"
        return
    code = e.rcvd.code if e.rcvd else (e.sent.code if e.sent else None)
    reason = f": {e.rcvd.reason}" if e.rcvd and e.rcvd.reason else ""
    session.failure = f"the agent closed the call (code {code}{reason}; {_at(session, now)})"


def _at(session: Session, now: int) -> str:
    return f"{(now - session.origin_ns) / 1e9:.1f} s into the call"
