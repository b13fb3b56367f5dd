"""The engine in-process as the agent's LLM (`ttfat ask`, evaluation): the server's own reply events
(llm/serving/streaming.py: the token loop, tool calls, the timings in ms from the request), read as the
chat vocabulary's deltas, without HTTP."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator

from llm.chat import Delta, ToolCall
from llm.engine.async_engine import AsyncEngine
from llm.engine.params import GenerationParams
from llm.serving.metrics import Metrics
from llm.serving.reply import ReplyParser
from llm.serving.streaming import reply_events


class EngineChat:
    def __init__(self, engine: AsyncEngine, params: GenerationParams | None = None):
        self.engine = engine
        self.tokenizer = engine.engine.tokenizer
        self.params = params or GenerationParams()
        self.metrics = Metrics(engine)  # its own registry: nothing serves it

    async def chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]:
        start = time.monotonic_ns()
        prompt = self.tokenizer.encode_chat(messages, tools)
        chunks = self.engine.stream(prompt, self.params)
        parser = ReplyParser(self.tokenizer)
        budget = sys.maxsize  # no client's max_tokens: the params' budget bounds the reply
        async for kind, payload in reply_events(chunks, parser, len(prompt), budget, start, self.metrics):
            now = time.monotonic_ns()
            if kind in ("reasoning", "content"):
                yield Delta(kind, now, payload)
            elif kind == "tool_call":
                function = payload["function"]
                call = ToolCall(function["name"], function["arguments"], payload["id"])
                yield Delta("tool_call", now, tool_call=call)
            else:
                yield Delta("done", now, timings=payload["ttfat_timings"])
