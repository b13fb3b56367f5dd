"""The intervals eval-llm reads its targets with, and the groups it reads separately."""

import json

import pytest

from llm.support.conversations import make_examples
from llm.support.evaluate import Scores, group, group_lines, interval, interval_line
from llm.support.store import Store


def test_wilson_interval_matches_textbook_values():
    # 0 of 10: the textbook Wilson upper bound 0.2775; 114 of 120 (a 95.0% tool-call figure): 89.5-97.7
    assert interval(0.0, 10) == (0.0, pytest.approx(0.27754, abs=1e-5))
    assert interval(114 / 120, 120) == (pytest.approx(0.89520, abs=1e-5), pytest.approx(0.97689, abs=1e-5))
    low, high = interval(0.3, 50)
    assert (1 - high, 1 - low) == pytest.approx(interval(0.7, 50))
    assert interval(0.5, 0) == (0.0, 1.0)


def test_interval_line_names_both_rates_and_their_counts():
    r = Scores("autoregressive twin", 114 / 120, 172 / 180, 0.95, 1.0, 70.0, 120, 180)
    assert interval_line(r) == (
        "autoregressive twin: tool calls 95.0% [89.5, 97.7] of 120, answer facts 95.6% [91.5, 97.7] of 180"
    )


def test_stock_questions_are_read_by_state_and_greetings_on_their_own():
    store = Store()
    examples = make_examples(600, seed=12345, split="heldout")
    groups = {}
    for e in examples:
        groups.setdefault(group(e, store), set()).add(e.intent)
    assert groups["stock: not carried"] == {"unknown_product"}
    assert groups["stock: in stock"] == groups["stock: out of stock"] == {"stock"}
    assert groups["greeting"] == {"greeting"}
    for e in examples:  # a stock question's state is the store's own for the product asked about
        if e.intent == "stock" and e.meta.get("call") == 2:
            result = json.loads(e.messages[-1]["content"])
            assert group(e, store) == "stock: " + ("in stock" if result["in_stock"] else "out of stock")


def test_group_lines_give_each_rate_its_interval():
    r = Scores(
        "diffusion",
        0.9,
        0.9,
        0.9,
        6.0,
        70.0,
        10,
        10,
        {"stock: in stock": (19, 20), "stock: not carried": (10, 10), "greeting": (0, 4)},
    )
    assert group_lines(r) == [
        "diffusion, greeting: 0.0% [0.0, 49.0] of 4",
        "diffusion, stock: all: 96.7% [83.3, 99.4] of 30",
        "diffusion, stock: in stock: 95.0% [76.4, 99.1] of 20",
        "diffusion, stock: not carried: 100.0% [72.2, 100.0] of 10",
    ]
