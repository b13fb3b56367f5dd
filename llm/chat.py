"""The chat vocabulary that the agent, its LLM backends and the server share. Torch-free, so the voice
process can talk to any OpenAI-compatible endpoint without loading the engine.

A backend streams one reply as `Delta`s: reasoning and content text as it becomes final, each tool call
once complete, and a last `done` delta with the endpoint's own timings (None when it reports none).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from llm.clock import ms


@dataclass
class ToolCall:
    name: str
    arguments: str  # JSON text, as the model wrote it
    id: str = "call_1"
    result: dict | None = None
    start_ns: int = 0  # when the agent ran it (monotonic)
    end_ns: int = 0

    @property
    def ms(self) -> float:
        return ms(self.start_ns, self.end_ns)


@dataclass
class Delta:
    """One piece of a streamed reply; `t_ns` is when it arrived (monotonic)."""

    kind: str  # content | reasoning | tool_call | done
    t_ns: int
    text: str = ""
    tool_call: ToolCall | None = None
    timings: dict | None = None  # on `done`: the endpoint's own timings, None when it reports none


class ChatError(RuntimeError):
    """A backend got no reply (unreachable, too slow, refused): the message is one line a user can act on,
    whatever client the backend speaks through, so the pipeline knows no client's exceptions."""


class ChatBackend(Protocol):
    """An LLM the agent can talk to: ours over HTTP, any OpenAI-compatible server, or the engine
    in-process."""

    def chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]: ...
