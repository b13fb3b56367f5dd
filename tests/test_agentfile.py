"""Agent files (issue 21): anyone's agent measured without code. A second agent, with its own prompt and
a SQLite tool over its own database, replays a recording end to end through `ttfat replay` against the
bundled server; the bundled agent is itself a file; bad files fail in one line before any audio; tool
backends that fail reach the model as errors with their time; endpoints that stream differently from
OpenAI, or reject tools, are handled; A/B runs alternate calls; manifests fit any agent."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fastapi import Request  # at module level: the endpoint below is annotated with it

from llm.agentfile import BUNDLED_AGENT, AgentFileError, load_agent_file
from llm.agentfile.tools import FileTools
from llm.chat import ToolCall
from llm.serving.client import EndpointError, OpenAIChat, check_endpoint
from llm.serving.process import free_port
from llm.support.datafiles import load
from llm.support.policy import FILLERS, SYSTEM_PROMPT, TOOL_ERROR_ANSWERS
from llm.support.spoken import caller_words, holds_order_id

ROOT = Path(__file__).resolve().parents[1]
CALL = ROOT / "recordings" / "call02.flac"  # "do you have the robot vacuum", "is the printer paper in stock"
ROWS = [("robot vacuum", "B7", 3), ("printer paper", "A2", 120)]
# The bundled model knows the store's prompt and tool names; this agent keeps their shape (so it calls
# check_stock at all) with its own words, its own tool schema and its own database.
WAREHOUSE = '''
name = "warehouse"
system_prompt = """You are the phone agent of Eastside Outlet, an online store. Speak one or two short \\
sentences. Hours: Monday to Saturday, eight in the morning to eight at night. Shipping: free over fifty \\
dollars, otherwise five dollars and ninety nine cents. Returns: thirty days after delivery, refund to your \\
card in five business days. For a person, ask for an agent."""
fillers = ["Let me check that for you."]
caller_words = "llm.support.spoken:caller_words"

[tools.check_stock]
description = "Which shelf of the warehouse an item is on and how many are left."
parameters = { type = "object", properties = { product = { type = "string" } }, required = ["product"] }
sqlite = "warehouse.sqlite"
query = "SELECT name, shelf, count FROM items WHERE name = :product COLLATE NOCASE"
timeout_s = 2.0
'''


def warehouse(folder: Path, text: str = WAREHOUSE) -> Path:
    con = sqlite3.connect(folder / "warehouse.sqlite")
    con.execute("CREATE TABLE items (name TEXT PRIMARY KEY, shelf TEXT, count INTEGER)")
    con.executemany("INSERT INTO items VALUES (?, ?, ?)", ROWS)
    con.commit()
    con.close()
    (folder / "warehouse.toml").write_text(text)
    return folder / "warehouse.toml"


def ttfat(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ttfat", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "turns.jsonl").read_text().splitlines()]


def test_a_second_agent_file_replays_a_recording_end_to_end(tmp_path):
    agent = warehouse(tmp_path)
    done = ttfat("replay", str(CALL), "--agent", str(agent), "--mode", "fast", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-2000:]
    turns = records(tmp_path / "run")
    stock = [t for t in turns if t["tool_calls"]]
    assert len(stock) >= 2, [(t["transcript"], t["answer"]) for t in turns]
    rows = {name: {"name": name, "shelf": shelf, "count": count} for name, shelf, count in ROWS}
    for turn in stock:
        [call] = turn["tool_calls"]
        product = json.loads(call["arguments"])["product"]  # what the model wrote
        assert call["name"] == "check_stock" and call["error"] is None
        assert call["result"] == {"found": True, "rows": [rows[product]]}  # the backend ran its query
        assert len(turn["llm_calls"]) == 2  # and its rows went back to the model for the answer
        for llm in turn["llm_calls"]:  # each LLM call names its endpoint and model
            assert llm["model"] == "bundled" and llm["endpoint"].startswith("http://127.0.0.1:")
    env = json.loads((tmp_path / "run" / "summary.json").read_text())["environment"]
    assert env["agent"] == {"file": str(agent), "name": "warehouse", "tools": {"check_stock": "sqlite"}}
    assert env["llm"]["model"] == "bundled"


def test_a_voice_that_is_not_there_is_one_line_before_any_server_starts(tmp_path):
    done = ttfat(
        "replay", str(CALL), "--tts-voice", str(tmp_path / "mine.onnx"), "--out", str(tmp_path / "r")
    )
    assert (
        done.returncode == 2 and "mine.onnx" in done.stderr and "starting the LLM server" not in done.stderr
    )


def test_the_bundled_agent_is_an_agent_file_of_the_store_policy():
    spec = load_agent_file()
    assert spec.path == BUNDLED_AGENT and spec.name == "northwind"
    assert spec.system_prompt == SYSTEM_PROMPT and spec.fillers == tuple(FILLERS.values())
    assert spec.caller_words is caller_words and spec.numbers_whole is holds_order_id
    assert [t.schema for t in spec.tools] == load("tools.json")
    assert {t.name: t.kind for t in spec.tools} == {"lookup_order": "python", "check_stock": "python"}
    assert spec.on_bad_arguments == {tool: text for tool, (text, _) in TOOL_ERROR_ANSWERS.items()}


@pytest.mark.parametrize(
    "change, key",
    [
        (("system_prompt = ", "prompt = "), "prompt"),  # unknown key, and no prompt at all
        (('sqlite = "warehouse.sqlite"', 'postgres = "db"'), "tools.check_stock.postgres"),
        (('sqlite = "warehouse.sqlite"', 'sqlite = "missing.sqlite"'), "tools.check_stock.sqlite"),
        (("FROM items", "FROM shelves"), "tools.check_stock.sqlite"),  # SQL that fails
        (("= :product", "= :sku"), "tools.check_stock.sqlite"),  # binds what the schema lacks
        (
            (
                'sqlite = "warehouse.sqlite"\n'
                'query = "SELECT name, shelf, count FROM items WHERE name = :product COLLATE NOCASE"',
                'python = "no_such_module:check"',
            ),
            "tools.check_stock.python",
        ),
        (("timeout_s = 2.0", "timeout_s = -1"), "tools.check_stock.timeout_s"),
        (
            ('caller_words = "llm.support.spoken:caller_words"', 'caller_words = "llm.support.spoken:nope"'),
            "caller_words",
        ),
        (
            ('caller_words = "llm.support.spoken:caller_words"', 'numbers_whole = "llm.support.spoken:ONES"'),
            "numbers_whole",
        ),  # not callable
        (("fillers = [", 'on_bad_arguments = { shelf = "Which?" }\nfillers = ['), "on_bad_arguments"),
        (("fillers = [", "on_bad_arguments = { check_stock = 3 }\nfillers = ["), "on_bad_arguments"),
    ],
)
def test_a_bad_agent_file_is_one_line_naming_the_file_and_key(tmp_path, change, key):
    path = warehouse(tmp_path, WAREHOUSE.replace(*change))
    with pytest.raises(AgentFileError) as e:
        load_agent_file(path)
    message = str(e.value)
    assert message.startswith(f"{path}: {key}") and "\n" not in message, message


def test_a_bad_agent_file_stops_replay_before_any_audio(tmp_path):
    path = warehouse(tmp_path, WAREHOUSE.replace("FROM items", "FROM shelves"))
    started = time.monotonic()
    done = ttfat("replay", str(CALL), "--agent", str(path), "--out", str(tmp_path / "run"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]  # one line
    assert str(path) in done.stderr and "tools.check_stock.sqlite" in done.stderr
    assert "starting the LLM server" not in done.stderr and not (tmp_path / "run").exists()
    assert time.monotonic() - started < 30


def test_sqlite_arguments_are_bound_never_formatted(tmp_path):
    tools = FileTools(load_agent_file(warehouse(tmp_path)).tools)

    def run(product: str) -> dict:
        return asyncio.run(tools.run(ToolCall("check_stock", json.dumps({"product": product})), []))

    assert run("Robot Vacuum")["rows"] == [{"name": "robot vacuum", "shelf": "B7", "count": 3}]
    assert run("x' OR '1'='1") == {"found": False, "rows": []}
    assert run("robot vacuum'; DROP TABLE items; --") == {"found": False, "rows": []}
    assert run("printer paper")["found"]  # the table is still there
    assert asyncio.run(tools.run(ToolCall("check_stock", "{}"), []))["error"] == "missing argument 'product'"


def test_failing_backends_reach_the_model_as_tool_errors_with_their_time(tmp_path):
    """Real faults of a user's code: a backend that raises, hangs past its timeout, or returns what
    JSON cannot carry; through the agent loop and the bundled model in-process."""
    from llm.engine.async_engine import AsyncEngine
    from llm.engine.engine import Engine
    from llm.serving.engine_chat import EngineChat
    from llm.support.models import BUNDLED

    (tmp_path / "faulty.py").write_text(
        "import time\n"
        "def raises(arguments):\n    raise RuntimeError('the stock service is down')\n"
        "def hangs(arguments):\n    time.sleep(1.5)\n    return {'found': True}\n"
        "def odd(arguments):\n    return {'found': {1, 2}}\n"
    )
    engine = AsyncEngine(Engine(BUNDLED["bundled"], device="cpu"))
    try:
        for backend, error, slow in [
            ("raises", "check_stock failed: RuntimeError: the stock service is down", 0),
            ("hangs", "check_stock timed out after 0.3 s", 0.3),
            ("odd", "check_stock returned what JSON cannot carry", 0),
        ]:
            agent_file = WAREHOUSE.split("[tools.check_stock]")[0] + (
                "[tools.check_stock]\ndescription = 'stock'\n"
                "parameters = { type = 'object', properties = { product = { type = 'string' } } }\n"
                f"python = 'faulty:{backend}'\ntimeout_s = 0.3\n"
            )
            (tmp_path / f"{backend}.toml").write_text(agent_file)
            agent = load_agent_file(tmp_path / f"{backend}.toml").agent(EngineChat(engine))
            result = asyncio.run(agent.turn("do you have the robot vacuum in stock"))
            call = result.tool_calls[0]  # what the model does with the error is its own part
            record = result.to_dict()["tool_calls"][0]
            assert record["error"].startswith(error) and call.result == {"error": record["error"]}
            assert slow <= record["ms"] / 1000 < slow + 0.5, record
            assert len(result.calls) >= 2  # the model was asked again, with the error
    finally:
        engine.close()


def test_a_fixture_backend_answers_by_arguments(tmp_path):
    (tmp_path / "rooms.json").write_text(
        json.dumps(
            [
                {"arguments": {"room": "Blue"}, "result": {"free": True}},
                {"arguments": {"room": "red"}, "result": {"free": False}},
                {"result": {"free": None, "note": "no such room"}},
            ]
        )
    )
    (tmp_path / "rooms.toml").write_text(
        'system_prompt = "You book rooms."\n[tools.room]\ndescription = "A room\'s state."\n'
        'parameters = { type = "object", properties = { room = { type = "string" } } }\n'
        'fixture = "rooms.json"\n'
    )
    tools = FileTools(load_agent_file(tmp_path / "rooms.toml").tools)
    run = lambda args: asyncio.run(tools.run(ToolCall("room", json.dumps(args)), []))  # noqa: E731
    assert run({"room": " blue "}) == {"free": True} and run({"room": "RED"}) == {"free": False}
    assert run({"room": "green"}) == {"free": None, "note": "no such room"}
    assert asyncio.run(tools.run(ToolCall("room", "[1]"), [])) == {"error": "arguments must be a JSON object"}


# -- endpoints that are not quite OpenAI ---------------------------------------------------------------


def chunk(delta: dict, finish: str | None = None) -> str:
    body = {
        "id": "x",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "other",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n"


MOP = {"name": "check_stock", "arguments": '{"product": "mop"}'}
ORDER = {"name": "lookup_order", "arguments": '{"order_id": "1"}'}
STYLES = {
    # vLLM-style reasoning field, and a tool call whole in one delta with no index
    "whole": [
        chunk({"role": "assistant", "reasoning": "The caller wants stock."}),
        chunk({"content": "Let me check."}),
        chunk({"tool_calls": [{"id": "a", "type": "function", "function": MOP}]}),
        chunk({"tool_calls": [{"id": "b", "type": "function", "function": ORDER}]}),
        chunk({}, "tool_calls"),
    ],
    # pieces of one call with no index and the id only on the first
    "pieces": [
        chunk({"reasoning_content": "Stock."}),
        chunk({"tool_calls": [{"id": "a", "type": "function", "function": {"name": "check_stock"}}]}),
        chunk({"tool_calls": [{"function": {"arguments": '{"product": '}}]}),
        chunk({"tool_calls": [{"function": {"arguments": '"mop"}'}}]}),
        chunk({}, "tool_calls"),
    ],
}


@pytest.fixture(scope="module")
def other_endpoint():
    """A server speaking OpenAI's protocol the way some other servers do (a real HTTP server on a free
    port; nothing of ours could produce these formats or this refusal)."""
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI()

    @app.get("/{style}/v1/models")
    async def models(style: str):
        return {"object": "list", "data": [{"id": f"other-{style}", "object": "model"}]}

    @app.post("/{style}/v1/chat/completions")
    async def chat(style: str, request: Request):
        body = await request.json()
        if style == "notools" and body.get("tools"):
            return JSONResponse({"error": {"message": "tools are not supported by this model"}}, 400)
        if not body.get("stream"):
            return {
                "id": "x",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
                ],
            }
        return StreamingResponse(
            iter([*STYLES.get(style, STYLES["whole"]), "data: [DONE]\n\n"]), media_type="text/event-stream"
        )

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


async def deltas(url: str) -> list:
    return [d async for d in OpenAIChat(url, model="other").chat([{"role": "user", "content": "x"}], [])]


@pytest.mark.parametrize("style", ["whole", "pieces"])
def test_tool_calls_and_reasoning_as_other_endpoints_stream_them(other_endpoint, style):
    got = asyncio.run(deltas(f"{other_endpoint}/{style}/v1"))
    calls = [(d.tool_call.name, json.loads(d.tool_call.arguments)) for d in got if d.kind == "tool_call"]
    reasoning = "".join(d.text for d in got if d.kind == "reasoning")
    if style == "whole":
        assert calls == [("check_stock", {"product": "mop"}), ("lookup_order", {"order_id": "1"})]
        assert reasoning == "The caller wants stock."
    else:
        assert calls == [("check_stock", {"product": "mop"})] and reasoning == "Stock."
    assert got[-1].kind == "done" and got[-1].timings is None  # no server timings: none invented


def test_an_endpoint_that_rejects_tools_stops_the_run_at_the_start(other_endpoint, tmp_path):
    tools = [t.schema for t in load_agent_file().tools]
    assert check_endpoint(f"{other_endpoint}/whole/v1", None, tools, None) == "other-whole"
    with pytest.raises(EndpointError, match="rejects tool calls"):
        check_endpoint(f"{other_endpoint}/notools/v1", None, tools, None)
    done = ttfat(
        "replay", str(CALL), "--llm-url", f"{other_endpoint}/notools/v1", "--out", str(tmp_path / "r")
    )
    assert done.returncode == 2 and "rejects tool calls" in done.stderr and not (tmp_path / "r").exists()
    assert done.stderr.strip().count("\n") == 0
    unreachable = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EndpointError, match="no OpenAI-compatible endpoint answers"):
        check_endpoint(unreachable, None, tools, None)


# -- A/B and manifests ------------------------------------------------------------------------------


def test_ab_against_two_local_servers_alternates_calls_and_prints_the_comparison(tmp_path):
    other = ROOT / "recordings" / "call07.ogg"
    out = tmp_path / "ab"
    done = ttfat(
        "replay",
        str(CALL),
        str(other),
        "--mode",
        "fast",
        "--llm-model",
        "bundled",
        "--llm-model",
        "bundled-ar",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "B/A" in done.stdout and f"A = {out / 'bundled'}" in done.stdout
    first_event = {}
    for arm in ("bundled", "bundled-ar"):
        assert {t["call"] for t in records(out / arm)} == {"call02", "call07"}
        # every turn answered, but where the answer was only a stall: the AR twin says "Let me check that
        # product" to the dog bed's price and nothing more, which no caller hears as an answer
        stalled = "the answer held only filler"
        assert all(t["status"] == "ok" or t["error"] == stalled for t in records(out / arm))
        assert arm == "bundled-ar" or all(t["status"] == "ok" for t in records(out / arm))
        env = json.loads((out / arm / "summary.json").read_text())["environment"]
        assert env["llm"]["model"] == arm and env["ab"]["order per call"] == [
            ["bundled", "bundled-ar"],
            ["bundled-ar", "bundled"],
        ]
        for line in (out / arm / "events.jsonl").read_text().splitlines():
            event = json.loads(line)  # every arm's calls on the one monotonic clock of the process
            if event["event"] == "call_start":
                first_event[arm, event["call"]] = event["t_ns"]
    # what actually ran first: call02 on bundled, then on bundled-ar; call07 on bundled-ar first
    order = sorted(first_event, key=lambda k: first_event[k])
    assert order == [
        ("bundled", "call02"),
        ("bundled-ar", "call02"),
        ("bundled-ar", "call07"),
        ("bundled", "call07"),
    ], order


def test_manifest_skeleton_then_replay_scores_against_it(tmp_path):
    calls = tmp_path / "calls"
    calls.mkdir()
    (calls / "first.flac").symlink_to(CALL)
    (calls / "broken.wav").write_bytes(b"RIFF....WAVEfmt ")
    done = ttfat("manifest", str(calls))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in (calls / "manifest.jsonl").read_text().splitlines()]
    assert [line["call"] for line in lines] == ["broken", "first"]
    assert lines[0]["turns"] == [] and "error" in lines[0]  # recorded, not dropped
    reference = json.loads((ROOT / "recordings" / "manifest.jsonl").read_text().splitlines()[1])
    assert reference["call"] == "call02"
    found, want = lines[1]["turns"], reference["turns"]
    assert len(found) == len(want)
    for f, w in zip(found, want, strict=True):
        assert (
            abs(f["speech_start_s"] - w["speech_start_s"]) < 0.3
            and abs(f["speech_end_s"] - w["speech_end_s"]) < 0.3
        )
        assert f["expected_tools"] == [] and f["facts"] == [] and f["text"]
    again = ttfat("manifest", str(calls))
    assert again.returncode == 2 and "--force" in again.stderr  # never overwritten by surprise
    # filled in as a user would (tool name + the argument that matters, a fact as a pattern), replayed
    found[0].update(
        expected_tools=[{"name": "check_stock", "arguments": {"product": "robot vacuum"}}],
        facts=[{"regex": r"fifty[ -]nine"}],
    )
    found[1]["expected_tools"] = [{"name": "check_stock", "arguments": {"product": "Printer Paper"}}]
    lines[1]["turns"] = found
    (calls / "manifest.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    gate = ("--slo", "tool_call_accuracy>=1", "--slo", "answered>=1")  # the broken call was not answered
    done = ttfat("replay", str(calls), "--mode", "fast", "--out", str(tmp_path / "run"), *gate)
    assert done.returncode == 3, done.stderr[-2000:]
    assert "met     tool_call_accuracy>=1: 1" in done.stdout and "BROKEN  answered>=1: 0.8" in done.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["quality"]["turns_with_reference"] == 4 and summary["quality"]["tool_call_accuracy"] == 1.0
    assert summary["quality"]["fact_accuracy"] == 1.0 and summary["quality"]["turns_with_facts"] == 1
    assert [t["status"] for t in records(tmp_path / "run") if t["call"] == "broken"] == ["error"]


def test_the_example_agent_file_in_the_docs_works():
    spec = load_agent_file(ROOT / "llm" / "agentfile" / "example" / "rooms.toml")
    assert (spec.name, spec.model, spec.greeting, spec.decoding) == (
        "rooms",
        "my-model",
        "Rooms desk, how can I help?",
        {"threshold": 0.9},
    )
    tools = FileTools(spec.tools)
    run = lambda name, args: asyncio.run(tools.run(ToolCall(name, json.dumps(args)), []))  # noqa: E731
    assert run("room_status", {"room": "blue"}) == {"free": True, "floor": 2}
    assert run("book_room", {"room": "red", "minutes": 30}) == {"booked": True, "room": "Red", "minutes": 30}
    assert run("book_room", {"room": "red"}) == {"error": "missing argument 'minutes'"}  # before its code
    assert run("book_room", {"room": "red", "minutes": "half an hour"}) == {
        "error": "minutes must be of type integer"
    }
    assert spec.on_bad_arguments["room_status"] == "Sorry, which room was it?"


def test_the_bundled_agent_file_gives_the_records_of_the_agent_built_in_code(tmp_path):
    """The caller turns of two recorded calls, as the pipeline heard them, through the bundled agent file
    and through the agent as it was built in code before agent files: the same tool calls (arguments and
    results) and answers. The agents get the same transcripts, turn by turn: what the pipeline hears
    depends on timing (its speculative windows), what the agents make of it must not."""
    from asr.whisper import Transcriber
    from llm.agent import Agent
    from llm.serving.process import ServerProcess
    from llm.support.models import BUNDLED
    from llm.support.spoken import parse_order_id
    from llm.support.store import order_id_argument
    from llm.support.tools import store, store_agent
    from tts.piper import Synthesizer
    from voice.pipeline.settings import Settings
    from voice.pipeline.stages import Stages
    from voice.runs.replay import find_calls, run

    class CodeTools:  # the bundled agent's tools as code, before agent files
        schemas = load("tools.json")

        async def run(self, call: ToolCall, messages: list[dict]) -> dict:
            if call.name == "lookup_order":
                wanted = order_id_argument(call.arguments)
                said = {
                    parse_order_id(m["content"]) for m in messages if m["role"] == "user" and m.get("content")
                }
                if wanted not in said:
                    return {"found": False, "order_id": wanted}
            return store().execute(call.name, call.arguments)

    calls = [c for c in find_calls([str(ROOT / "recordings")]) if c.name in ("call01", "call02")]
    transcriber, synthesizer = Transcriber(window="auto"), Synthesizer(noise_scale=0, noise_w_scale=0)

    async def converse(agent: Agent, said: list[str]) -> list[tuple]:
        history, out = [], []
        for text in said:
            result = await agent.turn(text, history)
            history += [{"role": "user", "content": text}, {"role": "assistant", "content": result.answer}]
            out.append((text, result.answer, [(c.name, c.arguments, c.result) for c in result.tool_calls]))
        return out

    async def both(url: str) -> tuple[dict, dict]:  # one event loop: the client's connections live in it
        chat = OpenAIChat(url, model="bundled")
        stages = Stages(transcriber, store_agent(chat), synthesizer)
        await run(calls, stages, Settings("fast"), tmp_path, 1, {})
        heard: dict[str, list[str]] = {}
        for t in sorted(records(tmp_path), key=lambda t: (t["call"], t["turn"])):
            heard.setdefault(t["call"], []).extend([t["transcript"]] if t["transcript"] else [])
        code = Agent(chat, CodeTools(), SYSTEM_PROMPT, fillers=tuple(FILLERS.values()), words=caller_words)
        agents = {"file": store_agent(chat), "code": code}
        return heard, {k: [await converse(a, said) for said in heard.values()] for k, a in agents.items()}

    with ServerProcess(BUNDLED["bundled"], "bundled") as url:
        heard, seen = asyncio.run(both(url))
    assert seen["file"] == seen["code"]
    turns = [turn for call in seen["file"] for turn in call]
    assert len(heard) == 2 and len(turns) >= 7 and any(tools for *_, tools in turns)
