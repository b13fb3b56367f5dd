"""The agent's LLM over HTTP: any OpenAI-compatible endpoint (ours, vLLM, SGLang, a hosted model),
through the official `openai` client, streaming. Torch-free: the voice process uses it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from openai import AsyncOpenAI

from llm.chat import Delta, ToolCall


class OpenAIChat:
    """`max_tokens=None` leaves the budget to the endpoint (ours: the engine's default canvas);
    `extra` fields go with every request (e.g. our decoding knobs `threshold`, `steps`)."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        extra: dict | None = None,
        max_tokens: int | None = None,
        timeout: float = 30.0,
    ):
        self.client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=0
        )
        self.url, self.model = base_url, model
        self.extra = extra or {}
        self.max_tokens = max_tokens

    async def chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]:
        if self.model is None:
            self.model = (await self.client.models.list()).data[0].id
        budget = {} if self.max_tokens is None else {"max_tokens": self.max_tokens}
        stream = await self.client.chat.completions.create(
            model=self.model, messages=messages, tools=tools or None, stream=True, temperature=0,
            extra_body=self.extra, **budget,
        )  # fmt: skip
        calls: dict[int, ToolCall] = {}
        timings = None
        async for chunk in stream:
            now = time.monotonic_ns()
            timings = (chunk.model_extra or {}).get("ttfat_timings") or timings
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            reasoning = (delta.model_extra or {}).get("reasoning_content")
            if reasoning:
                yield Delta("reasoning", now, reasoning)
            if delta.content:
                yield Delta("content", now, delta.content)
            for tc in delta.tool_calls or []:
                call = calls.setdefault(
                    tc.index, ToolCall(name="", arguments="", id=tc.id or f"call_{tc.index + 1}")
                )
                if tc.function and tc.function.name:
                    call.name += tc.function.name
                if tc.function and tc.function.arguments:
                    call.arguments += tc.function.arguments
        for call in calls.values():
            yield Delta("tool_call", time.monotonic_ns(), tool_call=call)
        yield Delta("done", time.monotonic_ns(), timings=timings)


def server_info(base_url: str) -> dict | None:
    """What our server says about itself at /health (model, the decoding it applies when a request sets
    none); None for an endpoint that has no such page (any other OpenAI-compatible server)."""
    import httpx

    try:
        reply = httpx.get(base_url.rstrip("/").removesuffix("/v1") + "/health", timeout=5)
        return reply.json() if reply.status_code == 200 and "decoding" in reply.text else None
    except (httpx.HTTPError, ValueError):
        return None
