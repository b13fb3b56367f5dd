"""Starting on a turn before it is declared over (docs/timing.md, work started ahead of the endpoint).

When the caller falls silent within a turn (a `Pause`), an `Attempt` transcribes the audio so far and,
when preempting, runs the answer on that transcript: the agent, its tools (lookups, which change
nothing) and TTS, with every event held in its own `TurnLog` and nothing played. If speech comes back
before the endpoint (a `Resume`), the attempt is discarded: its LLM request is cancelled (the server
frees its slot), nothing it did reaches the turn's record, and its work is counted there (through the
turn's `TurnLog`, the record's one writer). If the endpoint comes with no speech since the pause, the
audio is the same but for silence, so the attempt is kept: its events join the timeline at their own
times and its audio may play.

An ASR that takes a second, surer pass (asr/whisper.py, window "auto": numbers heard again) lets
the answer start on the first pass's words; if the second pass hears other digits, that answer is
dropped (and counted) and the answer starts again on the second pass. The answer on the first pass's
words is not synthesized until the second pass is in: on two cores TTS slows that pass, which is the
wait of every turn that holds a number (issue 19: that pass's p95 292 -> 184 ms). The answer
is heard only once its transcript is final and the turn is over.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Callable

from llm.clock import ms
from voice.pipeline.context import CallContext
from voice.pipeline.stages import Transcript
from voice.pipeline.turns import Pause
from voice.timing.timeline import TurnLog

# Starts an answer task on a held log, a transcription, and the event that says its words are final
# when they may not be yet (turntaking.py).
StartAnswer = Callable[[TurnLog, Callable, asyncio.Event | None], asyncio.Task]


def digits(text: str) -> list[str]:
    return re.findall(r"\d", text)


class Attempt:
    def __init__(self, context: CallContext, turn: int, number: int, pause: Pause, start: StartAnswer | None):
        """`start`: how to start an answer (None: transcribe only, the answer starts at the endpoint)."""
        self.context, self.turn, self.number, self.start = context, turn, number, start
        self.turn_log = TurnLog(context.timeline, turn)  # not held: its events, and the work it discards
        self.gate = asyncio.Event()  # opens once the turn is over and the answer's transcript final
        self.over = False  # the endpoint came
        self.discarded = False
        self.abandoned = False  # its turn was cut or continued: no answer may start or be heard any more
        self.final = asyncio.Event()  # the ASR's last pass is in
        self.final_ns: int | None = None
        self.running = asyncio.Event()  # the ASR has the model: it cannot be dropped any more
        self.stop = threading.Event()  # ... but it may skip its second pass
        self.log: TurnLog | None = None  # the current answer's
        self.answer: asyncio.Task | None = None  # the current answer
        self.basis: Transcript | None = None  # the words it answers
        self.dropped: set[asyncio.Task] = set()  # answers begun on words the second pass took back
        self.heard: list[Callable[[Transcript], None]] = []  # told the first words (endpointing)
        self.answering = asyncio.Event()  # an answer has been started
        self.turn_log.emit("asr_spec_start", attempt=number, audio_s=round(len(pause.audio) / 16000, 3))
        self.asr = asyncio.create_task(self._transcribe(pause))

    async def _transcribe(self, pause: Pause) -> Transcript:
        try:
            transcript = await self.context.stages.transcribe(
                pause.audio, self.running, self.stop, self._first_words
            )
        except Exception as e:  # the answer's task records the failure
            if self.basis is None:
                self._answer_on(None, e)
            self.final.set()
            self._open()
            raise
        self.final_ns = self.context.timeline.clock()
        self.turn_log.emit(
            "asr_spec_final",
            attempt=self.number,
            text=transcript.text,
            compute_ms=round(transcript.compute_ms, 1),
        )
        if self.basis is None:
            self._tell(transcript)
            self._answer_on(transcript)
        elif digits(transcript.text) != digits(self.basis.text):
            self._drop_answer("the second pass heard other digits")
            self._answer_on(transcript)
        self.final.set()
        self._open()
        return transcript

    def _first_words(self, first: Transcript) -> None:
        self.turn_log.emit(
            "asr_spec_first", attempt=self.number, text=first.text, compute_ms=round(first.compute_ms, 1)
        )
        self._tell(first)
        self._answer_on(first, words_final=self.final)

    def _tell(self, transcript: Transcript) -> None:
        for listener in self.heard:
            listener(transcript)

    def _answer_on(
        self,
        transcript: Transcript | None,
        error: Exception | None = None,
        words_final: asyncio.Event | None = None,
    ) -> None:
        self.basis = transcript
        if self.start is None or self.discarded or self.abandoned:
            return
        ready_ns = self.context.timeline.clock()

        async def transcription() -> tuple[Transcript, int]:
            if error:
                raise error
            return transcript, ready_ns

        self.log = TurnLog(self.context.timeline, self.turn, held=True)
        self.answer = self.start(self.log, transcription, words_final)
        self.answering.set()

    async def transcription(self) -> tuple[Transcript, int]:
        """The final transcript and when it was ready (for an answer started at the endpoint)."""
        transcript = await self.asr
        return transcript, self.final_ns

    def keep(self) -> None:
        """The endpoint came with no speech since the pause: this attempt's answer is the turn's."""
        self.over = True
        self._open()

    def _open(self) -> None:
        if self.over and self.final.is_set() and not self.gate.is_set() and self.log and not self.abandoned:
            self.turn_log.emit("attempt_kept", attempt=self.number)
            self.log.release()
            self.log.note(speculative=True)
            if self.final_ns is not None:
                self.log.note_moment("words_final_ms", self.final_ns)  # speech waited for the last words
            self.gate.set()

    async def settled(self) -> None:
        """The turn's task, once kept: the answer that holds (begun again if the second pass differs)."""
        try:
            await self.answering.wait()
            while True:
                task = self.answer
                await asyncio.wait([task])
                if task is self.answer:
                    return
        except asyncio.CancelledError:  # a barge-in, a merge, the end of the call
            self.abandoned = True
            self.stop.set()
            if not self.answer:
                raise
            self.answer.cancel()  # the answer under way goes with it, and records why
            if self.log is not None and self.log.held is not None:
                # never kept, so nothing will open its gate: its events join the turn now, or the cancelled
                # answer would wait for the gate forever (a barge-in between the two ASR passes)
                self.log.release()
            await asyncio.wait([self.answer])
            if self.answer.cancelled():
                raise

    def is_dropped(self, task: asyncio.Task | None) -> bool:
        return self.discarded or task in self.dropped

    def discard(self, reason: str) -> None:
        """Speech came back: drop the work, count it in the turn's record."""
        self.discarded = True
        self.stop.set()
        waste: dict[str, float] = {}
        if not self.running.is_set():
            self.asr.cancel()  # still waiting for the model: it never runs
        else:  # the ASR thread cannot be stopped: its compute counts when it ends
            waste["asr_runs"] = 1
            self.asr.add_done_callback(self._count_asr)
        if self.answer:
            waste |= self._llm_waste()
            self.answer.cancel()
        self.turn_log.count_discarded(**waste)
        self.turn_log.emit("attempt_discarded", attempt=self.number, reason=reason)

    def _drop_answer(self, reason: str) -> None:
        if self.answer:
            self.turn_log.count_discarded(**self._llm_waste())
            self.dropped.add(self.answer)
            self.answer.cancel()
            self.turn_log.emit("answer_dropped", attempt=self.number, reason=reason)

    def _llm_waste(self) -> dict:
        """The current answer's LLM requests (client side: each request to its end, or to now)."""
        held = self.log.held or []
        requests = [t for name, t, _ in held if name == "llm_request"]
        ends = [t for name, t, _ in held if name == "llm_call"]
        now = self.context.timeline.clock()
        ran = sum(ms(t, ends[i] if i < len(ends) else now, None) for i, t in enumerate(requests))
        return {"llm_runs": len(requests), "llm_ms": round(ran, 1)}

    def _count_asr(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is None:
            self.turn_log.count_discarded(asr_ms=round(task.result().compute_ms, 1))
