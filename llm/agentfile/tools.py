"""An agent file's tools as the agent loop sees them (`llm.agent.Tools`): the schemas the model gets,
and each call run by its backend in a worker thread, bounded by the tool's timeout. Whatever goes wrong
(arguments that do not fit the tool's schema, a backend that raises, times out or returns something JSON
cannot carry) comes back as ``{"error": ...}``, and the turn record shows it with the call's time."""

from __future__ import annotations

import asyncio
import json

from llm.arguments import arguments_problem
from llm.chat import ToolCall


class FileTools:
    def __init__(self, tools: list):  # list[ToolSpec]
        self.by_name = {t.name: t for t in tools}
        self.schemas = [t.schema for t in tools]

    async def run(self, call: ToolCall, messages: list[dict]) -> dict:
        tool = self.by_name.get(call.name)
        if tool is None:
            return {"error": f"unknown tool: {call.name}"}
        if problem := arguments_problem(call.arguments, tool.schema["function"].get("parameters", {})):
            return {"error": problem}
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
        try:  # asyncio.timeout, not wait_for: on Python 3.11 that can lose the turn's cancel (a barge-in)
            async with asyncio.timeout(tool.timeout_s):
                result = await asyncio.to_thread(tool.backend, arguments, messages)
        except TimeoutError:
            return {"error": f"{call.name} timed out after {tool.timeout_s:g} s"}
        except Exception as e:  # noqa: BLE001 - a tool must never crash the turn
            return {"error": f"{call.name} failed: {type(e).__name__}: {e}"}
        if not isinstance(result, dict):
            result = {"result": result}
        try:
            json.dumps(result)
        except (TypeError, ValueError) as e:
            return {"error": f"{call.name} returned what JSON cannot carry: {e}"}
        return result
