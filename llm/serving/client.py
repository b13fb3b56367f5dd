"""The agent's LLM over HTTP: any OpenAI-compatible endpoint (ours, vLLM, SGLang, a hosted model),
through the official `openai` client, streaming. Torch-free: the voice process uses it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

from llm.chat import ChatError, Delta, ToolCall


class OpenAIChat:
    """`extra` fields go with every request (e.g. our decoding knobs `threshold`, `steps`, and OpenAI's
    `max_tokens`; without it the budget is the endpoint's, ours the engine's default canvas)."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        extra: dict | None = None,
        timeout: float = 30.0,
    ):
        from openai import AsyncOpenAI  # 0.6 s to import: not on the path of a command's first checks

        self.client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=0
        )
        self.url, self.model = base_url, model
        self.extra = extra or {}

    async def chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]:
        import openai

        try:
            async for delta in self._chat(messages, tools):
                yield delta
        except openai.APIError as e:
            raise ChatError(_failure(e)) from e

    async def _chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]:
        if self.model is None:
            self.model = (await self.client.models.list()).data[0].id
        stream = await self.client.chat.completions.create(
            model=self.model,
            messages=messages,
            tools=tools or None,
            stream=True,
            temperature=0,
            extra_body=self.extra,
        )
        calls: dict[int, ToolCall] = {}
        timings = None
        async for chunk in stream:
            now = time.monotonic_ns()
            timings = (chunk.model_extra or {}).get("ttfat_timings") or timings
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            extra = delta.model_extra or {}
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")  # vLLM, SGLang: either
            if reasoning:
                yield Delta("reasoning", now, reasoning)
            if delta.content:
                yield Delta("content", now, delta.content)
            for tc in delta.tool_calls or []:
                key = _call_index(tc, calls)
                call = calls.setdefault(key, ToolCall(name="", arguments="", id=tc.id or f"call_{key + 1}"))
                if tc.function and tc.function.name:
                    call.name += tc.function.name
                if tc.function and tc.function.arguments:
                    call.arguments += tc.function.arguments
        for call in calls.values():
            yield Delta("tool_call", time.monotonic_ns(), tool_call=call)
        yield Delta("done", time.monotonic_ns(), timings=timings)


def _failure(e: Exception) -> str:
    import openai

    if isinstance(e, openai.APITimeoutError):
        return "the LLM server did not answer in time"
    if isinstance(e, openai.APIConnectionError):
        return f"cannot reach the LLM server ({e.__cause__ or e})"
    if isinstance(e, openai.APIStatusError):
        return f"the LLM server answered HTTP {e.status_code}: {e.message}"
    return f"the LLM server's reply could not be read ({type(e).__name__}: {e})"


def _call_index(tc, calls: dict[int, ToolCall]) -> int:
    """Which tool call a streamed piece belongs to. OpenAI numbers them (`index`); some endpoints do not,
    and send each call whole, or its pieces in a row: a new `id` starts a new call."""
    if tc.index is not None:
        return tc.index
    last = max(calls, default=None)
    if last is None or (tc.id and tc.id != calls[last].id):
        return len(calls)
    return last


class EndpointError(RuntimeError):
    """The LLM endpoint cannot serve the run (unreachable, key refused, no such model, no tools); the
    message says which, so nothing is replayed against it."""


def check_endpoint(base_url: str, model: str | None, tools: list[dict] | None, api_key: str | None) -> str:
    """Before any audio: the endpoint answers, the model to send (given, or the endpoint's first), and a
    one-token request with the agent's tools is accepted. Returns the model name."""
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=api_key or "none", timeout=30.0, max_retries=0)
    refused = f"{base_url}: the API key was refused (--api-key or $OPENAI_API_KEY)"
    try:
        served = [m.id for m in client.models.list().data]
    except openai.AuthenticationError:
        raise EndpointError(refused) from None
    except openai.APIConnectionError as e:
        raise EndpointError(f"{base_url}: no OpenAI-compatible endpoint answers there ({e})") from None
    except openai.APIStatusError:
        served = []  # some endpoints have no /models; the request below still tells
    if model is None:
        if not served:
            raise EndpointError(f"{base_url}: lists no models; name one with --llm-model")
        model = served[0]
    try:
        client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "hello"}],
            tools=tools or openai.NOT_GIVEN,
            max_tokens=1,
        )
    except openai.AuthenticationError:
        raise EndpointError(refused) from None
    except openai.APIStatusError as e:
        what = "tool calls (the agent's tools)" if tools and "tool" in str(e).lower() else "the request"
        raise EndpointError(f"{base_url}: model {model!r} rejects {what}: {e}") from None
    except openai.APIConnectionError as e:
        raise EndpointError(f"{base_url}: no answer to a first request ({e})") from None
    return model


def server_info(base_url: str) -> dict | None:
    """What our server says about itself at /health (model, the decoding it applies when a request sets
    none); None for an endpoint that has no such page (any other OpenAI-compatible server)."""
    import httpx

    try:
        reply = httpx.get(base_url.rstrip("/").removesuffix("/v1") + "/health", timeout=5)
        return reply.json() if reply.status_code == 200 and "decoding" in reply.text else None
    except (httpx.HTTPError, ValueError):
        return None
