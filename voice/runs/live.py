"""Live audio for `ttfat talk`: the microphone as a pipeline source and the speaker as its playback
sink, through sounddevice (PortAudio).

Times come from the streams' own clocks, not from when our code ran: a captured frame is stamped with
the time its first sample reached the ADC (`inputBufferAdcTime`), and audio is "heard" when its first
sample reaches the DAC (`outputBufferDacTime`), which includes the device's output latency. Both are
converted to the monotonic clock of the pipeline, so live timings mean what replay timings mean.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import AsyncIterator

import numpy as np

from voice.pipeline.audio import RATE


class AudioDeviceError(RuntimeError):
    """No PortAudio, or no usable device; the message says how to fix it."""


def sounddevice():
    """Import sounddevice, explaining the fix when PortAudio is missing (it raises OSError there)."""
    try:
        import sounddevice as sd
    except OSError as e:
        raise AudioDeviceError(
            f"PortAudio is not installed ({e}). On Debian or Ubuntu: sudo apt-get install libportaudio2; "
            "on macOS: brew install portaudio"
        ) from e
    return sd


def list_devices() -> str:
    return str(sounddevice().query_devices())


def device_arg(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value


def stream_to_monotonic(stream_time: float, now_stream: float) -> int:
    """A PortAudio stream time (seconds) as monotonic ns, anchored at the callback's current time."""
    return time.monotonic_ns() + int((stream_time - now_stream) * 1e9)


class Microphone:
    """Frames of `frame_ms` at 16 kHz mono, each stamped on the monotonic clock; `origin_ns` is when
    sample 0 was captured, so sample n was captured at origin_ns + n / 16000 s. The device is opened
    at once (a wrong device fails before anything else starts) and started by `frames()`."""

    def __init__(self, device: int | str | None = None, frame_ms: int = 30):
        sd = sounddevice()
        self.origin_ns = self.overflows = 0
        self.queue: asyncio.Queue | None = None
        try:
            self.stream = sd.InputStream(
                samplerate=RATE,
                channels=1,
                dtype="float32",
                device=device,
                blocksize=RATE * frame_ms // 1000,
                latency="low",
                callback=self._callback,
            )
        except Exception as e:  # PortAudioError, or ValueError for an unknown device
            raise AudioDeviceError(f"cannot open the microphone {device or '(default)'}: {e}") from e

    def _callback(self, indata, frames, time_info, status) -> None:
        if status.input_overflow:
            self.overflows += 1
        if not self.origin_ns:
            self.origin_ns = stream_to_monotonic(time_info.inputBufferAdcTime, time_info.currentTime)
        self.loop.call_soon_threadsafe(self.queue.put_nowait, indata[:, 0].copy())

    async def frames(self) -> AsyncIterator[np.ndarray]:
        self.loop, self.queue = asyncio.get_running_loop(), asyncio.Queue()
        with self.stream:
            while True:
                yield await self.queue.get()


class DeviceSpeaker:
    """Plays synthesized audio on an output device; `play` returns when the audio starts being heard,
    `stop` cuts it (barge-in) and says when silence reached the listener."""

    def __init__(self, device: int | str | None = None, rate: int = 22050):
        self.rate = rate
        self.lock = threading.Lock()
        self.queue: deque[list] = deque()  # [samples, position, start future, loop]
        self.stopping: list = []  # futures waiting for the first silent buffer
        try:
            self.stream = sounddevice().OutputStream(
                samplerate=rate,
                channels=1,
                dtype="int16",
                device=device,
                latency="low",
                callback=self._callback,
            )
        except Exception as e:
            raise AudioDeviceError(f"cannot open the speaker {device or '(default)'}: {e}") from e
        self.stream.start()
        self.latency_ms = self.stream.latency * 1e3

    @property
    def playing(self) -> bool:
        with self.lock:
            return bool(self.queue)

    async def play(self, speech, ready_ns: int) -> tuple[int, int]:
        if speech.sample_rate != self.rate:
            raise ValueError(f"speaker opened at {self.rate} Hz, audio is {speech.sample_rate} Hz")
        loop = asyncio.get_running_loop()
        started = loop.create_future()
        with self.lock:
            self.queue.append([speech.audio, 0, started, loop])
        start = await started
        return start, start + int(speech.seconds * 1e9)

    async def drain(self, end_ns: int) -> None:
        """Wait until the audio queued so far has been heard (a barge-in can still cut it)."""
        await asyncio.sleep(max(0, end_ns - time.monotonic_ns()) / 1e9)

    async def stop(self) -> int:
        """Audio not yet heard is dropped; whoever waits on it is cancelled by its own caller."""
        loop = asyncio.get_running_loop()
        silent = loop.create_future()
        with self.lock:
            self.queue.clear()
            self.stopping.append((silent, loop))
        return await silent

    def _callback(self, outdata, frames, time_info, status) -> None:
        heard = stream_to_monotonic(time_info.outputBufferDacTime, time_info.currentTime)
        out = outdata[:, 0]
        out[:] = 0
        filled = 0
        with self.lock:
            for future, loop in self.stopping:
                loop.call_soon_threadsafe(_resolve, future, heard)
            self.stopping.clear()
            while self.queue and filled < frames:
                item = self.queue[0]
                samples, pos, started, loop = item
                if pos == 0:
                    loop.call_soon_threadsafe(_resolve, started, heard + filled * 1_000_000_000 // self.rate)
                n = min(frames - filled, len(samples) - pos)
                out[filled : filled + n] = samples[pos : pos + n]
                filled += n
                item[1] = pos + n
                if item[1] >= len(samples):
                    self.queue.popleft()

    def close(self) -> None:
        self.stream.close()


def _resolve(future: asyncio.Future, value: int) -> None:
    if not future.done():
        future.set_result(value)
