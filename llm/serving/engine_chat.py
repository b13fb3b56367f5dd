"""The engine in-process as the agent's LLM (`ttfat ask`, evaluation): the same reply parsing as the
server, without HTTP. Its `done` delta carries the engine's own timings (ms from the request)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from llm.chat import Delta
from llm.engine.async_engine import AsyncEngine
from llm.engine.params import GenerationParams
from llm.serving.reply import ReplyParser


class EngineChat:
    def __init__(self, engine: AsyncEngine, params: GenerationParams | None = None):
        self.engine = engine
        self.tokenizer = engine.engine.tokenizer
        self.params = params or GenerationParams()

    async def chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]:
        start = time.monotonic_ns()
        prompt = self.tokenizer.encode_chat(messages, tools)
        parser = ReplyParser(self.tokenizer)
        last = first_content = None
        tokens = 0
        async for chunk in self.engine.stream(prompt, self.params):
            last = chunk
            tokens += len(chunk.token_ids)
            reasoning, text = parser.feed(chunk.token_ids)
            if reasoning:
                yield Delta("reasoning", chunk.emit_ns, reasoning)
            if text:
                first_content = first_content or chunk.emit_ns
                yield Delta("content", chunk.emit_ns, text)
        for call in parser.tool_calls():
            yield Delta("tool_call", time.monotonic_ns(), tool_call=call)
        ms = lambda t: None if t is None else round((t - start) / 1e6, 3)  # noqa: E731
        timings = last and {
            "queue_ms": round((last.admitted_ns - last.arrival_ns) / 1e6, 3),
            "prefill_ms": round((last.prefill_ns - last.admitted_ns) / 1e6, 3),
            "first_content_ms": ms(first_content),
            "done_ms": ms(time.monotonic_ns()),
            "forwards": last.forwards,
            "tokens_per_forward": round(tokens / max(last.forwards, 1), 3),
        }
        yield Delta("done", time.monotonic_ns(), timings=timings)
