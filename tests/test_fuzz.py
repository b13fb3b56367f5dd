"""Property-based fuzzing (issue 22) of the three places that take outside input: the HTTP API (any JSON
body: never a 5xx, every 4xx an OpenAI-style error, and the server still answers afterwards), the audio
loader and turn detector (any bytes, rates, channel counts, lengths, NaN/inf/clipped samples: a result
or a one-line AudioError, never an escaping exception or a hang), and the agent's handling of tool-call
arguments the model gets wrong (never raises, the raw arguments are kept with the error, and the caller
hears the request to repeat at once).

Fixed seeds in CI (tests/conftest.py); `HYPOTHESIS_PROFILE=fuzz pytest -m fuzz tests/test_fuzz.py` runs
them for long with random ones."""

from __future__ import annotations

import asyncio
import io
import json
import struct

import httpx
import numpy as np
import pytest
import schemathesis
import soundfile as sf
from hypothesis import given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from llm.knobs import REQUEST_KNOBS
from llm.serving.process import LocalServer
from llm.serving.requests import Limits
from llm.support.models import BUNDLED
from llm.support.policy import SYSTEM_PROMPT
from tests.faults import WrongArguments
from voice.pipeline.audio import AudioError, load_audio
from voice.pipeline.settings import VadConfig
from voice.pipeline.turns import TurnDetector

pytestmark = pytest.mark.fuzz

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
ROLE = st.sampled_from(["system", "user", "assistant", "tool", "wizard", "", None, 3])
MESSAGE = st.fixed_dictionaries(
    {"role": ROLE},
    optional={"content": JSON | st.text(max_size=40), "tool_calls": JSON, "tool_call_id": JSON, "name": JSON},
)
FIELDS = [
    "stream",
    "stop",
    "n",
    "tools",
    "logprobs",
    "response_format",
    "max_completion_tokens",
    *(knob.field for knob in REQUEST_KNOBS),
]
BODY = st.fixed_dictionaries(
    {"messages": st.lists(MESSAGE, max_size=4) | JSON},
    optional={name: JSON for name in FIELDS} | {"model": st.text(max_size=10)},
)


@pytest.fixture(scope="module")
def server():
    local = LocalServer(BUNDLED["bundled"], "bundled", limits=Limits(max_tokens=16))
    with local as url:
        yield url


def quick(body):
    """A body with a short answer when it asks for none: the valid ones stay quick."""
    if isinstance(body, dict) and body.get("max_tokens") is None:
        return {**body, "max_tokens": 8}
    return body


@settings(max_examples=300)
@given(body=BODY | JSON)
def test_the_api_never_answers_5xx_and_every_4xx_says_why(server, body):
    r = httpx.post(server + "/chat/completions", json=quick(body), timeout=60)
    assert r.status_code < 500, (body, r.text)
    if r.status_code >= 400:
        assert isinstance(r.json()["error"]["message"], str)
    elif isinstance(body, dict) and body.get("stream") is True:
        assert r.text.rstrip().endswith("data: [DONE]") or '"error"' in r.text


@pytest.fixture(scope="module")
def api_schema(server):
    """The server's own /openapi.json, as it serves it."""
    return schemathesis.openapi.from_url(server.removesuffix("/v1") + "/openapi.json")


@settings(max_examples=300)
@given(data=st.data())
def test_the_api_keeps_to_its_openapi_schema(api_schema, data):
    """schemathesis: for every operation in /openapi.json, requests that keep to the schema and requests
    that break it (which must be refused with a 4xx); every answer in its declared status, media type and
    shape, never a 5xx, and every refusal an OpenAI-style error. (Its pytest plugin does not run on
    pytest 9, so its strategies are drawn here.)"""
    operations = [result.ok() for result in api_schema.get_all_operations()]
    operation = data.draw(st.sampled_from(operations), label="operation")
    mode = data.draw(st.sampled_from(list(GenerationMode)), label="mode")
    case = data.draw(operation.as_strategy(generation_mode=mode), label="case")
    if operation.method.upper() == "POST":
        case.body = quick(case.body)
    # a request the schema allows may still be refused: what JSON Schema cannot say (steps a multiple of
    # the blocks, a prompt within the token limit, tool_calls on an assistant message only) gets a 400
    response = case.call_and_validate(timeout=60, excluded_checks=[positive_data_acceptance])
    if response.status_code >= 400:
        assert isinstance(response.json()["error"]["message"], str)


def test_the_server_still_answers_after_the_fuzzing(server):
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "hi"}]
    r = httpx.post(server + "/chat/completions", json={"messages": messages, "max_tokens": 16}, timeout=60)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"]


def wav_bytes(rate: int, channels: int, bits: int, payload: bytes, declared: int | None = None) -> bytes:
    """A RIFF/WAVE file with whatever header values it is given."""
    block = channels * bits // 8
    data = declared if declared is not None else len(payload)
    fmt = struct.pack("<HHIIHH", 1, channels, rate, (rate * block) % 2**32, block, bits)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(payload))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", data % 2**32)
        + payload
    )


@settings(max_examples=200)
@given(
    rate=st.sampled_from([0, 1, 8000, 16000, 44100, 192000, 2**31 - 1]),
    channels=st.integers(0, 9),
    bits=st.sampled_from([0, 8, 16, 24, 32, 13]),
    payload=st.binary(max_size=4096),
    declared=st.none() | st.integers(0, 2**32),
    suffix=st.sampled_from([".wav", ".flac", ".mp3", ".ogg"]),
)
def test_any_file_is_audio_or_one_clear_error(
    tmp_path_factory, rate, channels, bits, payload, declared, suffix
):
    path = tmp_path_factory.mktemp("f") / f"x{suffix}"
    path.write_bytes(wav_bytes(rate, channels, bits, payload, declared) if suffix == ".wav" else payload)
    try:
        audio = load_audio(path)
    except AudioError as e:
        assert "\n" not in str(e) and str(path) in str(e)
        return
    assert audio.samples.dtype == np.float32 and np.all(np.isfinite(audio.samples))


@settings(max_examples=100)
@given(
    samples=st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), min_size=0, max_size=3000),
    rate=st.sampled_from([8000, 16000, 22050, 48000]),
    channels=st.integers(1, 3),
)
def test_any_samples_written_as_float_are_read_or_refused(tmp_path_factory, samples, rate, channels):
    data = np.array(samples, np.float32)
    data = np.repeat(data[:, None], channels, axis=1) if channels > 1 else data
    buf = io.BytesIO()
    sf.write(buf, data, rate, format="WAV", subtype="FLOAT")
    path = tmp_path_factory.mktemp("s") / "x.wav"
    path.write_bytes(buf.getvalue())
    try:
        audio = load_audio(path)
    except AudioError as e:
        assert "\n" not in str(e)
        return
    assert np.all(np.isfinite(audio.samples))


@settings(max_examples=100)
@given(
    frames=st.lists(
        st.lists(
            st.floats(-4, 4, width=32) | st.sampled_from([np.nan, np.inf, -np.inf]),
            min_size=480,
            max_size=480,
        ),
        max_size=60,
    )
)
def test_the_turn_detector_takes_any_frames(frames):
    detector = TurnDetector(16000, VadConfig())
    with np.errstate(all="ignore"):
        for frame in frames:
            detector.push(np.array(frame, np.float32))
        detector.flush()


@pytest.fixture(scope="module")
def engine():
    from llm.engine.async_engine import AsyncEngine
    from llm.engine.engine import Engine

    e = AsyncEngine(Engine(BUNDLED["bundled"], device="cpu"))
    yield e
    e.close()


def not_an_object(text: str) -> bool:
    try:
        return not isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return True


KEY = {"check_stock": "product", "lookup_order": "order_id"}
NOT_TEXT = JSON.filter(lambda v: not isinstance(v, str) and (not isinstance(v, int) or isinstance(v, bool)))


def malformed(tool: str) -> st.SearchStrategy[str]:
    """Arguments a model gets wrong: not JSON, cut off, not an object, the field missing or not text."""
    return st.one_of(
        st.text(max_size=40).filter(not_an_object),
        st.builds(lambda s: '{"' + KEY[tool] + '": "' + s, st.text(max_size=20)),  # cut off
        JSON.filter(lambda v: not isinstance(v, dict)).map(json.dumps),
        st.dictionaries(st.text(max_size=8).filter(lambda k: k != KEY[tool]), JSON, max_size=3).map(
            json.dumps
        ),
        NOT_TEXT.map(lambda v: json.dumps({KEY[tool]: v})),
    )


@settings(max_examples=40)
@given(data=st.data(), tool=st.sampled_from(sorted(KEY)))
def test_wrong_tool_arguments_never_escape_the_agent(engine, data, tool):
    from llm.serving.engine_chat import EngineChat
    from llm.support.policy import BAD_ARGUMENTS
    from llm.support.tools import store_agent

    arguments = data.draw(malformed(tool))
    agent = store_agent(WrongArguments(EngineChat(engine), tool, arguments))
    said = {"check_stock": "do you have the yoga mat in stock", "lookup_order": "where is my order 4217"}
    result = asyncio.run(agent.turn(said[tool]))
    record = result.to_dict()["tool_calls"][0]
    assert record["arguments"] == arguments and record["name"] == tool  # kept raw
    assert record["error"], record
    # the caller hears the request to repeat at once, from the agent: no model asked about its mistake
    assert result.answer == BAD_ARGUMENTS[tool] and result.answered_by == "agent" and len(result.calls) == 1
    assert result.first_answer_token_ns is not None


@pytest.mark.parametrize(
    "arguments, problem",
    [
        ('{"order_id": "4217"}', None),
        ('{"order_id": 4217}', None),  # an id without quotes is still read
        ("", "missing argument 'order_id'"),
        ('{"order_id": "42', "arguments are not valid JSON"),
        ('["4217"]', "arguments must be a JSON object"),
        ('{"rder_ido": "4217"}', "missing argument 'order_id'"),
        ('{"order_id": true}', "order_id must be of type string"),
        ('{"order_id": 42.17}', "order_id must be of type string"),
        ('{"order_id": null}', "order_id must be of type string"),
    ],
)
def test_arguments_are_checked_against_the_tool_schema(arguments, problem):
    from llm.arguments import arguments_problem

    parameters = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    assert arguments_problem(arguments, parameters) == problem


def test_without_a_phrase_for_the_tool_the_model_is_told_and_asked_again(engine):
    from llm.agentfile import load_agent_file
    from llm.serving.engine_chat import EngineChat

    spec = load_agent_file()
    spec.on_bad_arguments = {}  # as a user's agent file without on_bad_arguments
    events = []
    agent = spec.agent(WrongArguments(EngineChat(engine), "lookup_order", '{"order_id": "42'))
    result = asyncio.run(agent.turn("where is my order 4217", on_event=events.append))
    assert result.tool_calls[0].result == {"error": "arguments are not valid JSON"}
    assert result.answered_by == "llm" and len(result.calls) == 2 and result.answer
    assert [e.round for e in events if e.name == "answer"] == [1]
