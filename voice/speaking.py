"""Speaking one turn's answer: clauses in, audio out, with the filler policy, and the answer's audio
anchors emitted the moment they are known.

A clause belongs to one LLM call (its `round`); only the last call's clauses are the answer, and which
call is the last is known when it ends without a tool call (`answer_is`). So each answer anchor is
emitted as soon as both are known: the answer's round, and the clause it hangs on being produced
(first_useful_token), synthesized (tts_first_audio) or heard (first_useful_audio_heard).

A filler ("Let me look up that order.") covers a wait; when useful words follow within the grace
period there is no wait to cover, and speaking it would only delay them.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from voice.chunker import Clause
from voice.stages import Speaker, Speech
from voice.timeline import Timeline


@dataclass
class Spoken:
    clause: Clause
    ready_ns: int  # its audio was synthesized
    heard_ns: int  # it started being heard


class Speaking:
    """`say(clause)` as clauses come, `answer_is(round)` once the answer's LLM call is known, then
    `await finish()`: it returns once everything said has been heard (live, or lived replay)."""

    def __init__(self, timeline: Timeline, turn: int, speak: Callable[[str], Awaitable[Speech]],
                 speaker: Speaker, filler_grace_ms: float):  # fmt: skip
        self.timeline, self.turn, self.speak, self.speaker = timeline, turn, speak, speaker
        self.grace_ns = int(filler_grace_ms * 1e6)
        self.queue: asyncio.Queue[Clause | None] = asyncio.Queue()
        self.said: list[Clause] = []
        self.spoken: list[Spoken] = []
        self.answer_round: int | None = None
        self.task = asyncio.create_task(self._speak())

    def say(self, clause: Clause) -> None:
        self.said.append(clause)
        self.queue.put_nowait(clause)

    def answer_is(self, round_: int) -> None:
        self.answer_round = round_
        self._answer_anchors()

    async def finish(self) -> list[Spoken]:
        self.queue.put_nowait(None)
        return await self.task

    def cancel(self) -> None:
        self.task.cancel()

    def _answer_anchors(self) -> None:
        """Emit each answer anchor that has become known (the timeline keeps the first of each)."""
        if self.answer_round is None:
            return
        emit, turn = self.timeline.emit, self.turn
        useful = next((c for c in self.said if c.round == self.answer_round and not c.filler), None)
        if useful and not self._has("first_useful_token"):
            emit(turn, "first_useful_token", t_ns=useful.first_token_ns)
        answer = [s for s in self.spoken if s.clause.round == self.answer_round]
        if answer and not self._has("tts_first_audio"):
            emit(turn, "tts_first_audio", t_ns=answer[0].ready_ns)
        heard = next((s for s in answer if not s.clause.filler), None)
        if heard and not self._has("first_useful_audio_heard"):
            emit(turn, "first_useful_audio_heard", t_ns=heard.heard_ns)

    def _has(self, anchor: str) -> bool:
        return anchor in self.timeline.turns[self.turn].anchors

    async def _speak(self) -> list[Spoken]:
        emit, clock, pending = self.timeline.emit, self.timeline.clock, deque()
        end = 0
        while (clause := pending.popleft() if pending else await self.queue.get()) is not None:
            if clause.filler and self.grace_ns and await self._useful_words_follow(clause, pending):
                emit(self.turn, "filler_skipped", text=clause.text)
                continue
            speech = await self.speak(clause.text)
            ready = clock()
            start, end = await self.speaker.play(speech, ready)
            if not self.spoken:
                emit(self.turn, "first_audio_heard", t_ns=start)
            emit(self.turn, "clause", t_ns=ready, text=clause.text, filler=clause.filler, heard_ns=start)
            self.spoken.append(Spoken(clause, ready, start))
            self._answer_anchors()
        if self.spoken:
            await self.speaker.drain(end)  # live: the turn lasts until heard, so a barge-in can cut it
            emit(self.turn, "last_audio_heard", t_ns=end)
        return self.spoken

    async def _useful_words_follow(self, filler: Clause, pending: deque) -> bool:
        """Wait up to the grace period after the filler's first token for useful words (or the end)."""
        deadline = filler.first_token_ns + self.grace_ns
        while not any(c is None or not c.filler for c in pending):
            left = deadline - self.timeline.clock()
            if left <= 0:
                break
            try:
                pending.append(await asyncio.wait_for(self.queue.get(), left / 1e9))
            except TimeoutError:
                break
        return any(c is not None and not c.filler for c in pending)
