"""The store's policy (`data/policy.toml`), written once: the system prompt, the filler said before each
tool call and every spoken answer are made from the same facts, so what the prompt tells the model and
what the answers say cannot drift apart. Answers are (text, facts): the facts are what a correct
answer must state."""

from __future__ import annotations

import re

from llm.support.datafiles import load
from llm.support.spoken import money

_POLICY = load("policy.toml")
FREE_SHIPPING_OVER_CENTS = _POLICY["shipping"]["free_over_cents"]
SHIPPING_FEE_CENTS = _POLICY["shipping"]["fee_cents"]
FACTS: dict[str, str] = {
    **_POLICY["facts"],
    "free_shipping_over": money(FREE_SHIPPING_OVER_CENTS),
    "shipping_fee": money(SHIPPING_FEE_CENTS),
}


def _fill(text: str) -> str:
    """Put the policy's facts in; other braced names (tool-result fields) stay for `answer_for`."""
    return re.sub(r"\{(\w+)\}", lambda m: FACTS.get(m[1], m[0]), text)


def _answer(entry: dict) -> tuple[str, list[str]]:
    return _fill(entry["text"]), [_fill(f) for f in entry["facts"]]


STORE_NAME = FACTS["store"]
SYSTEM_PROMPT = _fill(_POLICY["system_prompt"])
FILLERS: dict[str, str] = dict(_POLICY["fillers"])  # tool name -> what is said while it runs
DIRECT_ANSWERS = {intent: _answer(e) for intent, e in _POLICY["answers"].items()}
TOOL_ERROR_ANSWERS = {tool: _answer(e) for tool, e in _POLICY["tool_errors"].items()}
# What the agent says itself when the model's call has arguments that do not fit (the agent file's
# on_bad_arguments): the answer the models learned for such an error.
BAD_ARGUMENTS = {tool: text for tool, (text, _) in TOOL_ERROR_ANSWERS.items()}
UNKNOWN_ORDER_ANSWER = _answer(_POLICY["unknown_order"])
ORDER_ANSWERS = {
    intent: {status: _answer(e) for status, e in by_status.items()}
    for intent, by_status in _POLICY["order_answers"].items()
}
STOCK_ANSWERS = {case: _answer(e) for case, e in _POLICY["stock_answers"].items()}


def answer_for(answer: tuple[str, list[str]], result: dict) -> tuple[str, list[str]]:
    text, facts = answer
    return text.format(**result), [f.format(**result) for f in facts]


def order_answer(intent: str, result: dict) -> tuple[str, list[str]]:
    """The spoken answer (and its facts) for an order intent given a lookup_order result."""
    if not result.get("found"):
        return UNKNOWN_ORDER_ANSWER
    return answer_for(ORDER_ANSWERS[intent][result["status"]], result)


def stock_answer(result: dict) -> tuple[str, list[str]]:
    """The spoken answer (and its facts) for a check_stock result."""
    if not result.get("found"):
        case = "not_found"
    else:
        case = "in_stock" if result["in_stock"] > 0 else "out_of_stock"
    return answer_for(STOCK_ANSWERS[case], result)
