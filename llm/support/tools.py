"""The store's tools as the agent sees them, and the bundled support agent: the system prompt, fillers
and tools of the store policy, with the caller's words in the form the bundled models were trained on.
This is the voice pipeline's only way into the store domain."""

from __future__ import annotations

from llm.agent import Agent
from llm.chat import ChatBackend, ToolCall
from llm.support.datafiles import load
from llm.support.policy import FILLERS, SYSTEM_PROMPT
from llm.support.spoken import caller_words, parse_order_id
from llm.support.store import Store, order_id_argument

SCHEMAS: list[dict] = load("tools.json")  # OpenAI function schemas of lookup_order and check_stock


class StoreTools:
    """lookup_order and check_stock over a store database. An order number the caller never said is
    not looked up (a small model can invent one, and must not read out a stranger's order): it comes
    back as not found, so the model asks the caller to repeat the number."""

    schemas = SCHEMAS

    def __init__(self, store: Store | None = None):
        self.store = store or Store()

    def run(self, call: ToolCall, messages: list[dict]) -> dict:
        if call.name == "lookup_order":
            wanted = order_id_argument(call.arguments)
            said = {
                parse_order_id(m["content"]) for m in messages if m["role"] == "user" and m.get("content")
            }
            if wanted not in said:
                return {"found": False, "order_id": wanted}
        return self.store.execute(call.name, call.arguments)


def store_agent(llm: ChatBackend, store: Store | None = None) -> Agent:
    """The bundled agent of the Northwind store line, over any LLM backend."""
    return Agent(llm, StoreTools(store), SYSTEM_PROMPT, fillers=tuple(FILLERS.values()), words=caller_words)
