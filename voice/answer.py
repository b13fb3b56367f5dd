"""One turn's answer: ASR -> agent -> clauses -> `Speaking`. The agent's steps become timeline events as
they happen; what went wrong becomes the turn's status (voice/turntaking.py records failures)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llm.agent import AgentEvent
from voice.chunker import Chunker
from voice.speaking import Speaking
from voice.turns import Turn

if TYPE_CHECKING:
    from voice.call import Call


async def answer_turn(call: Call, index: int, turn: Turn) -> None:
    emit, record, clock = call.timeline.emit, call.timeline.turns[index], call.timeline.clock
    transcript = await call.stages.transcribe(turn.audio)
    record.transcript = transcript.text
    record.info["asr_compute_ms"] = round(transcript.compute_ms, 1)
    emit(index, "asr_final", text=transcript.text)
    if not transcript.text.strip():
        record.status, record.error = "no_answer", "the ASR heard no words in this turn"
        return
    agent = call.stages.agent
    chunker = Chunker(call.settings.min_clause_words, agent.fillers)
    speaking = Speaking(call.timeline, index, call.stages.speak, call.speaker, call.settings.filler_grace_ms)

    def on_event(event: AgentEvent) -> None:
        t = clock.from_monotonic(event.t_ns)
        if event.name == "content":
            for clause in chunker.feed(event.text, t, event.round):
                speaking.say(clause)
        elif event.name in ("llm_request", "first_token"):
            emit(index, event.name, t_ns=t, round=event.round)
        elif event.name in ("tool_start", "tool_end"):
            tool = event.tool_call
            data = {"result": tool.result} if event.name == "tool_end" else {}
            emit(index, event.name, t_ns=t, tool=tool.name, arguments=tool.arguments, **data)
        elif event.name == "llm_call":
            request_ns = clock.from_monotonic(event.llm_call.request_ns)
            emit(index, "llm_call", t_ns=t, request_ns=request_ns, **event.llm_call.to_dict())
        elif event.name == "answer":
            for clause in chunker.flush():
                speaking.say(clause)
            emit(index, "first_answer_token", t_ns=t)
            speaking.answer_is(event.round)

    try:
        result = await agent.turn(record.transcript, call.history, on_event)
        for clause in chunker.flush():
            speaking.say(clause)
        emit(index, "llm_done", t_ns=clock.from_monotonic(result.done_ns))
        record.answer = result.answer
        record.tool_calls = result.to_dict()["tool_calls"]
        call.history += [{"role": "user", "content": record.transcript},
                         {"role": "assistant", "content": result.answer}]  # fmt: skip
        await speaking.finish()
    except BaseException:
        speaking.cancel()
        raise
    if not result.answer:
        record.status, record.error = "no_answer", "the LLM gave no answer"
    elif "first_useful_token" not in record.anchors:
        record.status, record.error = "no_answer", "the answer held only filler"
