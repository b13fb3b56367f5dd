"""`ttfat serve`: the diffusion engine behind an OpenAI-compatible API (FastAPI on uvicorn with httptools
and uvloop).

`/v1/chat/completions` (streaming and not), `/v1/models`, `/health`, Prometheus `/metrics`. Every
streamed chunk leaves the moment the engine commits its tokens. Decoding knobs are extra request
fields (steps, block_length, threshold, factor, cache, temperature, seed). The final chunk carries
the server-side timings in `ttfat_timings`, next to `usage`. A client that disconnects cancels its
request at the next engine step.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from dataclasses import dataclass

import torch
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from llm.async_engine import AsyncEngine
from llm.params import GenerationParams
from llm.reply import ReplyParser

log = logging.getLogger("ttfat.server")
ROLES = {"system", "user", "assistant", "tool"}
KNOBS = {"steps": int, "block_length": int, "threshold": float, "factor": float, "cache": str, "seed": int,
         "ignore_eos": bool}  # fmt: skip


@dataclass
class Limits:
    max_prompt_tokens: int = 1536
    max_tokens: int = 256
    max_concurrent: int = 32


class Metrics:
    def __init__(self, engine: AsyncEngine):
        self.registry = r = CollectorRegistry()
        self.requests = Counter("ttfat_requests", "chat completion requests", ["status"], registry=r)
        self.errors = Counter("ttfat_errors", "requests that failed inside the server", registry=r)
        queue = Gauge("ttfat_queue_depth", "requests waiting for a slot", registry=r)
        queue.set_function(lambda: len(engine.engine.waiting))
        running = Gauge("ttfat_running", "requests being decoded", registry=r)
        running.set_function(lambda: len(engine.engine.running))
        fast = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10)
        sizes = (1, 2, 4, 8, 16, 32, 64)
        self.batch = Histogram("ttfat_batch_size", "requests per forward pass", buckets=sizes, registry=r)
        self.ttft = Histogram("ttfat_ttft_seconds", "request to first token", buckets=fast, registry=r)
        self.ttfat = Histogram(
            "ttfat_ttfat_seconds", "request to first answer token", buckets=fast, registry=r
        )
        self.tpf = Histogram("ttfat_tokens_per_forward", "tokens committed per forward pass",
                             buckets=(0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16), registry=r)  # fmt: skip


class BadRequest(ValueError):
    pass


def parse_request(body, cfg, limits: Limits) -> tuple[list[dict], list | None, GenerationParams, bool, int]:
    """Validate a chat completion body; raise BadRequest with a message a client can act on."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(f"messages[{i}] needs a role in {sorted(ROLES)}")
        if m.get("content") is not None and not isinstance(m["content"], str):
            raise BadRequest(f"messages[{i}].content must be a string")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", 64))
    if (
        not isinstance(max_tokens, int)
        or isinstance(max_tokens, bool)
        or not 1 <= max_tokens <= limits.max_tokens
    ):
        raise BadRequest(f"max_tokens must be an integer from 1 to {limits.max_tokens}")
    knobs = {}
    for name, kind in KNOBS.items():
        value = body.get(name)
        if value is not None:
            if isinstance(value, bool) != (kind is bool) or not isinstance(
                value, (kind, int) if kind is float else kind
            ):
                raise BadRequest(f"{name} must be of type {kind.__name__}")
            knobs[name] = value
    temperature = body.get("temperature", 0.0)
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool):
        raise BadRequest("temperature must be a number")
    block = knobs.get("block_length") or (cfg.block_size if cfg.attention == "block" else 32)
    gen_length = math.ceil(max_tokens / block) * block
    params = GenerationParams(gen_length=gen_length, temperature=float(temperature), **knobs)
    try:
        params.resolve(cfg)
    except ValueError as e:
        raise BadRequest(str(e)) from None
    return messages, tools, params, bool(body.get("stream", False)), max_tokens


def create_app(
    engine: AsyncEngine, model_name: str, api_key: str | None = None, limits: Limits | None = None
):
    limits = limits or Limits()
    metrics = Metrics(engine)
    engine.on_step = metrics.batch.observe
    tok = engine.engine.tokenizer
    cfg = engine.engine.config
    app = FastAPI(title="ttfat diffusion LLM server")

    def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
        metrics.requests.labels(str(status)).inc()
        return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)

    @app.get("/health")
    async def health():
        return {"status": "ok", "model": model_name, "running": len(engine.engine.running),
                "waiting": len(engine.engine.waiting)}  # fmt: skip

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "ttfat"}]}

    @app.get("/metrics")
    async def prometheus():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        start = time.monotonic_ns()
        if api_key and request.headers.get("authorization") != f"Bearer {api_key}":
            return error(401, "invalid or missing API key", "authentication_error")
        if engine.open_requests >= limits.max_concurrent:
            return error(
                429, f"server is at its limit of {limits.max_concurrent} concurrent requests", "rate_limit"
            )
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            return error(400, f"malformed JSON: {e}")
        try:
            messages, tools, params, stream, max_tokens = parse_request(body, cfg, limits)
            prompt = tok.encode_chat(messages, tools)
        except (ValueError, KeyError, TypeError) as e:  # BadRequest is a ValueError
            return error(400, str(e))
        if len(prompt) > limits.max_prompt_tokens:
            return error(400, f"prompt is {len(prompt)} tokens; the limit is {limits.max_prompt_tokens}")
        rid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        try:
            chunks = engine.stream(prompt, params, rid)  # the engine has it before any byte goes back
        except ValueError as e:
            return error(400, str(e))
        events = completion_events(chunks, prompt, max_tokens, start)
        if stream:
            return StreamingResponse(sse(events, rid), media_type="text/event-stream")
        try:
            content, reasoning, calls, final = "", "", [], None
            async for kind, payload in events:
                if await request.is_disconnected():
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
            return error(499, "client disconnected")
        message = {"role": "assistant", "content": content or None}
        if reasoning:
            message["reasoning_content"] = reasoning
        if calls:
            message["tool_calls"] = calls
        return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model_name,
                "choices": [{"index": 0, "message": message, "finish_reason": final["finish_reason"]}],
                "usage": final["usage"], "ttfat_timings": final["ttfat_timings"]}  # fmt: skip

    async def completion_events(chunks, prompt, max_tokens, start):
        """(kind, payload) pairs: content text, tool calls, then the final record."""
        parser = ReplyParser(tok)
        first_token = first_content = last = None
        tokens = 0
        status = "200"
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
                if text:
                    first_content = first_content or chunk.emit_ns
                    yield "content", text
                if tokens >= max_tokens:
                    break
            calls = parser.tool_calls()
            for i, call in enumerate(calls):
                yield "tool_call", {"index": i, "id": call.id, "type": "function",
                                    "function": {"name": call.name, "arguments": call.arguments}}  # fmt: skip
            finish = "tool_calls" if calls else ("length" if tokens >= max_tokens or
                                                 last.finish_reason == "length" else "stop")  # fmt: skip
            answer_at = None if calls else first_content
            ms = lambda t: None if t is None else round((t - start) / 1e6, 3)  # noqa: E731
            timings = {
                "arrival_ms": ms(last.arrival_ns),  # request parsed and tokenized, handed to the engine
                "queue_ms": round((last.admitted_ns - last.arrival_ns) / 1e6, 3),
                "prefill_ms": round((last.prefill_ns - last.admitted_ns) / 1e6, 3),
                "first_token_ms": ms(first_token),
                "first_answer_token_ms": ms(answer_at),
                "done_ms": ms(time.monotonic_ns()),
                "forwards": last.forwards,
                "steps": last.steps,
                "tokens_per_forward": round(tokens / max(last.forwards, 1), 3),
            }
            if first_token is not None:
                metrics.ttft.observe((first_token - start) / 1e9)
            if answer_at is not None:
                metrics.ttfat.observe((answer_at - start) / 1e9)
            metrics.tpf.observe(timings["tokens_per_forward"])
            log.info("%s %s", last.request_id, json.dumps(timings))
            usage = {
                "prompt_tokens": len(prompt),
                "completion_tokens": tokens,
                "total_tokens": len(prompt) + tokens,
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

    async def sse(events, rid):
        created = int(time.time())

        def chunk(delta: dict, finish=None, **extra) -> str:
            body = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model_name,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}  # fmt: skip
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
                    yield chunk({}, payload["finish_reason"], usage=payload["usage"],
                                ttfat_timings=payload["ttfat_timings"])  # fmt: skip
            yield "data: [DONE]\n\n"
        except Exception as e:  # the status line is gone already: report in-band
            yield f"data: {json.dumps({'error': {'message': str(e), 'type': 'server_error'}})}\n\n"
        finally:
            await events.aclose()

    return app


def serve(model: str, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None,
          device: str | None = None, max_batch: int = 16, limits: Limits | None = None,
          dtype: str | None = None, threads: int | None = None) -> None:  # fmt: skip
    import os

    import uvicorn

    from llm.checkpoint import resolve_model
    from llm.engine import Engine

    path = resolve_model(model)
    torch.set_num_threads(threads or max(1, (os.cpu_count() or 2) // 2))
    engine = AsyncEngine(
        Engine(path, device=device, dtype=dtype and getattr(torch, dtype), max_batch=max_batch)
    )
    app = create_app(engine, model if model in ("bundled", "bundled-ar") else path.name, api_key, limits)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    uvicorn.run(app, host=host, port=port, log_level="warning")
