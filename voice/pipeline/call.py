"""One call through the voice pipeline: audio -> turns -> ASR -> agent -> clauses -> TTS -> playback.

The caller's audio (a recording paced as on a line, or a live microphone) goes frame by frame into the
turn detector (turns.py); each turn it ends is answered by turntaking.py -> answer.py -> speaking.py,
each handed a `CallContext` (context.py), never the `Call` (all in voice/pipeline/). Stages only emit events
on the call's `Timeline` and write a turn's record through its `TurnLog`; every metric is derived there
(voice/timing/timeline.py). CPU-heavy work (ASR, TTS) runs in worker threads and the LLM in its own server
process, so one stage's compute does not stall the event loop that timestamps the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np

from llm.clock import ms
from voice.pipeline.audio import RATE, RecordingSource, SimulatedSpeaker
from voice.pipeline.context import CallContext
from voice.pipeline.endpointing import goes_on
from voice.pipeline.settings import Settings
from voice.pipeline.stages import Source, Speaker, Stages
from voice.pipeline.textturn import bundled_text_turn
from voice.pipeline.turns import Pause, Resume, Turn, TurnDetector
from voice.pipeline.turntaking import TurnTaking
from voice.record.turnaudio import CallAudio, TappedSpeaker
from voice.timing.timeline import CallClock, Timeline


class Call:
    """`await Call(...).run()` feeds the caller audio (`samples` of a recording, or a live `Source`)
    and returns the call's timeline when every turn is done."""

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
        self.timeline = Timeline(name, CallClock())
        lived = settings.mode == "realtime"
        self.speaker = speaker or SimulatedSpeaker(settings.playback_latency_ms, self.timeline.clock, lived)
        self.audio = CallAudio() if settings.record_audio else None  # what the line carried, per turn
        if self.audio:
            self.speaker = TappedSpeaker(self.speaker, self.audio)
        context = CallContext(
            self.timeline,
            stages,
            settings,
            self.speaker,
            history=[],
            at=self.at,
            annotate=annotate or (lambda turn: {}),
        )
        self.turns = TurnTaking(context)
        self.source: Source | None = None
        self.detector: TurnDetector | None = None
        self.judging: asyncio.Task | None = None  # the turn model, on the last pause
        self.moment = 0  # counts the detector's events: a judgement of an older moment is stale

    @property
    def busy(self) -> bool:
        """Work is under way (fast replay never skips time under it)."""
        return self.turns.busy or bool(self.judging and not self.judging.done())

    def at(self, sample: int) -> int:
        """When caller sample `sample` was captured, on the call's clock."""
        return self.source.origin_ns + sample * 1_000_000_000 // RATE

    async def run(self, source: Source | None = None) -> Timeline:
        self.detector = detector = TurnDetector(RATE, self.settings.vad)
        self.source = source or RecordingSource(
            self.samples,
            detector.frame_len,
            self.timeline.clock,
            self.settings.mode == "fast",
            busy=lambda: self.busy,
        )
        self.timeline.emit(-1, "call_start")
        try:
            async for frame in self.source.frames():
                if self.audio:
                    self.audio.heard(frame, self.source.origin_ns)
                was_in_turn = detector.in_turn
                event = detector.push(frame)
                if event is not None:
                    self.moment += 1
                if isinstance(event, Turn):
                    self.turns.ended(event)
                elif isinstance(event, Pause):
                    self.turns.paused(event)
                    self._judge(event)
                    self._listen()
                elif isinstance(event, Resume):
                    self.turns.resumed()
                elif detector.in_turn and not was_in_turn:
                    await self.turns.speech_started(detector)
            if turn := detector.flush():
                self.turns.ended(turn)
            await self.turns.wait()
        finally:  # Ctrl-C in talk: every turn still running gets its record, then the call ends
            await self.turns.cancel_all()
            self.timeline.emit(-1, "call_end", turns=self.turns.count)
        return self.timeline

    def _listen(self) -> None:
        """When the pause's transcript reads like the start of a turn, or (`text_turn`) the text model
        finds it incomplete, give the turn a longer end window (voice/pipeline/endpointing.py: goes_on;
        voice/pipeline/textturn.py)."""
        attempt = self.turns.attempt
        if not (self.settings.words_end_turns and attempt):
            return
        moment = self.moment

        def heard(transcript) -> None:
            if moment != self.moment or not self.detector.in_turn:
                return
            said = bundled_text_turn().complete(transcript.text) if self.settings.text_turn else None
            if goes_on(transcript.text) or (said is not None and said < self.settings.complete_at):
                self.detector.wait_longer(self.settings.incomplete_end_ms)
                judged = {} if said is None else {"complete": round(said, 3)}
                self.timeline.emit(attempt.turn, "turn_judged", by="words", goes_on=True, **judged)

        attempt.heard.append(heard)

    def _judge(self, pause: Pause) -> None:
        """Ask the turn model whether the caller is done: end the turn now, or give it a longer end
        window. Its answer counts only if nothing happened since the pause."""
        model = self.stages.turn_model
        if not (self.settings.smart_turn and model):
            return
        moment, started = self.moment, self.timeline.clock()

        async def judge() -> None:
            complete = await asyncio.to_thread(model.complete, pause.audio)
            if moment != self.moment or not self.detector.in_turn:
                return
            took, index = ms(started, self.timeline.clock(), 1), self.turns.current
            self.timeline.emit(index, "turn_judged", by="smart turn", complete=round(complete, 3), ms=took)
            self.moment += 1
            if complete >= self.settings.complete_at:
                self.turns.ended(self.detector.end_now())
            else:
                self.detector.wait_longer(self.settings.incomplete_end_ms)

        self.judging = asyncio.create_task(judge())
