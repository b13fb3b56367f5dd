"""The HTTP API over an `AsyncEngine`: `/v1/chat/completions` (streaming or not), `/v1/models`,
`/health` (with the decoding the server applies when a request sets none) and Prometheus `/metrics`.
The server never answers 500 for a client's mistake: bad input gets a 400 with a message."""

from __future__ import annotations

import copy
import json
import time
import uuid
from dataclasses import asdict

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from jinja2 import TemplateError
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from llm.engine.async_engine import AsyncEngine
from llm.engine.params import GenerationParams
from llm.knobs import KNOBS
from llm.serving.metrics import Metrics
from llm.serving.reply import ReplyParser
from llm.serving.requests import OPENAPI, Limits, parse_request
from llm.serving.streaming import collect_reply, reply_events, sse

REFUSALS = (400, 401, 413, 429, 499)  # every one answered with an OpenAI-style error body


def chat_openapi() -> dict:
    """What /openapi.json says the chat endpoint takes and answers (the route reads its body itself, so
    FastAPI cannot infer it): a data file, tested against the server by schemathesis."""
    spec = copy.deepcopy(OPENAPI)
    operation = spec["operation"]
    operation["responses"] |= {str(code): spec["error_response"] for code in REFUSALS}
    return operation


def create_app(
    engine: AsyncEngine, model_name: str, api_key: str | None = None, limits: Limits | None = None
) -> FastAPI:
    limits = limits or Limits()
    metrics = Metrics(engine)
    engine.on_step = metrics.batch.observe
    tok = engine.engine.tokenizer
    cfg = engine.engine.config
    defaults = asdict(GenerationParams().resolve(cfg))
    longest = tok.longest_token_bytes()
    app = FastAPI(title="ttfat diffusion LLM server")

    def error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
        metrics.requests.labels(str(status)).inc()
        return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)

    @app.get("/health")
    async def health():
        return {
            "status": "ok",
            "model": model_name,
            "running": len(engine.engine.running),
            "waiting": len(engine.engine.waiting),
            "family": cfg.family,
            "layout": cfg.layout(),
            "decoding": {k: defaults[k] for k in KNOBS},
        }

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "ttfat"}]}

    @app.get("/metrics", response_class=PlainTextResponse)  # what /openapi.json says it answers
    async def prometheus():
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/chat/completions", openapi_extra=chat_openapi())
    async def chat(request: Request):
        start = time.monotonic_ns()
        if api_key and request.headers.get("authorization") != f"Bearer {api_key}":
            return error(401, "invalid or missing API key", "authentication_error")
        if engine.open_requests >= limits.max_concurrent:
            return error(
                429, f"server is at its limit of {limits.max_concurrent} concurrent requests", "rate_limit"
            )
        raw = await read_body(request, limits.max_body_bytes)
        if raw is None:
            return error(413, f"the request body is over {limits.max_body_bytes} bytes")
        try:
            body = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            return error(400, f"malformed JSON: {e}")
        except RecursionError:
            return error(400, "malformed JSON: nested too deeply")
        try:
            req = parse_request(body, cfg, limits)
            text = tok.apply_chat_template(req.messages, req.tools)
            # a token is at most `longest` bytes: a prompt longer than that many bytes per allowed token
            # is refused before the tokenizer spends time on it
            if len(text.encode()) > limits.max_prompt_tokens * longest:
                return error(400, f"prompt is over {limits.max_prompt_tokens} tokens (the limit)")
            prompt = tok.encode(text)
        except (ValueError, KeyError, TypeError, TemplateError) as e:  # BadRequest is a ValueError
            return error(400, str(e))
        except RecursionError:
            return error(400, "the request is nested too deeply")
        if len(prompt) > limits.max_prompt_tokens:
            return error(400, f"prompt is {len(prompt)} tokens; the limit is {limits.max_prompt_tokens}")
        rid = f"chatcmpl-{uuid.uuid4().hex[:16]}"
        try:
            chunks = engine.stream(prompt, req.params, rid)  # the engine has it before any byte goes back
        except ValueError as e:
            return error(400, str(e))
        events = reply_events(chunks, ReplyParser(tok), len(prompt), req.max_tokens, start, metrics, req.stop)
        if req.stream:
            return StreamingResponse(sse(events, rid, model_name), media_type="text/event-stream")
        reply = await collect_reply(events, request.is_disconnected)
        if reply is None:
            return error(499, "client disconnected")
        message, final = reply
        return {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": final["finish_reason"]}],
            "usage": final["usage"],
            "ttfat_timings": final["ttfat_timings"],
        }

    return app


async def read_body(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to be over `limit` bytes (from Content-Length, or while
    it streams in), so a huge body is never read whole."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            return None
        parts.append(part)
    return b"".join(parts)
