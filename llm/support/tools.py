"""The store's tools, as the bundled agent file (`llm/support/agent.toml`) names them, and the bundled
support agent built from that file: the same code path as any user's agent file. This is the voice
pipeline's only way into the store domain."""

from __future__ import annotations

import functools

from llm.agent import Agent
from llm.agentfile import BUNDLED_AGENT, load_agent_file
from llm.chat import ChatBackend
from llm.support.search import order_id_of
from llm.support.spoken import parse_order_id
from llm.support.store import Store


@functools.cache
def store() -> Store:
    return Store()


def lookup_order(arguments: dict, messages: list[dict]) -> dict:
    """An order by its number. A number the caller never said is not looked up (a small model can
    invent one, and must not read out a stranger's order): it comes back as not found, so the model
    asks the caller to repeat the number."""
    wanted = arguments.get("order_id")
    oid = order_id_of(str(wanted)) if isinstance(wanted, str | int) and not isinstance(wanted, bool) else None
    said = {parse_order_id(m["content"]) for m in messages if m["role"] == "user" and m.get("content")}
    if oid is not None and oid not in said:
        return {"found": False, "order_id": oid}
    return store().execute("lookup_order", arguments)


def check_stock(arguments: dict) -> dict:
    """A product's stock, price and restock date, found the way a shop's search finds it."""
    return store().execute("check_stock", arguments)


def store_agent(llm: ChatBackend) -> Agent:
    """The bundled agent of the Northwind store line, over any LLM backend."""
    return load_agent_file(BUNDLED_AGENT).agent(llm)
