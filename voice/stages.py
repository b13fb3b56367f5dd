"""The stage interfaces of the pipeline, one small Protocol each, and `Stages`: the heavy parts all calls
of a run share. Real implementations: `asr.whisper.Transcriber`, `llm.agent.Agent` (over HTTP),
`tts.piper.Synthesizer`, `voice.audio.SimulatedSpeaker` / `voice.live.DeviceSpeaker`, and
`voice.audio.RecordingSource` / `voice.live.Microphone`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import numpy as np

from voice.audio import RATE


class Transcript(Protocol):
    text: str
    compute_ms: float  # the ASR's own compute time


class Transcriber(Protocol):
    def transcribe(self, audio: np.ndarray) -> Transcript:
        """16 kHz mono float32 -> the words (blocking; the pipeline runs it in a worker thread)."""


class Agent(Protocol):
    fillers: tuple[str, ...]  # what the model says before a tool call: never the useful answer

    async def turn(self, user_text: str, history: list[dict] | None = None, on_event: Callable | None = None):
        """One caller turn: tool calls and the answer, each step reported to `on_event` as it happens
        (llm.agent.AgentEvent); returns an llm.agent.TurnResult."""


class Speech(Protocol):
    audio: np.ndarray
    sample_rate: int

    @property
    def seconds(self) -> float: ...


class Synthesizer(Protocol):
    def speak(self, text: str) -> Speech:
        """Text -> audio (blocking; run in a worker thread)."""


class Speaker(Protocol):
    async def play(self, speech: Speech, ready_ns: int) -> tuple[int, int]:
        """Queue audio; return when it starts being heard, with its (start, end) heard times."""

    @property
    def playing(self) -> bool: ...

    async def drain(self, end_ns: int) -> None:
        """Return once the audio queued so far has been heard."""

    async def stop(self) -> int:
        """Cut playback; return the time silence starts being heard."""


class Source(Protocol):
    origin_ns: int  # when sample 0 was captured, on the call's clock (known after the first frame)

    def frames(self) -> AsyncIterator[np.ndarray]: ...


class Stages:
    """ASR, agent and TTS, shared by all calls of a run. Each model runs one job at a time in a worker
    thread; waiting for it counts in that stage's time."""

    def __init__(self, transcriber: Transcriber, agent: Agent, synthesizer: Synthesizer):
        self.transcriber, self.agent, self.synthesizer = transcriber, agent, synthesizer
        self.asr_lock, self.tts_lock = asyncio.Lock(), asyncio.Lock()

    async def transcribe(self, audio: np.ndarray) -> Transcript:
        async with self.asr_lock:
            return await asyncio.to_thread(self.transcriber.transcribe, audio)

    async def speak(self, text: str) -> Speech:
        async with self.tts_lock:
            return await asyncio.to_thread(self.synthesizer.speak, text)

    async def warm_up(self) -> dict[str, float]:
        """Run each stage once outside any turn (first calls load models and fill caches) and say how
        long each took: warm-up is excluded from the results and reported, never silent."""
        times = {}
        for name, work in [
            ("asr", lambda: self.transcribe(np.zeros(RATE, np.float32))),
            ("tts", lambda: self.speak("Hello.")),
            ("llm", lambda: self.agent.turn("hello")),
        ]:
            start = time.perf_counter()
            await work()
            times[name] = round((time.perf_counter() - start) * 1e3, 1)
        return times
