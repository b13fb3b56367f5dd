"""Reading a chat completion request: validate the body and resolve its decoding settings. Anything a
client got wrong raises BadRequest with a message it can act on (the server answers 400)."""

from __future__ import annotations

from dataclasses import dataclass

from llm.engine.config import ModelConfig
from llm.engine.errors import DecodingError
from llm.engine.params import GenerationParams

ROLES = {"system", "user", "assistant", "tool"}
# Decoding knobs a request may set as extra fields, with their types.
KNOBS = {"steps": int, "block_length": int, "threshold": float, "factor": float, "cache": str, "seed": int,
         "ignore_eos": bool}  # fmt: skip


@dataclass
class Limits:
    max_prompt_tokens: int = 1536
    max_tokens: int = 256  # the largest max_tokens a request may ask for
    max_concurrent: int = 32  # open requests before 429


class BadRequest(ValueError):
    pass


@dataclass
class ChatRequest:
    messages: list[dict]
    tools: list | None
    params: GenerationParams  # resolved against the served model
    stream: bool
    max_tokens: int  # the reply is cut here (the canvas is rounded up to whole blocks)


def parse_request(body, cfg: ModelConfig, limits: Limits) -> ChatRequest:
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
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", GenerationParams.gen_length))
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
    try:
        params = GenerationParams(gen_length=max_tokens, temperature=float(temperature), **knobs).resolve(cfg)
    except DecodingError as e:
        raise BadRequest(str(e)) from None
    return ChatRequest(messages, tools, params, bool(body.get("stream", False)), max_tokens)
