"""Turn taking: each turn the detector ends becomes one task that answers it (voice/answer.py), and
speech that starts while a turn is under way is either the same turn going on after a pause (merge) or
the caller cutting the agent off (barge-in). A turn that fails, times out or is cut keeps its record
and says why; nothing is dropped."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from voice.answer import answer_turn
from voice.audio import RATE
from voice.timeline import TurnRecord
from voice.turns import Turn, TurnDetector

if TYPE_CHECKING:
    from voice.call import Call


class TurnTaking:
    def __init__(self, call: Call):
        self.call = call
        self.tasks: list[asyncio.Task] = []
        self.barged: set[int] = set()  # turns the caller interrupted
        self.merged: set[int] = set()  # turns the caller continued after a pause

    @property
    def busy(self) -> bool:
        """A turn is in flight (fast replay never skips time under it)."""
        return any(not task.done() for task in self.tasks)

    def ended(self, turn: Turn) -> None:
        """The detector declared an endpoint: record the turn's anchors and start answering it."""
        call, index = self.call, len(self.tasks) - turn.continues
        emit = call.timeline.emit
        if turn.continues:  # the record starts again: t0 and every anchor come from the whole turn
            call.timeline.turns[index] = TurnRecord(call.name, index)
            self.tasks.pop()
            self.merged.discard(index)
        previous = self.tasks[-1] if self.tasks else None
        emit(index, "speech_start", t_ns=call.at(turn.start))
        emit(index, "t0", t_ns=call.at(turn.end))
        emit(index, "endpoint", cut=turn.cut)
        record = call.timeline.turns[index]
        record.info.update(
            speech_start_s=round(turn.start / RATE, 3), speech_end_s=round(turn.end / RATE, 3), cut=turn.cut
        )
        record.info.update(call.annotate(turn))
        self.tasks.append(asyncio.create_task(self._run(index, turn, previous)))

    async def speech_started(self, detector: TurnDetector) -> None:
        """Right after an endpoint, before the agent said anything, it is the same turn after a pause:
        the answer under way is dropped and the turn continues. While the agent answers, a barge-in."""
        last, index = (self.tasks[-1] if self.tasks else None), len(self.tasks) - 1
        if (
            detector.resuming
            and last
            and not last.done()
            and "first_audio_heard" not in self.call.timeline.turns[index].anchors
        ):
            self.merged.add(index)
            last.cancel()
            detector.resume()
            self.call.timeline.emit(index, "turn_resumed", t_ns=self.call.at(detector.start))
        elif self.call.settings.barge_in:
            await self._barge_in(detector.start)

    async def _barge_in(self, start_sample: int) -> None:
        """The caller speaks while the agent answers: stop the audio and cancel the answer."""
        call = self.call
        running = self.tasks[-1] if self.tasks and not self.tasks[-1].done() else None
        if not (running or call.speaker.playing):
            return
        detected = call.timeline.clock()
        index = len(self.tasks) - 1
        stopped = await call.speaker.stop()
        stop_ms = round((stopped - detected) / 1e6, 1)
        call.timeline.turns[index].info["barge_in_stop_ms"] = stop_ms
        call.timeline.emit(index, "barge_in", t_ns=detected, speech_start_ns=call.at(start_sample),
                           stopped_ns=stopped, stop_ms=stop_ms)  # fmt: skip
        if running:
            self.barged.add(index)
            running.cancel()

    async def _run(self, index: int, turn: Turn, previous: asyncio.Task | None) -> None:
        call = self.call
        record = call.timeline.turns[index]
        try:
            if previous:  # the conversation is sequential: this turn's history is the last one's answer
                await asyncio.wait([previous])
            await asyncio.wait_for(answer_turn(call, index, turn), call.settings.turn_timeout_s)
        except asyncio.CancelledError:
            if index in self.merged:
                return  # the turn goes on in a new task; this one leaves no record
            if index not in self.barged:
                record.status, record.error = "no_answer", "the session ended before the answer"
                raise
            heard = "first_useful_audio_heard" in record.anchors
            early = ("no_answer", "the caller barged in before a useful answer")
            record.status, record.error = ("ok", None) if heard else early
        except TimeoutError:
            record.status = "timeout"
            record.error = f"no complete answer within {call.settings.turn_timeout_s} s"
        except Exception as e:  # a failed turn is recorded, never dropped; the call goes on
            record.status, record.error = "error", describe(e)
        finally:
            if index not in self.merged:  # a continued turn's record comes from its new task
                call.timeline.emit(index, "turn_done", status=record.status)

    async def wait(self) -> None:
        await asyncio.gather(*self.tasks)

    async def cancel_all(self) -> None:
        """The call ends (Ctrl-C in talk): every turn still running gets its record."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


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
