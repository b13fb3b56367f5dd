"""The shipped models, loaded from the repository, answer fixed support questions correctly through
the agent loop and the real store (held-out order ids, never seen in training)."""

from __future__ import annotations

import asyncio
import json

import pytest

from llm.engine.async_engine import AsyncEngine
from llm.engine.engine import Engine
from llm.engine.params import GenerationParams
from llm.serving.engine_chat import EngineChat
from llm.support.models import BUNDLED
from llm.support.policy import DIRECT_ANSWERS, order_answer, stock_answer
from llm.support.splits import in_heldout_id
from llm.support.spoken import digits
from llm.support.store import Store
from llm.support.tools import store_agent

STORE = Store()


def heldout_order(status: str) -> str:
    orders = sorted(STORE.orders.items())
    return next(oid for oid, o in orders if o["status"] == status and in_heldout_id(oid))


@pytest.fixture(scope="module", params=["bundled", "bundled-ar"])
def agent(request):
    engine = AsyncEngine(Engine(BUNDLED[request.param], device="cpu"))
    yield store_agent(EngineChat(engine))
    engine.close()


def ask(agent, text: str, history: list[dict] | None = None):
    return asyncio.run(agent.turn(text, history=history))


@pytest.mark.parametrize("status", ["shipped", "delivered", "processing", "cancelled"])
def test_order_status_uses_the_tool_and_states_the_facts(agent, status):
    oid = heldout_order(status)
    result = ask(agent, f"hi where is my order {digits(oid)}")
    calls = [(c.name, json.loads(c.arguments)) for c in result.tool_calls]
    assert calls == [("lookup_order", {"order_id": oid})]
    _, facts = order_answer("order_status", STORE.lookup_order(oid))
    assert all(f.lower() in result.answer.lower() for f in facts), (result.answer, facts)
    assert result.request_ns < result.first_token_ns <= result.first_answer_token_ns <= result.done_ns


def test_digits_said_as_numbers_reach_the_tool(agent):
    oid = heldout_order("shipped")
    result = ask(agent, f"can you check order {oid[:2]} {oid[2:]}")
    assert [json.loads(c.arguments) for c in result.tool_calls] == [{"order_id": oid}]


@pytest.mark.parametrize("lead", ["it's right here", "hang on let me see"])
def test_a_number_given_when_asked_reaches_the_tool_whatever_comes_before_it(agent, lead):
    oid = heldout_order("out_for_delivery")
    asked = [
        {"role": "user", "content": "where is my order"},
        {"role": "assistant", "content": DIRECT_ANSWERS["ask_order_id"][0]},
    ]
    result = ask(agent, f"{lead} {oid}", history=asked)
    assert [json.loads(c.arguments) for c in result.tool_calls] == [{"order_id": oid}]


def test_whisper_casing_and_punctuation_reach_the_model_as_trained(agent):
    """Without caller_words the diffusion model asks for the number again."""
    oid = heldout_order("delivered")
    result = ask(agent, f"Hello, can you check order {oid[:3]}-{oid[3]}? Please?")
    assert [json.loads(c.arguments) for c in result.tool_calls] == [{"order_id": oid}]


def test_direct_answers_need_no_tool(agent):
    result = ask(agent, "what time do you open")
    assert not result.tool_calls
    assert "eight in the morning" in result.answer
    result = ask(agent, "can you recommend a good pizza place")
    assert not result.tool_calls and "can't help" in result.answer


def test_stock_question_calls_check_stock(agent):
    result = ask(agent, "do you have any yoga mats in stock")
    assert [c.name for c in result.tool_calls] == ["check_stock"]
    assert result.tool_calls[0].result["found"]
    assert result.tool_calls[0].result["price"] in result.answer


@pytest.mark.parametrize("name", ["sofa", "lava lamp"])
def test_a_name_never_seen_in_training_is_copied_into_check_stock(agent, name):
    """The held-out name "sofa", and "lava lamp" that no generator list has: the argument is a copy of
    the caller's words (stage 4 wrote "umba" and "oaf" for sofa, "laundry lamp" for lava lamp), and the
    store says it does not carry it."""
    result = ask(agent, f"do you sell {name}")
    assert [(c.name, json.loads(c.arguments)) for c in result.tool_calls] == [
        ("check_stock", {"product": name})
    ]
    assert not result.tool_calls[0].result["found"] and "couldn't find" in result.answer


# Asked as a new user would ask (issue 20): catalogue names, phrasings of our own, every stock state.
# Both v2 models (recipe.toml, 7d61f26) refuse "can i still buy ..." as out of scope, and "Hello world."
# too: known weaknesses in weights/README.md, kept here as strict xfails so a model that fixes them fails
# the marker and gets it removed.
STILL_WRONG = pytest.mark.xfail(strict=True, reason="v2 models refuse it as out of scope (issue 20)")

DAY_ONE_STOCK = [
    pytest.param("can i still buy a foam roller", "foam roller", marks=STILL_WRONG),  # in stock
    ("how many yoga mats have you got", "yoga mat"),  # in stock, the count asked
    ("do you have toasters", "toaster"),  # out of stock, asked in the plural
    ("is the air fryer in stock", "air fryer"),  # out of stock
    ("are the dumbbells available", "dumbbells"),  # out of stock
    ("do you sell hammocks", None),  # not carried
]


@pytest.mark.parametrize("said, product", DAY_ONE_STOCK)
def test_stock_questions_as_a_new_user_asks_them(agent, said, product):
    result = ask(agent, said)
    assert [c.name for c in result.tool_calls] == ["check_stock"], (result.tool_calls, result.answer)
    got = result.tool_calls[0].result
    if product is None:
        assert not got["found"] and "couldn't find" in result.answer, (got, result.answer)
        return
    assert got.get("product") == product, got  # the store's search found it
    _, facts = stock_answer(got)
    assert all(f.lower() in result.answer.lower() for f in facts), (result.answer, facts)


@pytest.mark.parametrize(
    "said", [pytest.param("Hello world.", marks=STILL_WRONG), "hi there", "good morning"]
)
def test_a_bare_greeting_is_greeted(agent, said):
    result = ask(agent, said)
    assert not result.tool_calls and "thanks for calling" in result.answer.lower(), result.answer


@pytest.mark.parametrize(
    "said", ["Go forward ten meters.", "Is the garage door open?", "what's the weather tomorrow"]
)
def test_out_of_scope_is_refused_without_a_tool(agent, said):
    result = ask(agent, said)
    assert not result.tool_calls and "can't help" in result.answer, (result.tool_calls, result.answer)


def test_a_doubtful_tool_call_opening_is_ruled_out():
    """The diffusion model opens "how much petrol is left in my car" with the tool-call filler at about
    0.67 (the floor is 0.8, `opening_floor` in its config): with no floor it calls a tool, with its
    default it refuses; a stock question opens the filler at ~1.0 and keeps its tool call either way."""
    engine = AsyncEngine(Engine(BUNDLED["bundled"], device="cpu"))
    default = store_agent(EngineChat(engine))
    unfloored = store_agent(EngineChat(engine, GenerationParams(opening_floor={})))
    assert engine.engine.config.extra["generation"]["opening_floor"], "the bundled model ships a floor"
    assert ask(unfloored, "how much petrol is left in my car").tool_calls, "the doubtful opening went through"
    result = ask(default, "how much petrol is left in my car")
    assert not result.tool_calls and "can't help" in result.answer, (result.tool_calls, result.answer)
    for agent in (unfloored, default):
        assert [c.name for c in ask(agent, "is the yoga mat in stock").tool_calls] == ["check_stock"]
    engine.close()
