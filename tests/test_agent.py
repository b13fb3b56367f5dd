"""The agent's tool execution guard: only order numbers the caller said are looked up."""

from __future__ import annotations

import asyncio

from llm.agentfile import load_agent_file
from llm.agentfile.tools import FileTools
from llm.chat import ToolCall
from llm.support.spoken import caller_words
from llm.support.tools import store


def test_only_numbers_the_caller_said_are_looked_up():
    oid = sorted(store().orders)[0]
    tools = FileTools(load_agent_file().tools)
    run = lambda call, messages: asyncio.run(tools.run(call, messages))  # noqa: E731
    call = ToolCall("lookup_order", f'{{"order_id": "{oid}"}}')
    said = [{"role": "user", "content": f"where is my order {' '.join(oid)}"}]
    assert run(call, said) == store().lookup_order(oid) and store().lookup_order(oid)["found"]
    written = ToolCall("lookup_order", f'{{"order_id": "#{oid}"}}')
    assert run(written, said)["found"]  # as the model may write it
    earlier = said + [{"role": "assistant", "content": "Sure."}, {"role": "user", "content": "and when"}]
    assert run(call, earlier)["found"]  # said in an earlier turn counts
    invented = [{"role": "user", "content": "my card has not arrived"}]
    assert run(call, invented) == {"found": False, "order_id": oid}
    stock = ToolCall("check_stock", '{"product": "yoga mat"}')
    assert run(stock, invented)["found"]  # products need no such check


def test_caller_words_are_what_the_models_were_trained_on():
    assert (
        caller_words("Hello, can you check order 777-0? Please?") == "hello can you check order 7770 please"
    )
    assert caller_words("When does order 66.33 arrive?") == "when does order 6633 arrive"
    # an order number Whisper split joined again; numbers that make no four digits left alone
    assert caller_words("as my Order 663 3-ship yet.") == "as my order 6633 ship yet"
    assert caller_words("order 4 2 1 7") == "order 4217" and caller_words("I want 2 mats") == "i want 2 mats"
    assert caller_words("order 4 no sorry 4217") == "order 4 no sorry 4217"
    assert caller_words("I'd like to talk to a person.") == "i'd like to talk to a person"
    assert caller_words("Great,thanks!") == "great thanks"
