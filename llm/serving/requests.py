"""Reading a chat completion request: validate the body and resolve its decoding settings. Anything a
client got wrong raises BadRequest with a message it can act on (the server answers 400)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

from llm.engine.config import ModelConfig
from llm.engine.errors import DecodingError
from llm.engine.params import GenerationParams
from llm.knobs import KNOBS, REQUEST_KNOBS, Knob
from llm.schema import schema_problem

ROLES = {"system", "user", "assistant", "tool"}

# Fields of OpenAI's request this server cannot honour: a request that sets them is refused (as vLLM
# does), rather than answered as if they were not there. Their harmless values pass.
UNSUPPORTED = {
    "n": lambda v: v == 1,
    "logprobs": lambda v: v is False,
    "top_logprobs": lambda v: v in (0,),
    "response_format": lambda v: v == {"type": "text"},
    "logit_bias": lambda v: not v,
    "best_of": lambda v: v == 1,
    "echo": lambda v: v is False,
    "suffix": lambda v: not v,
}
MAX_STOP = 4  # stop sequences a request may give, as OpenAI allows
# What /openapi.json publishes for the chat endpoint, and the body's schema: the data file, with the
# decoding knobs' fields (OpenAI's max_tokens, temperature and seed among them) from llm/knobs.py
OPENAPI = json.loads(resources.files("llm.serving").joinpath("chat_completions.openapi.json").read_text())
REQUEST_SCHEMA = OPENAPI["operation"]["requestBody"]["content"]["application/json"]["schema"]
REQUEST_SCHEMA["properties"] |= {knob.field: knob.schema() for knob in REQUEST_KNOBS}


@dataclass
class Limits:
    max_prompt_tokens: int = 1536
    max_tokens: int = 256  # the largest max_tokens a request may ask for
    max_concurrent: int = 32  # open requests before 429
    max_body_bytes: int = 1 << 20  # a larger body is refused (413) before it is read whole


class BadRequest(ValueError):
    pass


@dataclass
class ChatRequest:
    messages: list[dict]
    tools: list | None
    params: GenerationParams  # resolved against the served model
    stream: bool
    max_tokens: int  # the reply is cut here (the canvas is rounded up to whole blocks)
    stop: list[str]  # the reply ends before the first of these (not included), finish_reason "stop"


def _text(content, where: str) -> str | None:
    """A message's content: a string, or OpenAI's content parts of which only text ones are taken."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"{where}.content must be a string or a list of content parts")
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise BadRequest(f"{where}.content[{j}]: only text parts are supported (got {kind!r})")
        texts.append(part["text"])
    return "".join(texts)


def _tool_calls(calls, where: str) -> list[dict]:
    if not isinstance(calls, list):
        raise BadRequest(f"{where}.tool_calls must be a list")
    for j, call in enumerate(calls):
        fn = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(fn, dict)
            or not isinstance(fn.get("name"), str)
            or not isinstance(fn.get("arguments"), str)
            or not isinstance(call.get("id", ""), str)
        ):
            raise BadRequest(
                f'{where}.tool_calls[{j}] must be {{"id": str, "type": "function", '
                f'"function": {{"name": str, "arguments": str}}}}'
            )
    return calls


def _messages(messages) -> list[dict]:
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise BadRequest(f"{where} needs a role in {sorted(ROLES)}")
        m = {**m, "content": _text(m.get("content"), where)}
        for name in ("tool_call_id", "name"):
            if m.get(name) is not None and not isinstance(m[name], str):
                raise BadRequest(f"{where}.{name} must be a string, not {json_type(m[name])}")
        if m.get("tool_calls") is not None:
            if m["role"] != "assistant":
                raise BadRequest(f"{where}: only an assistant message has tool_calls")
            _tool_calls(m["tool_calls"], where)
        out.append(m)
    return out


def _flag(body: dict, name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise BadRequest(f"{name} must be true or false, not {json_type(value)}")
    return value


def json_type(value) -> str:
    return {
        str: "a string",
        int: "a number",
        float: "a number",
        list: "a list",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _stop(value) -> list[str]:
    stops = [value] if isinstance(value, str) else value if value is not None else []
    if not isinstance(stops, list) or not all(isinstance(s, str) and s for s in stops):
        raise BadRequest("stop must be a non-empty string or a list of them")
    if len(stops) > MAX_STOP:
        raise BadRequest(f"stop takes at most {MAX_STOP} sequences")
    return stops


def _knob(knob: Knob, body: dict, field: str) -> object:
    """A decoding knob's value as the request gives it in `field`, checked as llm/knobs.py declares it."""
    if problem := knob.problem(body[field]):
        raise BadRequest(f"{field} {problem}")
    return body[field]


def parse_request(body, cfg: ModelConfig, limits: Limits) -> ChatRequest:
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    for name, harmless in UNSUPPORTED.items():
        if name in body and body[name] is not None and not harmless(body[name]):
            raise BadRequest(f"{name} is not supported by this server ({name}={json.dumps(body[name])})")
    messages = _messages(body.get("messages"))
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("'tools' must be a list")
    for j, tool in enumerate(tools or []):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise BadRequest(f'tools[{j}] must be {{"type": "function", "function": {{"name": str, ...}}}}')
    knobs = {k.name: _knob(k, body, k.field) for k in REQUEST_KNOBS if body.get(k.field) is not None}
    if body.get("max_completion_tokens") is not None:  # OpenAI's newer name for max_tokens wins over it
        knobs["gen_length"] = _knob(KNOBS["gen_length"], body, "max_completion_tokens")
    max_tokens = knobs.setdefault("gen_length", GenerationParams.gen_length)
    if max_tokens > limits.max_tokens:
        raise BadRequest(f"max_tokens must be at most {limits.max_tokens}, not {max_tokens}")
    if knobs.get("block_length", 1) > limits.max_tokens:
        raise BadRequest(f"block_length must be at most {limits.max_tokens} (the largest max_tokens)")
    try:
        params = GenerationParams(**knobs).resolve(cfg)
    except DecodingError as e:
        raise BadRequest(str(e)) from None
    whole = params.blocks * params.block_length
    if params.steps > whole:  # a step commits at least one token: more steps is no work done
        raise BadRequest(f"steps must be at most {whole} (max_tokens, in whole blocks)")
    request = ChatRequest(messages, tools, params, _flag(body, "stream"), max_tokens, _stop(body.get("stop")))
    if problem := schema_problem(body, REQUEST_SCHEMA):  # what the checks above do not cover
        raise BadRequest(problem)
    return request
