"""One turn's answer: transcript -> agent -> clauses -> `Speaking`. The agent's steps become events as
they happen, written to the attempt's `TurnLog`: live, or held while the answer was started before the
endpoint (voice/pipeline/speculation.py), and so are its words, its answer and, when nothing useful came, its
status. Nothing is heard before `gate` opens, at the endpoint; a failure that ends the answer becomes
the turn's status in voice/pipeline/turntaking.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial

from llm.agent import AgentEvent
from voice.pipeline.chunker import Chunker
from voice.pipeline.context import CallContext
from voice.pipeline.speaking import Speaking
from voice.pipeline.stages import Transcript
from voice.timing.timeline import TurnLog

# A transcript and when it was final (on the call's clock).
Transcription = Callable[[], Awaitable[tuple[Transcript, int]]]


async def answer_turn(
    context: CallContext,
    log: TurnLog,
    transcription: Transcription,
    gate: asyncio.Event,
    words_final: asyncio.Event | None = None,
) -> None:
    """`words_final`: set once the transcript's words are final, when they may not be yet (Speaking)."""
    transcript, final_ns = await transcription()
    log.transcribed(transcript.text, transcript.compute_ms)
    log.emit("asr_final", t_ns=final_ns, text=transcript.text)
    if not transcript.text.strip():
        log.set_status("no_answer", "the ASR heard no words in this turn")
        return
    agent, clock, settings = context.stages.agent, context.timeline.clock, context.settings
    chunker = Chunker(settings.min_clause_words, agent.fillers, split_first=settings.split_first_clause)
    speak = partial(context.stages.speak, whole=not settings.stream_speech)
    speaking = Speaking(
        log,
        speak,
        context.speaker,
        settings.filler_grace_ms,
        gate,
        hold_undecided=settings.first_clause_first,
        words_final=words_final,
    )

    def on_event(event: AgentEvent) -> None:
        t = clock.from_monotonic(event.t_ns)
        if event.name == "content":
            for clause in chunker.feed(event.text, t, event.round):
                speaking.say(clause)
        elif event.name in ("llm_request", "first_token"):
            log.emit(event.name, t_ns=t, round=event.round)
        elif event.name in ("tool_start", "tool_end"):
            tool = event.tool_call
            data = {"result": tool.result} if event.name == "tool_end" else {}
            log.emit(event.name, t_ns=t, tool=tool.name, arguments=tool.arguments, **data)
            speaking.not_the_answer(event.round)
        elif event.name == "llm_call":
            request_ns = clock.from_monotonic(event.llm_call.request_ns)
            log.emit("llm_call", t_ns=t, request_ns=request_ns, **event.llm_call.to_dict())
        elif event.name == "answer":
            for clause in chunker.flush():
                speaking.say(clause)
            log.emit("first_answer_token", t_ns=t)
            speaking.answer_is(event.round)

    try:
        result = await agent.turn(transcript.text, context.history, on_event)
        for clause in chunker.flush():
            speaking.say(clause)
        log.emit("llm_done", t_ns=clock.from_monotonic(result.done_ns))
        log.answered(result.answer, result.to_dict()["tool_calls"], result.answered_by)
        await gate.wait()  # a speculative answer joins the conversation only once the turn is over
        context.history.extend(
            [{"role": "user", "content": transcript.text}, {"role": "assistant", "content": result.answer}]
        )
        await speaking.finish()
    except BaseException:
        speaking.cancel()
        raise
    if not result.answer:
        log.set_status("no_answer", "the LLM gave no answer")
    elif "first_useful_token" not in log.record.anchors:
        log.set_status("no_answer", "the answer held only filler")
