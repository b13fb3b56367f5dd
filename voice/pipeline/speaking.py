"""Speaking one turn's answer: clauses in, audio out, with the filler policy, and the answer's audio
anchors emitted the moment they are known.

A clause belongs to one LLM call (its `round`); only the last call's clauses are the answer, and which
call is the last is known when it ends without a tool call (`answer_is`) or makes one
(`not_the_answer`). So each answer anchor is emitted as soon as both are known: the answer's round,
and the clause it hangs on being produced (first_useful_token), its first piece of audio synthesized
(tts_first_audio) or heard (first_useful_audio_heard). A clause's pieces (tts/piper.py, `stream`) are
played back to back as they come, so its first words are heard long before its last are made.
Nothing is played before `gate` opens (the endpoint): an answer started early is synthesized early
and heard on time. An answer begun on words the ASR is still checking (a second pass) is synthesized
only once `words_final` opens: TTS would take the cores that pass needs, and the words it would speak
may yet be taken back.

A filler ("Let me look up that order.", or anything said before a tool call) covers a wait; when
useful words follow within the grace period there is no wait to cover, and speaking it would only
delay them. With `hold_undecided`, words whose call has not yet shown whether it answers are held
for that grace period too, so a garbled filler is not spoken ahead of the answer behind it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass

from llm.clock import ns
from voice.pipeline.chunker import Clause
from voice.pipeline.stages import Speaker, Speech
from voice.timing.timeline import TurnLog

SHOWN = object()  # on the queue: an LLM call showed whether it answers


@dataclass
class Spoken:
    clause: Clause
    heard_ns: int  # it started being heard


class Speaking:
    """`say(clause)` as clauses come, `answer_is(round)` / `not_the_answer(round)` as the LLM's calls
    show what they are, then `await finish()`: it returns once everything said has been heard (live, or
    lived replay)."""

    def __init__(
        self,
        log: TurnLog,
        speak: Callable[[str], AsyncIterator[Speech]],
        speaker: Speaker,
        filler_grace_ms: float,
        gate: asyncio.Event,
        hold_undecided: bool = True,
        words_final: asyncio.Event | None = None,
    ):
        self.log, self.speak, self.speaker, self.gate = log, speak, speaker, gate
        self.words_final = words_final
        self.grace_ns = ns(filler_grace_ms)
        self.hold_undecided = hold_undecided
        self.queue: asyncio.Queue = asyncio.Queue()  # clauses, SHOWN, and None at the end
        self.said: list[Clause] = []
        self.synthesized: list[tuple[Clause, int]] = []  # each clause and when its audio was ready
        self.spoken: list[Spoken] = []
        self.answer_round: int | None = None
        self.tool_rounds: set[int] = set()
        self.task = asyncio.create_task(self._speak())

    def say(self, clause: Clause) -> None:
        self.said.append(clause)
        self.queue.put_nowait(clause)

    def answer_is(self, round_: int) -> None:
        self.answer_round = round_
        self.queue.put_nowait(SHOWN)
        self._answer_anchors()

    def not_the_answer(self, round_: int) -> None:
        self.tool_rounds.add(round_)
        self.queue.put_nowait(SHOWN)

    async def finish(self) -> list[Spoken]:
        self.queue.put_nowait(None)
        return await self.task

    def cancel(self) -> None:
        self.task.cancel()

    def kind(self, clause: Clause) -> str:
        """useful, filler, or undecided (its call may still turn out to be a tool call's lead-in)."""
        if clause.filler or clause.round in self.tool_rounds:
            return "filler"
        if clause.round == self.answer_round or not self.hold_undecided:
            return "useful"
        return "undecided"

    def _answer_anchors(self) -> None:
        """Emit each answer anchor that has become known (each once)."""
        if self.answer_round is None:
            return
        useful = next((c for c in self.said if c.round == self.answer_round and not c.filler), None)
        if useful:
            self._once("first_useful_token", useful.first_token_ns)
        ready = next((t for c, t in self.synthesized if c.round == self.answer_round), None)
        if ready is not None:  # known once synthesized, though a filler may still be playing ahead of it
            self._once("tts_first_audio", ready)
        heard = next(
            (s for s in self.spoken if s.clause.round == self.answer_round and not s.clause.filler), None
        )
        if heard:
            self._once("first_useful_audio_heard", heard.heard_ns)

    def _once(self, anchor: str, t_ns: int) -> None:
        if anchor not in self.log.record.anchors:
            self.log.emit(anchor, t_ns=t_ns)

    async def _speak(self) -> list[Spoken]:
        clock, pending = self.log.timeline.clock, deque()
        end = 0
        while (clause := pending.popleft() if pending else await self.queue.get()) is not None:
            if clause is SHOWN:
                continue
            if self.grace_ns and not await self._worth_speaking(clause, pending):
                self.log.emit("filler_skipped", text=clause.text)
                continue
            if self.words_final:
                await self.words_final.wait()
            synth = clock()
            async with aclosing(self.speak(clause.text)) as pieces:
                first = await anext(pieces)
                ready = clock()
                self.synthesized.append((clause, ready))
                self._answer_anchors()
                await self.gate.wait()
                start, end = await self.speaker.play(first, clock())
                if not self.spoken:
                    self.log.emit("first_audio_heard", t_ns=start)
                self.spoken.append(Spoken(clause, start))
                self.log.fact_heard([(s.clause.text, s.heard_ns) for s in self.spoken])  # a manifest's facts
                self._answer_anchors()
                async for piece in pieces:  # made while the first plays: heard back to back
                    _, end = await self.speaker.play(piece, clock())
            self.log.emit(
                "clause",
                t_ns=ready,
                text=clause.text,
                filler=clause.filler,
                synth_ns=synth,
                heard_ns=start,
                end_ns=end,
            )
        if self.spoken:
            await self.speaker.drain(end)  # live: the turn lasts until heard, so a barge-in can cut it
            self.log.emit("last_audio_heard", t_ns=end)
        return self.spoken

    async def _worth_speaking(self, clause: Clause, pending: deque) -> bool:
        """Useful words are spoken at once. A filler, or words not yet known to be useful, waits up to
        the grace period after its first token: a filler is dropped if useful words come meanwhile, and
        spoken if none do (it covers the wait); undecided words are spoken once known to be useful."""
        deadline = clause.first_token_ns + self.grace_ns
        while True:
            kind = self.kind(clause)
            if kind == "useful":
                return True
            if any(c is not None and self.kind(c) == "useful" for c in pending):
                return kind == "undecided"  # a filler is dropped; an undecided clause comes first
            left = deadline - self.log.timeline.clock()
            if left <= 0 or None in pending:
                return True  # nothing useful is on its way: say it, it covers the wait
            await self._next_change(pending, left / 1e9)

    async def _next_change(self, pending: deque, timeout_s: float) -> None:
        """Wait for the next clause or for a call to show what it is, at most `timeout_s`."""
        try:  # not wait_for: on Python 3.11 it loses a cancel that comes as the item arrives, and this
            async with asyncio.timeout(timeout_s):  # task would wait on the queue forever
                item = await self.queue.get()
        except TimeoutError:
            return
        if item is not SHOWN:
            pending.append(item)
