"""The agent loop: ask the LLM, run the tool calls it makes, ask again, until it answers. The same loop
serves `ttfat ask` (the engine in-process) and the voice pipeline (any OpenAI-compatible server); it
knows nothing of the domain, which comes in as a system prompt and a `Tools`.

Timing: `first_token` is the first delta of any kind; the *answer* is the content of the last LLM call
(the one that made no tool call), so `first_answer_token` (TTFAT) is its first content delta. Content
streamed before a tool call is filler ("Let me look up that order."). Every LLM call is kept as an
`LLMCall` with the endpoint's own timings, so a turn record can say how much of the wait was the model.

A tool call whose arguments do not fit its schema (cut off, a key garbled) is a request the caller has to
say again: when the agent has a phrase for that tool (`on_bad_arguments`), the caller hears it as the
answer at once (`answered_by` "agent"), instead of a model asked again about what it got wrong.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Literal, Protocol, get_args

from llm import clock
from llm.arguments import arguments_problem
from llm.chat import ChatBackend, Delta, ToolCall


class Tools(Protocol):
    """What the model may call: OpenAI function schemas, and how each call runs (an agent file's tools
    are one such: `llm/agentfile/tools.py`)."""

    schemas: list[dict]

    async def run(self, call: ToolCall, messages: list[dict]) -> dict:
        """The call's result; never raises (a failure comes back as {"error": ...})."""


@dataclass
class LLMCall:
    """One request to the LLM within a turn: client-side times (monotonic ns) and the endpoint's own
    timings (`server`, None when the endpoint reports none)."""

    round: int
    request_ns: int
    first_token_ns: int | None = None
    first_content_ns: int | None = None
    done_ns: int = 0
    tools: list[str] = field(default_factory=list)  # the tool calls it made
    server: dict | None = None
    endpoint: str | None = None  # the backend's URL and model, when it has them (in-process: None)
    model: str | None = None

    @property
    def answered(self) -> bool:
        return not self.tools

    def to_dict(self) -> dict:
        """Client-side times as ms from this call's request; the HTTP overhead is what the client saw
        minus what the server saw, at the first content token (or at the end, when there was none)."""
        since = partial(clock.ms, self.request_ns)
        first_content, done = since(self.first_content_ns), since(self.done_ns)
        overhead = None
        if self.server:
            seen = self.server.get("first_content_ms")
            client, server = (first_content, seen) if seen is not None else (done, self.server.get("done_ms"))
            overhead = None if client is None or server is None else round(client - server, 3)
        return {
            "round": self.round,
            "endpoint": self.endpoint,
            "model": self.model,
            "answered": self.answered,
            "tools": self.tools,
            "first_token_ms": since(self.first_token_ns),
            "first_content_ms": first_content,
            "done_ms": done,
            "server": self.server,
            "http_overhead_ms": overhead,
        }


# The steps of a turn the agent reports, a closed set (AgentEvent refuses any other name): llm_call is
# a call finished (`llm_call` holds it), answer the last call known to be the answer (`t_ns`: its first
# content delta).
AgentEventName = Literal[
    "llm_request", "first_token", "content", "tool_start", "tool_end", "llm_call", "answer"
]
AGENT_EVENTS = frozenset(get_args(AgentEventName))


@dataclass
class AgentEvent:
    """A step of a turn as it happens."""

    name: AgentEventName
    t_ns: int
    round: int
    text: str = ""
    tool_call: ToolCall | None = None
    llm_call: LLMCall | None = None

    def __post_init__(self) -> None:
        if self.name not in AGENT_EVENTS:
            raise ValueError(f"unknown agent event {self.name!r}: the events are {sorted(AGENT_EVENTS)}")


@dataclass
class TurnResult:
    user_text: str
    answer: str = ""
    filler: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    calls: list[LLMCall] = field(default_factory=list)
    request_ns: int = 0
    first_token_ns: int | None = None
    first_answer_token_ns: int | None = None
    done_ns: int = 0
    answered_by: str = "llm"  # or "agent": its phrase for arguments that did not fit (on_bad_arguments)

    def ms(self, t: int | None) -> float | None:
        return clock.ms(self.request_ns, t, None)

    def to_dict(self) -> dict:
        return {
            "user": self.user_text,
            "filler": self.filler,
            "tool_calls": [tool_record(c) for c in self.tool_calls],
            "answer": self.answer,
            "first_token_ms": self.ms(self.first_token_ns),
            "first_answer_token_ms": self.ms(self.first_answer_token_ns),
            "done_ms": self.ms(self.done_ns),
            "answered_by": self.answered_by,
            "llm_calls": [c.to_dict() for c in self.calls],
        }


def tool_record(call: ToolCall) -> dict:
    """A tool call in a turn record; ``error`` says how it failed (None when it did not)."""
    error = (call.result or {}).get("error") if isinstance(call.result, dict) else None
    return {
        "name": call.name,
        "arguments": call.arguments,
        "result": call.result,
        "ms": call.ms,
        "error": error,
    }


class Agent:
    """`words` rewrites what the caller said before the LLM sees it (this turn and earlier ones), e.g.
    into the form a model was trained on; `fillers` are the phrases the model says before a tool call,
    which the voice pipeline must not mistake for an answer; `greeting` is what a live call opens with;
    `on_bad_arguments` maps a tool to what the caller hears when the model's call of it has arguments that
    do not fit its schema (a tool not in it: the model is told the error and asked again)."""

    def __init__(
        self,
        llm: ChatBackend,
        tools: Tools,
        system_prompt: str,
        *,
        fillers: tuple[str, ...] = (),
        words: Callable[[str], str] | None = None,
        max_tool_rounds: int = 2,
        greeting: str | None = None,
        on_bad_arguments: dict[str, str] | None = None,
    ):
        self.llm, self.tools, self.system_prompt = llm, tools, system_prompt
        self.greeting = greeting
        self.fillers = fillers
        self.words = words or (lambda text: text)
        self.max_tool_rounds = max_tool_rounds
        self.on_bad_arguments = on_bad_arguments or {}
        self.parameters = {s["function"]["name"]: s["function"].get("parameters", {}) for s in tools.schemas}

    async def turn(
        self,
        user_text: str,
        history: list[dict] | None = None,
        on_event: Callable[[AgentEvent], None] | None = None,
    ) -> TurnResult:
        """One caller turn; `on_event` sees every step as it happens (see AgentEvent)."""
        emit = on_event or (lambda event: None)
        result = TurnResult(user_text, request_ns=time.monotonic_ns())
        said = [*(history or []), {"role": "user", "content": user_text}]
        said = [{**m, "content": self.words(m["content"])} if m["role"] == "user" else m for m in said]
        messages = [{"role": "system", "content": self.system_prompt}, *said]
        for round_ in range(self.max_tool_rounds + 1):
            call = LLMCall(
                round_,
                time.monotonic_ns(),
                endpoint=getattr(self.llm, "url", None),
                model=getattr(self.llm, "model", None),
            )
            result.calls.append(call)
            emit(AgentEvent("llm_request", call.request_ns, round_))
            content, calls = await self._ask(messages, call, result, emit)
            call.tools = [c.name for c in calls]
            last = not calls or round_ == self.max_tool_rounds
            emit(AgentEvent("llm_call", call.done_ns, round_, llm_call=call))
            if last:
                result.answer = content.strip()
                result.first_answer_token_ns = call.first_content_ns
                if call.first_content_ns:
                    emit(AgentEvent("answer", call.first_content_ns, round_, result.answer))
                break
            result.filler = (result.filler + " " + content).strip()
            messages.append(
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        }
                        for c in calls
                    ],
                }
            )
            for tool_call in calls:
                tool_call.start_ns = time.monotonic_ns()
                emit(AgentEvent("tool_start", tool_call.start_ns, round_, tool_call=tool_call))
                tool_call.result = await self.tools.run(tool_call, messages)
                tool_call.end_ns = time.monotonic_ns()
                emit(AgentEvent("tool_end", tool_call.end_ns, round_, tool_call=tool_call))
                messages.append(
                    {"role": "tool", "tool_call_id": tool_call.id, "content": json.dumps(tool_call.result)}
                )
            result.tool_calls += calls
            if phrase := self._repeat_request(calls):
                self._say(result, phrase, round_ + 1, emit)
                break
        result.done_ns = time.monotonic_ns()
        return result

    def _repeat_request(self, calls: list[ToolCall]) -> str | None:
        """The phrase for the first call whose arguments do not fit its tool, if the agent has one."""
        for call in calls:
            phrase = self.on_bad_arguments.get(call.name)
            if phrase and arguments_problem(call.arguments, self.parameters.get(call.name, {})):
                return phrase
        return None

    def _say(self, result: TurnResult, phrase: str, round_: int, emit) -> None:
        """The agent's own answer, streamed as one content delta of a round no LLM call made."""
        t = time.monotonic_ns()
        result.answer, result.first_answer_token_ns, result.answered_by = phrase, t, "agent"
        emit(AgentEvent("content", t, round_, phrase))
        emit(AgentEvent("answer", t, round_, phrase))

    async def _ask(self, messages, call: LLMCall, result: TurnResult, emit) -> tuple[str, list[ToolCall]]:
        """One LLM call: stream its reply, noting when each kind of delta first arrived."""
        content, calls = "", []
        delta: Delta
        async for delta in self.llm.chat(messages, self.tools.schemas):
            if delta.kind == "done":
                call.server = delta.timings
                continue
            if call.first_token_ns is None:
                call.first_token_ns = delta.t_ns
                if result.first_token_ns is None:
                    result.first_token_ns = delta.t_ns
                    emit(AgentEvent("first_token", delta.t_ns, call.round))
            if delta.kind == "content":
                call.first_content_ns = call.first_content_ns or delta.t_ns
                content += delta.text
                emit(AgentEvent("content", delta.t_ns, call.round, delta.text))
            elif delta.kind == "tool_call":
                calls.append(delta.tool_call)
        call.done_ns = time.monotonic_ns()
        return content, calls
