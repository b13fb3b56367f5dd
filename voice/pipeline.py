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
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from llm.agent import Agent, Delta
from voice.audio import RATE, SimulatedSpeaker
from voice.chunker import Chunker, Clause
from voice.timeline import CallClock, Timeline
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


class Call:
    """Replays one caller audio track through the pipeline. `run()` returns when every turn is done."""

    def __init__(
        self,
        name: str,
        samples: np.ndarray,
        stages: Stages,
        settings: Settings,
        timeline: Timeline | None = None,
        speaker: SimulatedSpeaker | None = None,
        annotate: Callable[[Turn], dict] | None = None,
    ):
        settings.validate()
        self.name, self.samples, self.stages, self.settings = name, samples, stages, settings
        self.clock = CallClock()
        self.timeline = timeline or Timeline(name, self.clock)
        self.timeline.clock = self.clock
        self.speaker = speaker or SimulatedSpeaker(settings.playback_latency_ms)
        self.annotate = annotate or (lambda turn: {})
        self.history: list[dict] = []
        self.busy = 0  # turns in flight: fast mode never skips time under them

    async def run(self) -> Timeline:
        detector = TurnDetector(RATE, self.settings.vad)
        n = detector.frame_len
        frame_ns = n * 1_000_000_000 // RATE
        self.start_ns = self.clock()
        self.timeline.emit(-1, "call_start", t_ns=self.start_ns, seconds=round(len(self.samples) / RATE, 3))
        previous: asyncio.Task | None = None
        tasks = []
        for i in range(len(self.samples) // n):
            await self._pace(self.start_ns + (i + 1) * frame_ns)
            turn = detector.push(self.samples[i * n : (i + 1) * n])
            if turn:
                previous = self._spawn(len(tasks), turn, previous)
                tasks.append(previous)
        if turn := detector.flush():
            tasks.append(self._spawn(len(tasks), turn, previous))
        await asyncio.gather(*tasks)
        self.timeline.emit(-1, "call_end", turns=len(tasks))
        return self.timeline

    async def _pace(self, due_ns: int) -> None:
        """Wait until a frame's audio has arrived; fast mode skips the wait when nothing is running."""
        wait = due_ns - self.clock()
        if wait <= 0:
            return
        if self.settings.mode == "fast" and not self.busy:
            self.clock.skip(wait)
        else:
            await asyncio.sleep(wait / 1e9)

    def _spawn(self, index: int, turn: Turn, previous: asyncio.Task | None) -> asyncio.Task:
        emit = self.timeline.emit
        at = lambda sample: self.start_ns + sample * 1_000_000_000 // RATE  # noqa: E731
        emit(index, "speech_start", t_ns=at(turn.start))
        emit(index, "t0", t_ns=at(turn.end))
        emit(index, "endpoint", cut=turn.cut)
        record = self.timeline.turns[index]
        record.info.update(
            speech_start_s=round(turn.start / RATE, 3), speech_end_s=round(turn.end / RATE, 3), cut=turn.cut
        )
        record.info.update(self.annotate(turn))
        self.busy += 1
        return asyncio.create_task(self._turn(index, turn, previous))

    async def _turn(self, index: int, turn: Turn, previous: asyncio.Task | None) -> None:
        record = self.timeline.turns[index]
        try:
            if previous:  # the conversation is sequential: this turn's history is the last one's answer
                await asyncio.shield(previous)
            await asyncio.wait_for(self._answer(index, turn), self.settings.turn_timeout_s)
        except asyncio.TimeoutError:
            record.status = "timeout"
            record.error = f"no complete answer within {self.settings.turn_timeout_s} s"
        except Exception as e:  # a failed turn is recorded, never dropped; the call goes on
            record.status, record.error = "error", describe(e)
        finally:
            self.busy -= 1
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
            start, end = self.speaker.play(speech.seconds, ready)
            if not spoken:
                emit(index, "first_audio_heard", t_ns=start)
            emit(index, "clause", t_ns=ready, text=clause.text, filler=clause.filler, heard_ns=start)
            spoken.append((clause, ready, start))
        if spoken:
            emit(index, "last_audio_heard", t_ns=self.speaker.busy_until_ns)
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
