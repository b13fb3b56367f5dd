"""The agent's tool execution guard: only order numbers the caller said are looked up."""

from __future__ import annotations

from llm.agent import Agent
from llm.reply import ToolCall
from llm.store import Store


def test_only_numbers_the_caller_said_are_looked_up():
    store = Store()
    oid = sorted(store.orders)[0]
    agent = Agent(llm=None, store=store)
    call = ToolCall("lookup_order", f'{{"order_id": "{oid}"}}')
    said = [{"role": "user", "content": f"where is my order {' '.join(oid)}"}]
    assert agent.execute(call, said) == store.lookup_order(oid) and store.lookup_order(oid)["found"]
    earlier = said + [{"role": "assistant", "content": "Sure."}, {"role": "user", "content": "and when"}]
    assert agent.execute(call, earlier)["found"]  # said in an earlier turn counts
    invented = [{"role": "user", "content": "my card has not arrived"}]
    assert agent.execute(call, invented) == {"found": False, "order_id": oid}
    stock = ToolCall("check_stock", '{"product": "yoga mat"}')
    assert agent.execute(stock, invented)["found"]  # products need no such check
