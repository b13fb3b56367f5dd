"""Turn taking: each turn the detector ends becomes one task that answers it (voice/pipeline/answer.py), and
speech that starts while a turn is under way is either the same turn going on after a pause (merge) or
the caller cutting the agent off (barge-in). With speculation, a turn's answer may have started on a
pause before its endpoint (voice/pipeline/speculation.py): kept at the endpoint, dropped if speech came back.
A turn that fails, times out or is cut keeps its record and says why (through its `TurnLog`: this
module decides a turn's status, the log writes it); nothing is dropped."""

from __future__ import annotations

import asyncio

from llm.chat import ChatError
from llm.clock import ms
from voice.pipeline.answer import Transcription, answer_turn
from voice.pipeline.audio import RATE
from voice.pipeline.context import CallContext
from voice.pipeline.speculation import Attempt
from voice.pipeline.turns import Pause, Turn, TurnDetector
from voice.timing.timeline import TurnLog


class TurnTaking:
    def __init__(self, context: CallContext):
        self.context = context
        self.tasks: list[asyncio.Task] = []
        self.barged: set[int] = set()  # turns the caller interrupted
        self.merged: set[int] = set()  # turns the caller continued after a pause
        self.continuing = False  # the speech under way continues the last turn
        self.attempt: Attempt | None = None  # what was started on the current turn's last pause
        self.attempts = 0  # attempts numbered within the call

    @property
    def busy(self) -> bool:
        """A turn is in flight, or work started on one (fast replay never skips time under it)."""
        attempt = self.attempt and not (self.attempt.answer or self.attempt.asr).done()  # pending work
        return bool(attempt) or any(not task.done() for task in self.tasks)

    @property
    def count(self) -> int:
        """Turns ended so far (one task each; a continued turn is still one)."""
        return len(self.tasks)

    @property
    def last(self) -> int:
        """The last turn ended (-1: none yet)."""
        return self.count - 1

    def index(self, continues: bool) -> int:
        """The turn that speech belongs to: the last one ended when it `continues` it, else the next."""
        return self.last if continues else self.last + 1

    @property
    def current(self) -> int:
        """The turn under way: the one the next endpoint ends."""
        return self.index(self.continuing)

    def paused(self, pause: Pause) -> None:
        """The caller fell silent within a turn: transcribe what was said and, when preempting, answer
        it, to be kept if the turn ends here."""
        settings = self.context.settings
        if not settings.speculate:
            return
        if self.attempt:
            self.attempt.discard("paused again")
        self.attempts += 1
        index = self.current
        previous = self.tasks[index - 1] if index > 0 else None

        def start(log: TurnLog, transcription: Transcription, words_final: asyncio.Event | None):
            run = self._run(index, log, transcription, attempt.gate, previous, attempt, words_final)
            return asyncio.create_task(run)

        attempt = Attempt(self.context, index, self.attempts, pause, start if settings.preempt else None)
        self.attempt = attempt

    def resumed(self) -> None:
        """Speech came back before the endpoint: what was started on the pause is stale."""
        if self.attempt:
            self.attempt.discard("speech resumed")
            self.attempt = None

    def ended(self, turn: Turn) -> None:
        """The detector declared an endpoint: record the turn's anchors and answer it (or keep the
        answer started on its last pause)."""
        context, index = self.context, self.index(turn.continues)
        if turn.continues:
            context.timeline.restart(index)
            self.tasks.pop()
            self.merged.discard(index)
        previous = self.tasks[-1] if self.tasks else None
        log = TurnLog(context.timeline, index)
        log.emit("t0", t_ns=context.at(turn.end))
        log.emit("endpoint", cut=turn.cut)
        log.note(
            speech_start_s=round(turn.start / RATE, 3), speech_end_s=round(turn.end / RATE, 3), cut=turn.cut
        )
        log.note(**context.annotate(turn), speculative=False)
        attempt, self.attempt, self.continuing = self.attempt, None, False
        if attempt and attempt.start:
            attempt.keep()
            task = asyncio.create_task(self._settle(index, attempt))
        else:
            gate = asyncio.Event()
            gate.set()
            if attempt:  # the transcript was made in the silence; the answer starts now
                log.note(speculative=True)
                log.emit("attempt_kept", attempt=attempt.number)
            transcription = attempt.transcription if attempt else self._transcribe(turn)
            task = asyncio.create_task(self._run(index, log, transcription, gate, previous))
        self.tasks.append(task)

    def _transcribe(self, turn: Turn) -> Transcription:
        async def transcription():
            transcript = await self.context.stages.transcribe(turn.audio)
            return transcript, self.context.timeline.clock()

        return transcription

    async def speech_started(self, detector: TurnDetector) -> None:
        """Right after an endpoint, before the agent said anything, it is the same turn after a pause:
        the answer under way is dropped and the turn continues. While the agent answers, a barge-in."""
        last, index = (self.tasks[-1] if self.tasks else None), self.last
        self.continuing = False
        if (
            detector.resuming
            and last
            and not last.done()
            and "first_audio_heard" not in self.context.timeline.turns[index].anchors
        ):
            self.merged.add(index)
            self.continuing = True
            last.cancel()
            detector.resume()
            self.context.timeline.emit(index, "turn_resumed", t_ns=self.context.at(detector.start))
        else:
            self.context.timeline.emit(self.current, "speech_start", t_ns=self.context.at(detector.start))
            if self.context.settings.barge_in:
                await self._barge_in(detector.start)

    async def _barge_in(self, start_sample: int) -> None:
        """The caller speaks while the agent answers: stop the audio and cancel the answer."""
        context = self.context
        running = self.tasks[-1] if self.tasks and not self.tasks[-1].done() else None
        if not (running or context.speaker.playing):
            return
        detected = context.timeline.clock()
        index = self.last
        stopped = await context.speaker.stop()
        stop_ms = ms(detected, stopped, 1)
        log = TurnLog(context.timeline, index)
        log.note(barge_in_stop_ms=stop_ms)
        log.emit(
            "barge_in",
            t_ns=detected,
            speech_start_ns=context.at(start_sample),
            stopped_ns=stopped,
            stop_ms=stop_ms,
        )
        if running:
            self.barged.add(index)
            running.cancel()

    async def _run(
        self,
        index: int,
        log: TurnLog,
        transcription: Transcription,
        gate: asyncio.Event,
        previous: asyncio.Task | None,
        attempt: Attempt | None = None,
        words_final: asyncio.Event | None = None,
    ) -> None:
        context = self.context
        try:
            if previous:  # the conversation is sequential: this turn's history is the last one's answer
                await asyncio.wait([previous])
            async with asyncio.timeout(context.settings.turn_timeout_s):  # keeps a cancel, unlike wait_for
                await answer_turn(context, log, transcription, gate, words_final)
        except asyncio.CancelledError:
            if attempt and attempt.is_dropped(asyncio.current_task()):
                return  # speech came back, or its words were taken back: this answer leaves nothing
            if not self._cut_off(index, log):
                raise
        except TimeoutError:
            log.set_status("timeout", f"no complete answer within {context.settings.turn_timeout_s} s")
        except Exception as e:  # a failed turn is recorded, never dropped; the call goes on
            log.set_status("error", describe(e))
        finally:
            if index not in self.merged and not (attempt and attempt.is_dropped(asyncio.current_task())):
                if log.held is not None:  # an answer started ahead of its endpoint is done once kept
                    await gate.wait()
                context.timeline.emit(index, "turn_done", status=log.record.status)

    def _cut_off(self, index: int, log: TurnLog) -> bool:
        """A turn's answer was cancelled: record why. False when the session ended (the caller of the
        cancelled task has to know)."""
        if index in self.merged:
            return True  # the turn goes on in a new task; this one leaves no record
        if index not in self.barged:
            log.set_status("no_answer", "the session ended before the answer")
            return False
        if "first_useful_audio_heard" in log.record.anchors:
            log.set_status("ok")
        else:
            log.set_status("no_answer", "the caller barged in before a useful answer")
        return True

    async def _settle(self, index: int, attempt: Attempt) -> None:
        """The turn's task when its answer was started on a pause (voice/pipeline/speculation.py)."""
        try:
            await attempt.settled()
        except asyncio.CancelledError:  # cut off before any answer had started
            log = TurnLog(self.context.timeline, index)
            ended = not self._cut_off(index, log)
            if index not in self.merged:
                log.emit("turn_done", status=log.record.status)
            if ended:
                raise

    async def wait(self) -> None:
        await asyncio.gather(*self.tasks)

    async def cancel_all(self) -> None:
        """The call ends (Ctrl-C in talk): every turn still running gets its record."""
        if self.attempt:
            self.attempt.discard("the call ended")
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def describe(e: BaseException) -> str:
    """One line a user can act on, for a failed turn (a backend's `ChatError` says it already)."""
    return str(e) if isinstance(e, ChatError) else f"{type(e).__name__}: {e}"
