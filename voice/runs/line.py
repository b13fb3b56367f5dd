"""The pipeline's source and speaker on a phone line: a media-stream WebSocket (voice/runs/telephony.py), as
`ttfat serve-agent` answers calls.

`LineSource`: the caller's audio as it arrives, 16 kHz frames for the turn detector; sample 0 was
captured one message before the first message arrived, and later samples follow at the audio's rate.
It is resampled as a stream (soxr's quick cubic: a line's audio has nothing above 4 kHz, and a better
filter would hold back 30 ms of every message, delaying each endpoint by as much).
`LineSpeaker`: the answer's audio goes out as soon as it is made (the provider buffers it and plays it
in order), and is heard as a phone plays it: from when it was sent or when the audio before it ends,
whichever is later (`SimulatedSpeaker`'s rule, on the call's clock). A barge-in sends `clear`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import numpy as np

from voice.pipeline.audio import RATE, SimulatedSpeaker, resample, to_float
from voice.runs.telephony import FRAME_MS, Twilio


class LineSource:
    def __init__(self, frame_len: int, clock):
        self.frame_len, self.clock = frame_len, clock
        self.origin_ns = 0
        self.resampler = None
        self.buffer = np.zeros(0, dtype=np.float32)
        self.queue: asyncio.Queue[np.ndarray | None] = asyncio.Queue()

    def feed(self, samples: np.ndarray, rate: int) -> None:
        """A message's audio, arrived now."""
        import soxr

        if not self.origin_ns:
            self.origin_ns = self.clock() - len(samples) * 1_000_000_000 // rate
            self.resampler = soxr.ResampleStream(rate, RATE, 1, dtype="float32", quality="QQ")
        self.buffer = np.concatenate([self.buffer, self.resampler.resample_chunk(samples)])
        while len(self.buffer) >= self.frame_len:
            self.queue.put_nowait(self.buffer[: self.frame_len])
            self.buffer = self.buffer[self.frame_len :]

    def end(self) -> None:
        self.queue.put_nowait(None)

    async def frames(self) -> AsyncIterator[np.ndarray]:
        while (frame := await self.queue.get()) is not None:
            yield frame


class LineSpeaker:
    def __init__(self, send: Callable[[str], Awaitable[None]], wire: Twilio, clock):
        self.send, self.wire, self.clock = send, wire, clock
        self.timing = SimulatedSpeaker(0.0, clock, lived=True)
        self.step = wire.rate * FRAME_MS // 1000

    @property
    def playing(self) -> bool:
        return self.timing.playing

    async def play(self, speech, ready_ns: int) -> tuple[int, int]:
        audio = resample(to_float(np.asarray(speech.audio)), speech.sample_rate, self.wire.rate)
        sent = self.clock()
        for i in range(0, len(audio), self.step):
            await self.send(self.wire.agent_media(audio[i : i + self.step]))
        return await self.timing.play(speech, sent)

    async def drain(self, end_ns: int) -> None:
        await self.timing.drain(end_ns)

    async def stop(self) -> int:
        await self.send(self.wire.clear())
        return await self.timing.stop()
