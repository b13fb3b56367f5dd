"""One call through the voice pipeline: audio -> turns -> ASR -> agent -> clauses -> TTS -> playback.

Stages only emit events on the call's `Timeline`; the turn record and every metric are derived there
(`voice/timeline.py`). CPU-heavy work (ASR, TTS) runs in worker threads and the LLM in its own server
process, so one stage's compute does not stall the event loop that timestamps the others.

Per turn: the caller audio is fed frame by frame at its own pace (realtime) or as fast as possible
while no turn is in flight (fast). When the detector declares the endpoint, the turn task transcribes,
runs the agent (tool calls against the store), turns the streamed content into clauses, speaks each
clause and plays it on the sink. A turn that fails keeps every anchor it reached and its status.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from llm.agent import Agent, Delta
from voice.audio import RATE, SimulatedSpeaker
from voice.chunker import Chunker, Clause
from voice.timeline import CallClock, Timeline, TurnRecord
from voice.turns import Turn, TurnDetector, VadConfig

MODES = ("realtime", "fast")


@dataclass
class Settings:
    """Everything that shapes the timing of a run; reports print it."""

    mode: str = "realtime"
    vad: VadConfig = field(default_factory=VadConfig)
    turn_timeout_s: float = 20.0  # from the endpoint to the last clause spoken
    playback_latency_ms: float = 0.0  # the simulated device's output latency
    min_clause_words: int = 4
    filler_grace_ms: float = 400.0  # a filler is spoken only if no useful words follow within this
    barge_in: bool = True  # caller speech during an answer stops playback and cancels the answer

    def validate(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"replay mode must be one of {MODES}, not {self.mode!r}")
        if self.turn_timeout_s <= 0:
            raise ValueError("the turn timeout must be positive")


class Stages:
    """The heavy parts shared by all calls of a run: ASR, agent (LLM client + store) and TTS. Each
    model runs one job at a time in a worker thread; waiting for it counts in that stage's time."""

    def __init__(self, transcriber, agent: Agent, synthesizer):
        self.transcriber, self.agent, self.synthesizer = transcriber, agent, synthesizer
        self.asr_lock, self.tts_lock = asyncio.Lock(), asyncio.Lock()

    async def transcribe(self, audio: np.ndarray) -> str:
        async with self.asr_lock:
            return (await asyncio.to_thread(self.transcriber.transcribe, audio)).text

    async def speak(self, text: str):
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


class Speaker(Protocol):
    async def play(self, speech, ready_ns: int) -> tuple[int, int]:
        """Queue audio; return when it starts being heard, with its (start, end) heard times."""

    @property
    def playing(self) -> bool: ...

    async def drain(self, end_ns: int) -> None:
        """Return once the audio queued so far has been heard (live), or at once (simulated)."""

    async def stop(self) -> int:
        """Cut playback; return the time silence starts being heard."""


class Source(Protocol):
    origin_ns: int  # when sample 0 was captured, on the call's clock (known after the first frame)

    def frames(self) -> AsyncIterator[np.ndarray]: ...


class Call:
    """One call through the pipeline: `run()` feeds the caller audio (a recording, or a live `Source`)
    and returns when every turn is done."""

    def __init__(
        self,
        name: str,
        samples: np.ndarray | None,
        stages: Stages,
        settings: Settings,
        speaker: Speaker | None = None,
        annotate: Callable[[Turn], dict] | None = None,
    ):
        settings.validate()
        self.name, self.samples, self.stages, self.settings = name, samples, stages, settings
        self.clock = CallClock()
        self.timeline = Timeline(name, self.clock)
        self.speaker = speaker or SimulatedSpeaker(settings.playback_latency_ms, self.clock)
        self.annotate = annotate or (lambda turn: {})
        self.history: list[dict] = []
        self.tasks: list[asyncio.Task] = []
        self.barged: set[int] = set()  # turns the caller interrupted
        self.merged: set[int] = set()  # turns the caller continued after a pause (see _speech_started)
        self.origin_ns = 0

    async def run(self, source: Source | None = None) -> Timeline:
        detector = TurnDetector(RATE, self.settings.vad)
        self.timeline.emit(-1, "call_start")
        frames = source.frames() if source else self._paced(detector.frame_len)
        try:
            async for frame in frames:
                if source and not self.origin_ns:
                    self.origin_ns = source.origin_ns
                was_in_turn = detector.in_turn
                if turn := detector.push(frame):
                    self._spawn(turn)
                elif detector.in_turn and not was_in_turn:
                    await self._speech_started(detector)
            if turn := detector.flush():
                self._spawn(turn)
            await asyncio.gather(*self.tasks)
        finally:  # Ctrl-C in talk: every turn still running gets its record, then the call ends
            for task in self.tasks:
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self.timeline.emit(-1, "call_end", turns=len(self.tasks))
        return self.timeline

    async def _paced(self, n: int) -> AsyncIterator[np.ndarray]:
        """A recording's frames as they would arrive from a line; fast mode skips the waits when no
        turn is running."""
        self.origin_ns = self.clock()
        for i in range(len(self.samples) // n):
            wait = self.origin_ns + (i + 1) * n * 1_000_000_000 // RATE - self.clock()
            if wait > 0 and self.settings.mode == "fast" and not self.busy:
                self.clock.skip(wait)
            elif wait > 0:
                await asyncio.sleep(wait / 1e9)
            yield self.samples[i * n : (i + 1) * n]

    @property
    def busy(self) -> bool:
        """A turn is in flight: fast mode never skips time under it."""
        return any(not task.done() for task in self.tasks)

    def at(self, sample: int) -> int:
        return self.origin_ns + sample * 1_000_000_000 // RATE

    async def _speech_started(self, detector: TurnDetector) -> None:
        """The caller starts speaking. Right after an endpoint, before the agent said anything, it is
        the same turn after a pause: the answer under way is dropped and the turn continues. While the
        agent answers in live talk, it is a barge-in."""
        last = self.tasks[-1] if self.tasks else None
        index = len(self.tasks) - 1
        if (
            detector.resuming
            and last
            and not last.done()
            and "first_audio_heard" not in self.timeline.turns[index].anchors
        ):
            self.merged.add(index)
            last.cancel()
            detector.resume()
            self.timeline.emit(index, "turn_resumed", t_ns=self.at(detector.start))
        elif self.settings.barge_in:
            await self._barge_in(detector.start)

    async def _barge_in(self, start_sample: int) -> None:
        """The caller speaks while the agent answers: stop the audio and cancel the answer."""
        running = self.tasks[-1] if self.tasks and not self.tasks[-1].done() else None
        if not (running or self.speaker.playing):
            return
        detected = self.clock()
        index = len(self.tasks) - 1
        stopped = await self.speaker.stop()
        stop_ms = round((stopped - detected) / 1e6, 1)
        self.timeline.turns[index].info["barge_in_stop_ms"] = stop_ms
        self.timeline.emit(index, "barge_in", t_ns=detected, speech_start_ns=self.at(start_sample),
                           stopped_ns=stopped, stop_ms=stop_ms)  # fmt: skip
        if running:
            self.barged.add(index)
            running.cancel()

    def _spawn(self, turn: Turn) -> None:
        emit, index = self.timeline.emit, len(self.tasks) - turn.continues
        if turn.continues:  # the record starts again: t0 and every anchor come from the whole turn
            self.timeline.turns[index] = TurnRecord(self.name, index)
            self.tasks.pop()
            self.merged.discard(index)
        previous = self.tasks[-1] if self.tasks else None
        emit(index, "speech_start", t_ns=self.at(turn.start))
        emit(index, "t0", t_ns=self.at(turn.end))
        emit(index, "endpoint", cut=turn.cut)
        record = self.timeline.turns[index]
        record.info.update(
            speech_start_s=round(turn.start / RATE, 3), speech_end_s=round(turn.end / RATE, 3), cut=turn.cut
        )
        record.info.update(self.annotate(turn))
        self.tasks.append(asyncio.create_task(self._turn(index, turn, previous)))

    async def _turn(self, index: int, turn: Turn, previous: asyncio.Task | None) -> None:
        record = self.timeline.turns[index]
        try:
            if previous:  # the conversation is sequential: this turn's history is the last one's answer
                await asyncio.wait([previous])
            await asyncio.wait_for(self._answer(index, turn), self.settings.turn_timeout_s)
        except asyncio.CancelledError:
            if index in self.merged:
                return  # the turn goes on in a new task; this one leaves no record
            if index not in self.barged:
                record.status, record.error = "no_answer", "the session ended before the answer"
                raise
            heard = "first_useful_audio_heard" in record.anchors
            early = ("no_answer", "the caller barged in before a useful answer")
            record.status, record.error = ("ok", None) if heard else early
        except asyncio.TimeoutError:
            record.status = "timeout"
            record.error = f"no complete answer within {self.settings.turn_timeout_s} s"
        except Exception as e:  # a failed turn is recorded, never dropped; the call goes on
            record.status, record.error = "error", describe(e)
        finally:
            if index not in self.merged:  # a continued turn's record comes from its new task
                self.timeline.emit(index, "turn_done", status=record.status)

    async def _answer(self, index: int, turn: Turn) -> None:
        emit, record, clock = self.timeline.emit, self.timeline.turns[index], self.clock
        record.transcript = await self.stages.transcribe(turn.audio)
        emit(index, "asr_final", text=record.transcript)
        if not record.transcript.strip():
            record.status, record.error = "no_answer", "the ASR heard no words in this turn"
            return
        clauses: asyncio.Queue[Clause | None] = asyncio.Queue()
        chunker = Chunker(self.settings.min_clause_words)
        rounds = [-1]

        def on_event(name: str, delta: Delta) -> None:
            t = clock.from_monotonic(delta.t_ns)
            if name == "llm_request":
                rounds[0] += 1
                emit(index, "llm_request", t_ns=t, round=rounds[0])
            elif name == "content":
                for clause in chunker.feed(delta.text, t, rounds[0]):
                    clauses.put_nowait(clause)
            elif name in ("first_token", "answer"):
                emit(index, "first_token" if name == "first_token" else "first_answer_token", t_ns=t)
            elif name in ("tool_start", "tool_end"):
                call = delta.tool_call
                data = {"result": call.result} if name == "tool_end" else {}
                emit(index, name, t_ns=t, tool=call.name, arguments=call.arguments, **data)

        speaking = asyncio.create_task(self._speak(index, clauses))
        try:
            result = await self.stages.agent.turn(record.transcript, self.history, on_event)
        except BaseException:
            speaking.cancel()
            raise
        for clause in chunker.flush():
            clauses.put_nowait(clause)
        clauses.put_nowait(None)
        emit(index, "llm_done", t_ns=clock.from_monotonic(result.done_ns))
        record.answer = result.answer
        record.tool_calls = result.to_dict()["tool_calls"]
        spoken = await speaking
        answer = [c for c in spoken if c[0].round == rounds[0]]
        useful = next((c for c in answer if not c[0].filler), None)
        if answer:
            emit(index, "tts_first_audio", t_ns=answer[0][1])
        if useful:
            emit(index, "first_useful_token", t_ns=useful[0].first_token_ns)
            emit(index, "first_useful_audio_heard", t_ns=useful[2])
        self.history += [
            {"role": "user", "content": record.transcript},
            {"role": "assistant", "content": result.answer},
        ]
        if not result.answer:
            record.status, record.error = "no_answer", "the LLM gave no answer"
        elif not useful:
            record.status, record.error = "no_answer", "the answer held only filler"

    async def _speak(self, index: int, clauses: asyncio.Queue) -> list[tuple[Clause, int, int]]:
        """Speak clauses as they come; returns (clause, audio ready, heard) times for each, in order.
        Which clauses are the answer is known only when the LLM is done, so the answer's audio anchors
        are derived from this list afterwards; "any audio heard" is known at once.

        A filler ("Let me look up that order.") covers a wait; when useful words follow within
        `filler_grace_ms` there is no wait to cover, and speaking it would only delay them."""
        emit, spoken, pending = self.timeline.emit, [], deque()
        grace_ns = int(self.settings.filler_grace_ms * 1e6)
        while (clause := pending.popleft() if pending else await clauses.get()) is not None:
            if clause.filler and grace_ns:
                deadline = clause.first_token_ns + grace_ns
                while (
                    not any(c is None or not c.filler for c in pending)
                    and (left := deadline - self.clock()) > 0
                ):
                    try:
                        pending.append(await asyncio.wait_for(clauses.get(), left / 1e9))
                    except asyncio.TimeoutError:
                        break
                if any(c is not None and not c.filler for c in pending):
                    emit(index, "filler_skipped", text=clause.text)
                    continue
            speech = await self.stages.speak(clause.text)
            ready = self.clock()
            start, end = await self.speaker.play(speech, ready)
            if not spoken:
                emit(index, "first_audio_heard", t_ns=start)
            emit(index, "clause", t_ns=ready, text=clause.text, filler=clause.filler, heard_ns=start)
            spoken.append((clause, ready, start))
        if spoken:
            emit(index, "last_audio_heard", t_ns=end)
            await self.speaker.drain(end)  # live: the turn lasts until heard, so a barge-in can cut it
        return spoken


def describe(e: BaseException) -> str:
    """One line a user can act on, for a failed turn."""
    import openai

    if isinstance(e, openai.APITimeoutError):
        return "the LLM server did not answer in time"
    if isinstance(e, openai.APIConnectionError):
        return f"cannot reach the LLM server ({e.__cause__ or e})"
    if isinstance(e, openai.APIStatusError):
        return f"the LLM server answered HTTP {e.status_code}: {e.message}"
    return f"{type(e).__name__}: {e}"
