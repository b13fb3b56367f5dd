"""One call through the voice pipeline: audio -> turns -> ASR -> agent -> clauses -> TTS -> playback.

The caller's audio (a recording paced as on a line, or a live microphone) goes frame by frame into the
turn detector (voice/turns.py); each turn it ends is answered by voice/turntaking.py -> answer.py ->
speaking.py. Stages only emit events on the call's `Timeline`; the turn record and every metric are
derived there (voice/timeline.py). CPU-heavy work (ASR, TTS) runs in worker threads and the LLM in its
own server process, so one stage's compute does not stall the event loop that timestamps the others.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from voice.audio import RATE, RecordingSource, SimulatedSpeaker
from voice.settings import Settings
from voice.stages import Source, Speaker, Stages
from voice.timeline import CallClock, Timeline
from voice.turns import Turn, TurnDetector
from voice.turntaking import TurnTaking


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
        self.annotate = annotate or (lambda turn: {})
        self.history: list[dict] = []  # the conversation so far, as the agent sees it
        self.turns = TurnTaking(self)
        self.source: Source | None = None

    def at(self, sample: int) -> int:
        """When caller sample `sample` was captured, on the call's clock."""
        return self.source.origin_ns + sample * 1_000_000_000 // RATE

    async def run(self, source: Source | None = None) -> Timeline:
        detector = TurnDetector(RATE, self.settings.vad)
        self.source = source or RecordingSource(
            self.samples, detector.frame_len, self.timeline.clock, self.settings.mode == "fast",
            busy=lambda: self.turns.busy,
        )  # fmt: skip
        self.timeline.emit(-1, "call_start")
        try:
            async for frame in self.source.frames():
                was_in_turn = detector.in_turn
                if turn := detector.push(frame):
                    self.turns.ended(turn)
                elif detector.in_turn and not was_in_turn:
                    await self.turns.speech_started(detector)
            if turn := detector.flush():
                self.turns.ended(turn)
            await self.turns.wait()
        finally:  # Ctrl-C in talk: every turn still running gets its record, then the call ends
            await self.turns.cancel_all()
            self.timeline.emit(-1, "call_end", turns=len(self.turns.tasks))
        return self.timeline
