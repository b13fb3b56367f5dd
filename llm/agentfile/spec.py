"""The agent file's schema, and its reading: every mistake is one line naming the file and the key,
raised before any audio is processed.

```toml
name = "rooms"                       # names the agent in run records and reports
model = "my-model"                   # the model name sent (--llm-model overrides; default: the
                                     # endpoint's first)
system_prompt = "You book rooms."    # or system_prompt_file = "prompt.txt", relative to this file,
                                     # or system_prompt_from = "module:ATTRIBUTE"
greeting = "Hi, rooms desk."         # optional
fillers = ["One moment."]            # phrases said before a tool call, not answers (or fillers_from)
caller_words = "module:function"     # optional: rewrites the caller's words before the model sees them
numbers_whole = "module:function"    # optional: whether a transcript's numbers are whole as the agent
                                     # needs them (an order number of its length): the ASR then keeps
                                     # its fitted window's words, or a whole one of its 10 likeliest
                                     # readings, before it hears them again in a 30 s window
max_tool_rounds = 2
on_bad_arguments = { find_room = "Sorry, which room was it?" }  # optional: what the caller hears when
                                     # the model's call has arguments that do not fit the tool's schema
                                     # (or on_bad_arguments_from; a tool not named: the model is told)
tools_file = "tools.json"            # optional: OpenAI function schemas as a JSON list

[decoding]                           # decoding knobs sent with every request (e.g. threshold = 0.9):
                                     # those of llm/knobs.py, named as there (gen_length, not max_tokens)

[tools.find_room]                    # one table per tool: its schema (unless in tools_file) and backend
description = "Find a meeting room by name."
parameters = { type = "object", properties = { room = { type = "string" } }, required = ["room"] }
sqlite = "rooms.sqlite"              # or python = "module:function", or fixture = "rooms.json"
query = "SELECT name, floor FROM rooms WHERE name = :room COLLATE NOCASE"
timeout_s = 2.0
```
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llm.agent import Agent
from llm.agentfile.backends import Backend, FixtureBackend, PythonBackend, SqliteBackend, resolve
from llm.agentfile.tools import FileTools
from llm.chat import ChatBackend
from llm.knobs import REQUEST_KNOBS

BUNDLED_AGENT = Path(__file__).resolve().parents[1] / "support" / "agent.toml"

TOP_KEYS = {
    "name", "model", "system_prompt", "system_prompt_file", "system_prompt_from", "greeting", "fillers",
    "fillers_from", "caller_words", "numbers_whole", "max_tool_rounds", "on_bad_arguments",
    "on_bad_arguments_from", "tools_file", "decoding", "tools",
}  # fmt: skip
TOOL_KEYS = {"description", "parameters", "timeout_s", "python", "sqlite", "query", "fixture"}
BACKENDS = ("python", "sqlite", "fixture")
DEFAULT_TIMEOUT_S = 5.0


class AgentFileError(ValueError):
    """A mistake in an agent file: the message names the file and the key."""


@dataclass
class ToolSpec:
    name: str
    schema: dict  # the OpenAI function schema the model gets
    backend: Backend
    kind: str  # python | sqlite | fixture
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass
class AgentSpec:
    path: Path
    name: str
    system_prompt: str
    tools: list[ToolSpec]
    model: str | None = None
    greeting: str | None = None
    fillers: tuple[str, ...] = ()
    caller_words: Callable[[str], str] | None = None
    numbers_whole: Callable[[str], bool] | None = None  # the ASR's (asr/whisper.py: Transcriber)
    decoding: dict = field(default_factory=dict)  # knob values by name (llm/knobs.py)
    max_tool_rounds: int = 2
    on_bad_arguments: dict[str, str] = field(default_factory=dict)

    def agent(self, llm: ChatBackend) -> Agent:
        """The agent loop over ``llm`` with this file's prompt, tools, fillers and words."""
        return Agent(
            llm,
            FileTools(self.tools),
            self.system_prompt,
            fillers=self.fillers,
            words=self.caller_words,
            max_tool_rounds=self.max_tool_rounds,
            greeting=self.greeting,
            on_bad_arguments=self.on_bad_arguments,
        )

    def describe(self) -> dict:
        """What a run's environment block says about the agent."""
        return {
            "file": str(self.path),
            "name": self.name,
            "tools": {t.name: t.kind for t in self.tools},
        }


def load_agent_file(path: str | Path = BUNDLED_AGENT) -> AgentSpec:
    """Read and check an agent file; an `AgentFileError` names what is wrong."""
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise AgentFileError(f"{path}: no such agent file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise AgentFileError(f"{path}: not a readable TOML file ({e})") from None
    base = path.resolve().parent

    def fail(key: str, message: str) -> AgentFileError:
        return AgentFileError(f"{path}: {key}: {message}")

    def ref(key: str) -> object:
        try:
            return resolve(raw[key], base)
        except (ValueError, TypeError) as e:
            raise fail(key, str(e)) from None

    def text(key: str) -> str | None:
        value = raw.get(key)
        if value is not None and not isinstance(value, str):
            raise fail(key, "must be a string")
        return value

    if unknown := sorted(set(raw) - TOP_KEYS):
        raise fail(unknown[0], f"unknown key (known: {', '.join(sorted(TOP_KEYS))})")

    prompts = [k for k in ("system_prompt", "system_prompt_file", "system_prompt_from") if k in raw]
    if len(prompts) != 1:
        raise fail(
            "system_prompt", "give exactly one of system_prompt, system_prompt_file, system_prompt_from"
        )
    if "system_prompt" in raw:
        prompt = text("system_prompt")
    elif "system_prompt_file" in raw:
        try:
            prompt = (base / text("system_prompt_file")).read_text()
        except OSError as e:
            raise fail("system_prompt_file", f"cannot read it ({e.strerror or e})") from None
    else:
        prompt = ref("system_prompt_from")
    if not isinstance(prompt, str) or not prompt.strip():
        raise fail(prompts[0], "the system prompt is empty or not text")

    if "fillers" in raw and "fillers_from" in raw:
        raise fail("fillers", "give fillers or fillers_from, not both")
    fillers = ref("fillers_from") if "fillers_from" in raw else raw.get("fillers", [])
    fillers = list(fillers.values()) if isinstance(fillers, dict) else fillers
    if not isinstance(fillers, list) or not all(isinstance(f, str) for f in fillers):
        raise fail("fillers", "must be a list of phrases")

    words, whole = (ref(key) if key in raw else None for key in ("caller_words", "numbers_whole"))
    for key, value in (("caller_words", words), ("numbers_whole", whole)):
        if value is not None and not callable(value):
            raise fail(key, "is not callable")
    decoding = raw.get("decoding", {})
    if not isinstance(decoding, dict):
        raise fail("decoding", "must be a table of decoding knobs")
    knobs = {knob.name: knob for knob in REQUEST_KNOBS}
    for key, value in decoding.items():
        if key not in knobs:
            raise fail(f"decoding.{key}", f"unknown knob (known: {', '.join(knobs)})")
        if problem := knobs[key].problem(value):
            raise fail(f"decoding.{key}", problem)
    rounds = raw.get("max_tool_rounds", 2)
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 0:
        raise fail("max_tool_rounds", "must be a whole number >= 0")

    schemas: dict[str, dict] = {}
    if "tools_file" in raw:
        try:
            listed = json.loads((base / text("tools_file")).read_text())
            schemas = {s["function"]["name"]: s for s in listed}
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as e:
            raise fail("tools_file", f"not a JSON list of OpenAI function schemas ({e})") from None
    tables = raw.get("tools", {})
    if not isinstance(tables, dict):
        raise fail("tools", "must be tables, one per tool: [tools.NAME]")
    if extra := sorted(set(schemas) - set(tables)):
        raise fail("tools_file", f"tool {extra[0]!r} has no backend: add a [tools.{extra[0]}] table")
    tools = [_tool(name, table, schemas.get(name), base, fail) for name, table in tables.items()]

    if "on_bad_arguments" in raw and "on_bad_arguments_from" in raw:
        raise fail("on_bad_arguments", "give on_bad_arguments or on_bad_arguments_from, not both")
    from_ = "on_bad_arguments_from" in raw
    repeat = ref("on_bad_arguments_from") if from_ else raw.get("on_bad_arguments", {})
    if not isinstance(repeat, dict) or not all(isinstance(p, str) and p.strip() for p in repeat.values()):
        raise fail("on_bad_arguments", "must be a table of tool = phrase")
    if unknown := sorted(set(repeat) - set(tables)):
        raise fail("on_bad_arguments", f"{unknown[0]!r} is not one of the tools")

    return AgentSpec(
        path=path,
        name=text("name") or path.stem,
        system_prompt=prompt,
        tools=tools,
        model=text("model"),
        greeting=text("greeting"),
        fillers=tuple(fillers),
        caller_words=words,
        numbers_whole=whole,
        decoding=decoding,
        max_tool_rounds=rounds,
        on_bad_arguments=dict(repeat),
    )


def _tool(name: str, table: object, schema: dict | None, base: Path, fail) -> ToolSpec:
    key = f"tools.{name}"
    if not isinstance(table, dict):
        raise fail(key, "must be a table")
    if unknown := sorted(set(table) - TOOL_KEYS):
        raise fail(f"{key}.{unknown[0]}", f"unknown key (known: {', '.join(sorted(TOOL_KEYS))})")
    if schema is None:
        if not isinstance(table.get("description"), str):
            raise fail(f"{key}.description", "missing (or give the schema in tools_file)")
        parameters = table.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, dict) or parameters.get("type") != "object":
            raise fail(f"{key}.parameters", 'must be a JSON schema with type = "object"')
        function = {"name": name, "description": table["description"], "parameters": parameters}
        schema = {"type": "function", "function": function}
    kinds = [k for k in BACKENDS if k in table]
    if len(kinds) != 1:
        raise fail(key, f"give exactly one backend: {', '.join(BACKENDS)}")
    kind = kinds[0]
    if not isinstance(table[kind], str):
        raise fail(f"{key}.{kind}", "must be a string")
    if "query" in table and kind != "sqlite":
        raise fail(f"{key}.query", "only a sqlite backend has a query")
    timeout = table.get("timeout_s", DEFAULT_TIMEOUT_S)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise fail(f"{key}.timeout_s", "must be a number of seconds > 0")
    if kind == "sqlite" and not isinstance(table.get("query"), str):
        raise fail(f"{key}.query", "a sqlite backend needs its query")
    properties = set(schema["function"].get("parameters", {}).get("properties", {}))
    try:
        if kind == "python":
            backend = PythonBackend(table["python"], base)
        elif kind == "sqlite":
            backend = SqliteBackend(base / table["sqlite"], table["query"], properties)
        else:
            backend = FixtureBackend(base / table["fixture"])
    except ValueError as e:
        raise fail(f"{key}.{kind}", str(e)) from None
    return ToolSpec(name, schema, backend, kind, float(timeout))
