"""The agent's tool execution guard: only order numbers the caller said are looked up."""

from __future__ import annotations

from llm.chat import ToolCall
from llm.support.spoken import caller_words
from llm.support.store import Store
from llm.support.tools import StoreTools


def test_only_numbers_the_caller_said_are_looked_up():
    store = Store()
    oid = sorted(store.orders)[0]
    tools = StoreTools(store)
    call = ToolCall("lookup_order", f'{{"order_id": "{oid}"}}')
    said = [{"role": "user", "content": f"where is my order {' '.join(oid)}"}]
    assert tools.run(call, said) == store.lookup_order(oid) and store.lookup_order(oid)["found"]
    earlier = said + [{"role": "assistant", "content": "Sure."}, {"role": "user", "content": "and when"}]
    assert tools.run(call, earlier)["found"]  # said in an earlier turn counts
    invented = [{"role": "user", "content": "my card has not arrived"}]
    assert tools.run(call, invented) == {"found": False, "order_id": oid}
    stock = ToolCall("check_stock", '{"product": "yoga mat"}')
    assert tools.run(stock, invented)["found"]  # products need no such check


def test_caller_words_are_what_the_models_were_trained_on():
    assert (
        caller_words("Hello, can you check order 777-0? Please?") == "hello can you check order 7770 please"
    )
    assert caller_words("When does order 66.33 arrive?") == "when does order 6633 arrive"
    assert caller_words("I'd like to talk to a person.") == "i'd like to talk to a person"
    assert caller_words("Great,thanks!") == "great thanks"
