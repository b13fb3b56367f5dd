"""The stage interfaces of the pipeline, one small Protocol each, and `Stages`: the heavy parts all calls
of a run share. Real implementations: `asr.whisper.Transcriber`, `llm.agent.Agent` (over HTTP),
`tts.piper.Synthesizer`, `voice.pipeline.audio.SimulatedSpeaker` / `voice.runs.live.DeviceSpeaker`, and
`voice.pipeline.audio.RecordingSource` / `voice.runs.live.Microphone`."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Protocol

import numpy as np

from voice.pipeline.audio import RATE


class Transcript(Protocol):
    text: str
    compute_ms: float  # the ASR's own compute time


class Transcriber(Protocol):
    """16 kHz mono float32 -> the words, in one pass or two (a second, surer one when the first asks for
    it; asr/whisper.py). Blocking: the pipeline runs each pass in a worker thread."""

    def first_pass(self, audio: np.ndarray) -> Transcript: ...

    def needs_second_pass(self, first: Transcript) -> bool: ...

    def second_pass(self, audio: np.ndarray, first: Transcript) -> Transcript: ...


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
    def stream(self, text: str, whole: bool = False) -> Iterator[Speech]:
        """Text -> its audio in pieces, at least one; `whole`: a sentence each (blocking; each piece is
        made in a worker thread)."""


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


class TurnModel(Protocol):
    def complete(self, audio: np.ndarray) -> float:
        """The probability that the caller has finished the turn (blocking; run in a worker thread)."""


class Stages:
    """ASR, agent and TTS (and the turn model, when there is one), shared by all calls of a run. Each
    model runs one job at a time in a worker thread; waiting for it counts in that stage's time."""

    def __init__(
        self,
        transcriber: Transcriber,
        agent: Agent,
        synthesizer: Synthesizer,
        turn_model: TurnModel | None = None,
    ):
        self.transcriber, self.agent, self.synthesizer = transcriber, agent, synthesizer
        self.turn_model = turn_model
        self.asr_lock, self.tts_lock = asyncio.Lock(), asyncio.Lock()

    async def transcribe(
        self,
        audio: np.ndarray,
        started: asyncio.Event | None = None,
        stop: threading.Event | None = None,
        on_first: Callable[[Transcript], None] | None = None,
    ) -> Transcript:
        """The words of `audio`. `started` is set once the ASR has the model (until then, cancelling
        drops the job unrun); a set `stop` skips a second pass; `on_first` sees the first pass's words
        when a second pass follows."""
        async with self.asr_lock:
            if started:
                started.set()
            first = await asyncio.to_thread(self.transcriber.first_pass, audio)
            if not self.transcriber.needs_second_pass(first) or (stop and stop.is_set()):
                return first
            if on_first:
                on_first(first)
            return await asyncio.to_thread(self.transcriber.second_pass, audio, first)

    async def speak(self, text: str, whole: bool = False) -> AsyncIterator[Speech]:
        """The audio of `text` piece by piece, as soon as each is made (`whole`: a sentence at a time,
        `--no-stream-speech`). The voice makes the pieces ahead of whoever plays them, and is free for
        the next text once they are all made."""
        pieces: asyncio.Queue = asyncio.Queue()  # Speech, then None (or the exception that ended it)

        async def make() -> None:
            try:
                async with self.tts_lock:
                    stream = self.synthesizer.stream(text, whole)
                    while (piece := await asyncio.to_thread(next, stream, None)) is not None:
                        pieces.put_nowait(piece)
                pieces.put_nowait(None)
            except Exception as e:  # noqa: BLE001  raised where the pieces are awaited
                pieces.put_nowait(e)

        maker = asyncio.create_task(make())
        try:
            while (piece := await pieces.get()) is not None:
                if isinstance(piece, Exception):
                    raise piece
                yield piece
        finally:
            maker.cancel()

    async def warm_up(self) -> dict[str, float]:
        """Run each stage once outside any turn (first calls load models and fill caches) and say how
        long each took: warm-up is excluded from the results and reported, never silent."""
        times = {}
        silence = np.zeros(RATE, np.float32)

        async def asr():  # both passes: the first call of each is the slow one
            first = await asyncio.to_thread(self.transcriber.first_pass, silence)
            await asyncio.to_thread(self.transcriber.second_pass, silence, first)

        async def tts():
            async for _ in self.speak("Hello."):
                pass

        work = [
            ("asr", asr),
            ("tts", tts),
            ("llm", lambda: self.agent.turn("hello")),
        ]
        if self.turn_model:
            work.append(("turn model", lambda: asyncio.to_thread(self.turn_model.complete, silence)))
        for name, job in work:
            start = time.perf_counter()
            await job()
            times[name] = round((time.perf_counter() - start) * 1e3, 1)
        return times
