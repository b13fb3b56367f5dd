"""Test doubles that inject a fault the real parts make too rarely to test on (and only those)."""

from __future__ import annotations

import time

from llm.chat import Delta, ToolCall


class WrongArguments:
    """The model's first reply to what the caller said (in every attempt at the turn, speculative ones
    too): its filler, then one tool call with the arguments given (the bundled model writes broken
    arguments only now and then); a reply after a tool result comes from the real model."""

    def __init__(self, real, name: str, arguments: str):
        self.real, self.name, self.arguments = real, name, arguments

    async def chat(self, messages, tools):
        if messages[-1]["role"] == "user":
            yield Delta("content", time.monotonic_ns(), "Let me check that for you.")
            yield Delta("tool_call", time.monotonic_ns(), tool_call=ToolCall(self.name, self.arguments))
            yield Delta("done", time.monotonic_ns())
            return
        async for delta in self.real.chat(messages, tools):
            yield delta
