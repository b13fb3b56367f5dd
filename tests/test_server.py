"""The server with the official openai client, on a free port, serving the bundled model."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from openai import OpenAI

from llm.agentfile import load_agent_file
from llm.serving.process import LocalServer
from llm.serving.requests import Limits
from llm.serving.server import slow_dtype
from llm.support.models import BUNDLED
from llm.support.policy import SYSTEM_PROMPT
from llm.support.store import Store
from tests.test_train import cpu_computes_in_bf16

TOOLS = [t.schema for t in load_agent_file().tools]  # the bundled agent's tool schemas


@pytest.fixture(scope="module")
def server():
    local = LocalServer(
        BUNDLED["bundled"], "bundled", limits=Limits(max_concurrent=8, max_tokens=256), api_key="secret"
    )
    url = local.__enter__()
    yield local, url
    local.__exit__(None, None, None)


def client(url: str) -> OpenAI:
    return OpenAI(base_url=url, api_key="secret", max_retries=0)


def user(text: str) -> list[dict]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]


# a request that runs for 256 one-token steps whatever the model says
LONG = {
    "model": "bundled",
    "messages": user("hello"),
    "max_tokens": 256,
    "stream": True,
    "steps": 256,
    "ignore_eos": True,
}


def test_streaming_and_plain_give_the_same_answer(server):
    _, url = server
    c = client(url)
    plain = c.chat.completions.create(
        model="bundled", messages=user("what are your opening hours"), max_tokens=64
    )
    pieces, final = [], None
    for chunk in c.chat.completions.create(
        model="bundled", messages=user("what are your opening hours"), max_tokens=64, stream=True
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            pieces.append(chunk.choices[0].delta.content)
        if chunk.choices and chunk.choices[0].finish_reason:
            final = chunk
    assert "".join(pieces) == plain.choices[0].message.content
    assert "eight in the morning" in plain.choices[0].message.content
    assert len(pieces) > 1  # committed prefixes stream, not one blob at the end
    timings = final.model_extra["ttfat_timings"]
    assert 0 < timings["arrival_ms"] <= timings["first_token_ms"] <= timings["first_answer_token_ms"]
    assert (
        timings["first_content_ms"] == timings["first_answer_token_ms"]
    )  # no tool call: content is the answer
    assert timings["queue_ms"] >= 0 and 0 < timings["prefill_ms"] <= timings["first_token_ms"]
    assert timings["first_answer_token_ms"] <= timings["done_ms"]
    assert timings["forwards"] >= 1 and final.usage.completion_tokens >= len(pieces)
    assert [m.id for m in c.models.list().data] == ["bundled"]


def test_tool_call_round_trip(server):
    _, url = server
    c = client(url)
    store = Store()
    oid = next(o for o, row in sorted(store.orders.items()) if row["status"] == "shipped")
    messages = user(f"where is my order {oid}")
    first = c.chat.completions.create(model="bundled", messages=messages, tools=TOOLS, max_tokens=64)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "lookup_order" and json.loads(call.function.arguments) == {"order_id": oid}
    result = store.execute(call.function.name, call.function.arguments)
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)},
    ]
    second = c.chat.completions.create(model="bundled", messages=messages, tools=TOOLS, max_tokens=64)
    answer = second.choices[0].message.content
    assert second.choices[0].finish_reason == "stop"
    assert result["carrier"] in answer and result["eta"] in answer


def test_concurrent_requests_equal_sequential_ones(server):
    from openai import AsyncOpenAI

    _, url = server
    questions = [
        "do you have yoga mats",
        "what does shipping cost",
        "hello",
        "i want to talk to a person",
        "whats the status of order 1234",
        "how do returns work",
    ]
    sequential = [
        client(url)
        .chat.completions.create(model="bundled", messages=user(q), max_tokens=64)
        .choices[0]
        .message
        for q in questions
    ]

    async def together():
        c = AsyncOpenAI(base_url=url, api_key="secret", max_retries=0)
        replies = await asyncio.gather(
            *[c.chat.completions.create(model="bundled", messages=user(q), max_tokens=64) for q in questions]
        )
        return [r.choices[0].message for r in replies]

    assert [m.model_dump() for m in asyncio.run(together())] == [m.model_dump() for m in sequential]
    metrics = httpx.get(url.removesuffix("/v1") + "/metrics").text
    assert 'ttfat_batch_size_bucket{le="4.0"}' in metrics
    for name in (
        "ttfat_time_to_first_token_seconds_count",
        "ttfat_time_to_first_answer_token_seconds_count",
        "ttfat_requests_waiting",
        "ttfat_requests_running",
        "ttfat_tokens_per_forward_count",
    ):
        assert f"\n{name}" in metrics, name
    batched = sum(
        float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("ttfat_batch_size_sum")
    )
    assert batched > 0


def test_disconnect_cancels_the_request(server):
    local, url = server
    engine = local.engine.engine
    auth = {"authorization": "Bearer secret"}
    with (
        httpx.Client(headers=auth) as http,
        http.stream("POST", url + "/chat/completions", json=LONG) as response,
    ):
        for line in response.iter_lines():
            if '"content"' in line and '"content": ""' not in line:
                break  # a token arrived: the request is running; now hang up
    forwards_at_hangup = engine.total_forwards
    deadline = time.monotonic() + 5
    while engine.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not engine.running
    assert engine.total_forwards - forwards_at_hangup < 50  # the full request needs 256
    metrics = httpx.get(url.removesuffix("/v1") + "/metrics").text
    assert 'ttfat_requests_total{status="499"}' in metrics


def test_bad_requests_and_limits(server):
    _, url = server

    def post(body, key="secret", raw=None):
        headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
        return httpx.post(url + "/chat/completions", headers=headers, content=raw or json.dumps(body))

    ok = {"model": "bundled", "messages": user("hi")}
    assert post(ok, key="wrong").status_code == 401
    bad = [
        {"messages": []},
        ok | {"max_tokens": 10_000},
        ok | {"threshold": 2.0},
        ok | {"cache": "dual"},
        ok | {"steps": "many"},
        {"messages": [{"role": "wizard"}]},
    ]
    for body, raw in [(None, b"{not json")] + [(b, None) for b in bad]:
        response = post(body, raw=raw)
        assert response.status_code == 400, (body, response.text)
        assert response.json()["error"]["message"]
    long = {"model": "bundled", "messages": user("order " * 2000)}
    assert post(long).status_code == 400
    health = httpx.get(url.removesuffix("/v1") + "/health").json()
    assert health["status"] == "ok" and health["model"] == "bundled"
    # the decoding a request gets when it sets none: the bundled model's threshold rule, whole blocks,
    # and its floor on the tool-call filler's first token
    assert health["family"] == "ttfat" and health["layout"]["blocks_from"] == "the answer's start"
    assert health["decoding"] == {
        "gen_length": 64,
        "steps": 64,
        "block_length": 8,
        "sub_block_length": 8,
        "threshold": 0.9,
        "factor": None,
        "schedule": "even",
        "confidence": "probability",
        "cache": "block",
        "temperature": 0.0,
        "seed": None,
        "early_stop": True,
        "ignore_eos": False,
        "opening_floor": {"475": 0.8},
    }


def test_concurrency_limit_answers_429():
    local = LocalServer(BUNDLED["bundled"], "bundled", limits=Limits(max_concurrent=1))
    with (
        local as url,
        httpx.Client() as http,
        http.stream("POST", url + "/chat/completions", json=LONG) as held,
    ):
        lines = held.iter_lines()  # keep the iterator: dropping it closes the connection
        next(lines)
        second = httpx.post(url + "/chat/completions", json={"messages": user("hi")})
        assert second.status_code == 429


# -- hostile and unusual input (issue 22): never a 500, never a server kept busy --------------------------


def post(url: str, body=None, raw: bytes | None = None, headers: dict | None = None) -> httpx.Response:
    h = {"authorization": "Bearer secret", "content-type": "application/json", **(headers or {})}
    content = raw if raw is not None else json.dumps(body)
    return httpx.post(url + "/chat/completions", headers=h, content=content, timeout=30)


@pytest.mark.parametrize(
    "change, says",
    [
        ({"messages": [{"role": "assistant", "content": "x", "tool_calls": [{"id": 1}]}]}, "tool_calls[0]"),
        ({"messages": [{"role": "assistant", "tool_calls": "lookup"}]}, "tool_calls must be a list"),
        ({"messages": [{"role": "user", "content": "hi", "tool_calls": []}]}, "only an assistant"),
        ({"tools": [{"type": "function"}]}, "tools[0]"),
        ({"tools": [7]}, "tools[0]"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "only text parts",
        ),
        ({"messages": [{"role": "user", "content": {"text": "hi"}}]}, "content parts"),
        ({"n": 2}, "n is not supported"),
        ({"logprobs": True}, "logprobs is not supported"),
        ({"response_format": {"type": "json_object"}}, "response_format is not supported"),
        ({"stream": "yes"}, "stream must be true or false"),
        ({"stop": 5}, "stop must be"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "at most 4"),
        ({"messages": [{"role": "tool", "content": "{}", "tool_call_id": 1}]}, "tool_call_id must be a"),
        ({"model": -1.5e173}, "model must be of type string"),  # found by schemathesis, as the next two
        (
            {"tools": [{"type": "function", "function": {"name": "f", "description": 3}}]},
            "tools[0].function.description must be of type string",
        ),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]},
            "tools[0].function.parameters must be of type object",
        ),
    ],
)
def test_malformed_and_unsupported_fields_get_a_400_that_says_so(server, change, says):
    _, url = server
    response = post(url, {"model": "bundled", "messages": user("hi")} | change)
    assert response.status_code == 400, response.text
    assert says in response.json()["error"]["message"]


def test_deeply_nested_json_and_huge_bodies_are_refused_at_once(server):
    _, url = server
    nested = b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert post(url, raw=nested).status_code == 400
    started = time.monotonic()
    huge = post(url, raw=b'{"messages": [{"role": "user", "content": "' + b"a" * (64 << 20) + b'"}]}')
    assert huge.status_code == 413 and "bytes" in huge.json()["error"]["message"]
    # a long prompt under the body limit is refused before it is tokenized whole
    long = post(url, {"model": "bundled", "messages": user("order four two one seven " * 40000)})
    assert long.status_code == 400 and "limit" in long.json()["error"]["message"]
    assert time.monotonic() - started < 10
    fine = client(url).chat.completions.create(model="bundled", messages=user("hi"), max_tokens=16)
    assert fine.choices[0].message.content  # and the next ordinary request is served


def test_text_content_parts_are_read_as_the_text(server):
    _, url = server
    parts = [
        {"role": "system", "content": [{"type": "text", "text": SYSTEM_PROMPT}]},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what are your "},
                {"type": "text", "text": "opening hours"},
            ],
        },
    ]
    with_parts = post(url, {"model": "bundled", "messages": parts, "max_tokens": 64}).json()
    plain = post(url, {"model": "bundled", "messages": user("what are your opening hours"), "max_tokens": 64})
    assert with_parts["choices"][0]["message"] == plain.json()["choices"][0]["message"]


def test_stop_sequences_end_the_answer_before_them(server):
    _, url = server
    c = client(url)
    full = c.chat.completions.create(
        model="bundled", messages=user("what are your opening hours"), max_tokens=64
    ).choices[0]
    text = full.message.content
    word = "morning"
    assert word in text
    cut = c.chat.completions.create(
        model="bundled",
        messages=user("what are your opening hours"),
        max_tokens=64,
        stop=[" in the " + word, "zzz"],
    ).choices[0]
    assert cut.message.content == text[: text.index(" in the " + word)] and cut.finish_reason == "stop"
    pieces = [
        ch.choices[0].delta.content or ""
        for ch in c.chat.completions.create(
            model="bundled",
            messages=user("what are your opening hours"),
            max_tokens=64,
            stream=True,
            stop=" in the " + word,
        )
        if ch.choices
    ]
    assert "".join(pieces) == cut.message.content
    unmet = c.chat.completions.create(
        model="bundled", messages=user("what are your opening hours"), max_tokens=64, stop="qqq"
    )
    assert unmet.choices[0].message.content == text


def test_openapi_json_says_what_the_chat_endpoint_takes_and_answers(server):
    _, url = server
    spec = httpx.get(url.removesuffix("/v1") + "/openapi.json", timeout=10).json()
    chat = spec["paths"]["/v1/chat/completions"]["post"]
    body = chat["requestBody"]["content"]["application/json"]["schema"]
    assert body["required"] == ["messages"] and {"stream", "stop", "steps", "threshold"} <= set(
        body["properties"]
    )
    assert {"200", "400", "401", "413", "429"} <= set(chat["responses"])
    assert set(chat["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
    assert "text/plain" in spec["paths"]["/metrics"]["get"]["responses"]["200"]["content"]


def test_bfloat16_is_called_slow_where_the_hardware_does_not_compute_in_it():
    """`ttfat serve --dtype bfloat16` warns on such a CPU (emulated: a reply 2.3x slower on an EPYC)."""
    assert (slow_dtype("cpu", "bfloat16") is None) == cpu_computes_in_bf16()
    assert slow_dtype("cpu", "float32") is None and slow_dtype("cpu", None) is None
