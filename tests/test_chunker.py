"""Clauses for TTS and filler detection: where the first useful words are."""

from __future__ import annotations

from llm.support.policy import FILLERS
from voice.chunker import Chunker, is_filler

STORE_FILLERS = tuple(FILLERS.values())  # what the bundled agent's model says before a tool call


def feed_all(pieces: list[tuple[str, int, int]]) -> list:
    chunker = Chunker(min_words=4, fillers=STORE_FILLERS)
    out = []
    for text, t, round_ in pieces:
        out += chunker.feed(text, t, round_)
    return out + chunker.flush()


def test_clauses_end_at_sentence_marks_and_long_enough_commas():
    clauses = feed_all([("Sure.", 1, 0), (" Your order", 2, 0), (" has shipped, and", 3, 0),
                        (" it arrives", 4, 0), (" Sunday, December sixth.", 5, 0)])  # fmt: skip
    assert [c.text for c in clauses] == [
        "Sure.",
        "Your order has shipped,",
        "and it arrives Sunday,",
        "December sixth.",
    ]
    assert [c.first_token_ns for c in clauses] == [1, 2, 3, 5]
    assert [c.filler for c in clauses] == [True, False, False, False]


def test_a_decimal_point_streaming_in_is_not_a_sentence_end():
    clauses = feed_all([("It costs 4.", 1, 0), ("99 dollars.", 2, 0)])
    assert [c.text for c in clauses] == ["It costs 4.99 dollars."]


def test_a_new_llm_call_starts_a_new_clause():
    clauses = feed_all([("Let me look up that order", 1, 0), ("Your order shipped.", 7, 1)])
    assert [(c.text, c.round, c.filler) for c in clauses] == [
        ("Let me look up that order", 0, True),
        ("Your order shipped.", 1, False),
    ]


def test_filler_detection():
    for text in ["Sure.", "One moment.", "Let me check.", "okay,", ""]:
        assert is_filler(text), text
    for text in ["Sure, it shipped.", "Your order shipped.", "We open at nine."]:
        assert not is_filler(text, STORE_FILLERS), text


def test_an_agents_own_fillers_are_fillers_for_it_only():
    assert is_filler("Let me look up that order.", STORE_FILLERS)
    assert is_filler("let me check that for you", STORE_FILLERS)
    assert not is_filler("Let me look up that order.")
