"""From engine chunks to an OpenAI reply: `reply_events` reads the committed tokens as content,
reasoning and tool calls and ends with the server's own timings; `sse` writes those events as
server-sent `chat.completion.chunk`s. Each chunk leaves the moment the engine commits its tokens."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator

from llm.clock import ms
from llm.engine.sequence import Chunk
from llm.serving.metrics import Metrics
from llm.serving.reply import ReplyParser
from llm.serving.stop import StopSequences

log = logging.getLogger("ttfat.server")


async def reply_events(
    chunks: AsyncIterator[Chunk],
    parser: ReplyParser,
    prompt_len: int,
    max_tokens: int,
    start: int,
    metrics: Metrics,
    stop: list[str] | None = None,
) -> AsyncIterator[tuple[str, object]]:
    """(kind, payload) pairs: content and reasoning text, tool calls, then the final record
    (finish reason, usage, `ttfat_timings`: ms from `start`, when the server received the request).
    Content ends before the first `stop` sequence. Leaving early cancels the request in the engine."""
    first_token = first_content = last = None
    tokens = 0
    status = "200"
    stops = StopSequences(stop or [])
    stopped = False
    try:
        async for chunk in chunks:
            last = chunk
            take = chunk.token_ids[: max_tokens - tokens]
            tokens += len(take)
            if take and first_token is None:
                first_token = chunk.emit_ns
            reasoning, text = parser.feed(take)
            if reasoning:
                yield "reasoning", reasoning
            text, stopped = stops.feed(text)
            if text:
                first_content = first_content or chunk.emit_ns
                yield "content", text
            if stopped or tokens >= max_tokens:
                break
        if rest := stops.flush():
            first_content = first_content or last.emit_ns
            yield "content", rest
        calls = parser.tool_calls()
        for i, call in enumerate(calls):
            yield (
                "tool_call",
                {
                    "index": i,
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                },
            )
        finish = (
            "tool_calls"
            if calls
            else (
                "length"
                if not stopped and (tokens >= max_tokens or last.finish_reason == "length")
                else "stop"
            )
        )
        answer_at = None if calls else first_content
        timings = {
            "arrival_ms": ms(start, last.arrival_ns),  # parsed and tokenized, handed to the engine
            "queue_ms": ms(last.arrival_ns, last.admitted_ns),
            "prefill_ms": ms(last.admitted_ns, last.prefill_ns),
            "first_token_ms": ms(start, first_token),
            "first_content_ms": ms(start, first_content),
            "first_answer_token_ms": ms(start, answer_at),
            "done_ms": ms(start, time.monotonic_ns()),
            "forwards": last.forwards,
            "tokens_per_forward": round(tokens / max(last.forwards, 1), 3),
        }
        if first_token is not None:
            metrics.first_token.observe((first_token - start) / 1e9)
        if answer_at is not None:
            metrics.first_answer_token.observe((answer_at - start) / 1e9)
        metrics.tokens_per_forward.observe(timings["tokens_per_forward"])
        log.info("%s %s", last.request_id, json.dumps(timings))
        usage = {
            "prompt_tokens": prompt_len,
            "completion_tokens": tokens,
            "total_tokens": prompt_len + tokens,
        }
        yield "final", {"finish_reason": finish, "usage": usage, "ttfat_timings": timings}
    except (GeneratorExit, asyncio.CancelledError):  # the client went away: the request is cancelled
        status = "499"
        raise
    except Exception:
        status = "500"
        metrics.errors.inc()
        raise
    finally:
        await chunks.aclose()  # cancels the request unless it finished
        metrics.requests.labels(status).inc()


async def sse(events: AsyncIterator[tuple[str, object]], rid: str, model_name: str) -> AsyncIterator[str]:
    created = int(time.time())

    def chunk(delta: dict, finish=None, **extra) -> str:
        body = {
            "id": rid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model_name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return f"data: {json.dumps(body)}\n\n"

    try:
        yield chunk({"role": "assistant", "content": ""})
        async for kind, payload in events:
            if kind == "content":
                yield chunk({"content": payload})
            elif kind == "reasoning":
                yield chunk({"reasoning_content": payload})
            elif kind == "tool_call":
                yield chunk({"tool_calls": [payload]})
            else:
                yield chunk(
                    {},
                    payload["finish_reason"],
                    usage=payload["usage"],
                    ttfat_timings=payload["ttfat_timings"],
                )
        yield "data: [DONE]\n\n"
    except Exception as e:  # the status line is gone already: report in-band
        yield f"data: {json.dumps({'error': {'message': str(e), 'type': 'server_error'}})}\n\n"
    finally:
        await events.aclose()


async def collect_reply(events: AsyncIterator[tuple[str, object]], disconnected) -> tuple[dict, dict] | None:
    """A non-streamed reply: (message, final record), or None when the client went away first."""
    content, reasoning, calls, final = "", "", [], None
    try:
        async for kind, payload in events:
            if await disconnected():
                break
            if kind == "content":
                content += payload
            elif kind == "reasoning":
                reasoning += payload
            elif kind == "tool_call":
                calls.append(payload)
            elif kind == "final":
                final = payload
    finally:
        await events.aclose()
    if final is None:
        return None
    message = {"role": "assistant", "content": content or None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return message, final
