"""The agent loop: ask the LLM, run the tool calls it makes against the store, ask again, until it
answers. The same loop serves `ttfat ask` (engine in-process) and the voice pipeline (any
OpenAI-compatible server); the LLM is anything with an async `chat(messages, tools)` that yields
`Delta`s.

Timing: `first_token` is the first delta of any kind; the *answer* is the content of the last LLM
call (the one that made no tool call), so `first_answer_token` (TTFAT) is its first content delta.
Content streamed before a tool call is filler ("Let me look up that order.").
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from llm.async_engine import AsyncEngine
from llm.params import GenerationParams
from llm.reply import ReplyParser, ToolCall
from llm.spoken import caller_words, parse_order_id
from llm.store import SYSTEM_PROMPT, TOOLS, Store, order_id_argument


@dataclass
class Delta:
    """One piece of an LLM's streamed reply."""

    kind: str  # content | reasoning | tool_call | done
    t_ns: int
    text: str = ""
    tool_call: ToolCall | None = None
    stats: dict = field(default_factory=dict)  # on `done`: server/engine timings and counts


class ChatLLM(Protocol):
    def chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]: ...


class EngineChat:
    """The diffusion engine in-process, speaking the bundled chat format."""

    def __init__(self, engine: AsyncEngine, params: GenerationParams | None = None):
        self.engine = engine
        self.tokenizer = engine.engine.tokenizer
        self.params = params or GenerationParams(gen_length=64)

    async def chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]:
        prompt = self.tokenizer.encode_chat(messages, tools)
        parser = ReplyParser(self.tokenizer)
        last = None
        async for chunk in self.engine.stream(prompt, self.params):
            last = chunk
            reasoning, text = parser.feed(chunk.token_ids)
            if reasoning:
                yield Delta("reasoning", chunk.emit_ns, reasoning)
            if text:
                yield Delta("content", chunk.emit_ns, text)
        for call in parser.tool_calls():
            yield Delta("tool_call", time.monotonic_ns(), tool_call=call)
        stats = {"forwards": last.forwards, "steps": last.steps} if last else {}
        yield Delta("done", time.monotonic_ns(), stats=stats)


@dataclass
class TurnResult:
    user_text: str
    answer: str = ""
    filler: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    request_ns: int = 0
    first_token_ns: int | None = None
    first_answer_token_ns: int | None = None
    done_ns: int = 0
    llm_calls: int = 0
    stats: list[dict] = field(default_factory=list)

    def ms(self, t: int | None) -> float | None:
        return None if t is None else (t - self.request_ns) / 1e6

    def to_dict(self) -> dict:
        return {
            "user": self.user_text,
            "filler": self.filler,
            "tool_calls": [
                {
                    "name": c.name,
                    "arguments": c.arguments,
                    "result": c.result,
                    "ms": round((c.end_ns - c.start_ns) / 1e6, 3),
                }
                for c in self.tool_calls
            ],  # fmt: skip
            "answer": self.answer,
            "first_token_ms": self.ms(self.first_token_ns),
            "first_answer_token_ms": self.ms(self.first_answer_token_ns),
            "done_ms": self.ms(self.done_ns),
            "llm_calls": self.llm_calls,
            "llm_stats": self.stats,
        }


class Agent:
    """``words`` rewrites what the caller said before the LLM sees it (this turn and earlier ones): by
    default into the lowercase, unpunctuated form the bundled models were trained on; ``None`` sends
    ASR text unchanged (for an LLM that prefers it cased and punctuated)."""

    def __init__(self, llm: ChatLLM, store: Store | None = None, system_prompt: str = SYSTEM_PROMPT,
                 max_tool_rounds: int = 2, words: Callable[[str], str] | None = caller_words):  # fmt: skip
        self.llm = llm
        self.store = store or Store()
        self.system_prompt = system_prompt
        self.max_tool_rounds = max_tool_rounds
        self.words = words or (lambda text: text)

    def execute(self, call: ToolCall, messages: list[dict]) -> dict:
        """Run a tool call. An order number the caller never said is not looked up (a small model can
        invent one, and must not read out a stranger's order): it comes back as not found, so the
        model asks the caller to repeat the number."""
        if call.name == "lookup_order":
            wanted = order_id_argument(call.arguments)
            said = {
                parse_order_id(m["content"]) for m in messages if m["role"] == "user" and m.get("content")
            }
            if wanted not in said:
                return {"found": False, "order_id": wanted}
        return self.store.execute(call.name, call.arguments)

    async def turn(
        self,
        user_text: str,
        history: list[dict] | None = None,
        on_event: Callable[[str, Delta], None] | None = None,
    ) -> TurnResult:
        """One caller turn. `on_event(name, delta)` sees every step as it happens, for live timing:
        llm_request (each LLM call), first_token, content, tool_start, tool_end, answer (once the last
        call is known to be the answer, with the time of its first content delta), done. The result
        holds them all."""
        emit = on_event or (lambda name, delta: None)
        result = TurnResult(user_text, request_ns=time.monotonic_ns())
        said = [*(history or []), {"role": "user", "content": user_text}]
        said = [{**m, "content": self.words(m["content"])} if m["role"] == "user" else m for m in said]
        messages = [{"role": "system", "content": self.system_prompt}, *said]
        for round_ in range(self.max_tool_rounds + 1):
            content, calls, first_content = "", [], None
            result.llm_calls += 1
            emit("llm_request", Delta("request", time.monotonic_ns()))
            async for delta in self.llm.chat(messages, TOOLS):
                if result.first_token_ns is None and delta.kind != "done":
                    result.first_token_ns = delta.t_ns
                    emit("first_token", delta)
                if delta.kind == "content":
                    first_content = first_content or delta.t_ns
                    content += delta.text
                    emit("content", delta)
                elif delta.kind == "tool_call":
                    calls.append(delta.tool_call)
                elif delta.kind == "done":
                    result.stats.append(delta.stats)
            if not calls or round_ == self.max_tool_rounds:
                result.answer = content.strip()
                result.first_answer_token_ns = first_content
                if first_content:
                    emit("answer", Delta("content", first_content, result.answer))
                break
            result.filler = (result.filler + " " + content).strip()
            messages.append({"role": "assistant", "content": content, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in calls]})  # fmt: skip
            for call in calls:
                call.start_ns = time.monotonic_ns()
                emit("tool_start", Delta("tool_call", call.start_ns, tool_call=call))
                call.result = self.execute(call, messages)
                call.end_ns = time.monotonic_ns()
                emit("tool_end", Delta("tool_call", call.end_ns, tool_call=call))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(call.result)})
            result.tool_calls += calls
        result.done_ns = time.monotonic_ns()
        emit("done", Delta("done", result.done_ns))
        return result
