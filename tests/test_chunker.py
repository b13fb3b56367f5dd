"""Clauses for TTS and filler detection: where the first useful words are."""

from __future__ import annotations

from llm.support.policy import FILLERS
from voice.pipeline.chunker import Chunker, is_filler

STORE_FILLERS = tuple(FILLERS.values())  # what the bundled agent's model says before a tool call


def feed_all(pieces: list[tuple[str, int, int]]) -> list:
    chunker = Chunker(min_words=4, fillers=STORE_FILLERS)
    out = []
    for text, t, round_ in pieces:
        out += chunker.feed(text, t, round_)
    return out + chunker.flush()


def test_clauses_end_at_sentence_marks_and_long_enough_commas():
    clauses = feed_all(
        [
            ("Sure.", 1, 0),
            (" Your order", 2, 0),
            (" has shipped, and", 3, 0),
            (" it arrives", 4, 0),
            (" Sunday, December sixth.", 5, 0),
        ]
    )
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


def test_a_filler_lead_in_is_a_clause_of_its_own():
    chunker = Chunker(min_words=4, fillers=STORE_FILLERS)
    clauses = chunker.feed("Of course, I will connect you. Okay, so,", 0) + chunker.flush()
    assert [(c.text, c.filler) for c in clauses] == [
        ("Of course,", True),
        ("I will connect you.", False),
        ("Okay,", True),
        ("so,", True),
    ]
    clauses = Chunker(min_words=4).feed("Yes, it shipped. ", 0)  # not a filler, and short: no cut
    assert [c.text for c in clauses] == ["Yes, it shipped."]


def words_of(text: str, split_first: bool, round_: int = 0) -> list[str]:
    """`text` streamed a word at a time."""
    chunker, out = Chunker(min_words=4, split_first=split_first), []
    words = text.split(" ")
    for i, word in enumerate(words):
        out += chunker.feed(word if i == len(words) - 1 else word + " ", i, round_)
    return [c.text for c in out + chunker.flush()]


def test_the_first_clause_also_ends_before_a_conjunction_so_it_is_heard_sooner():
    text = "Your order is still processing and ships on Thursday, and it comes with DHL."
    assert words_of(text, split_first=False) == [
        "Your order is still processing and ships on Thursday,",
        "and it comes with DHL.",
    ]
    assert words_of(text, split_first=True) == [
        "Your order is still processing",  # only the first clause is split: the rest plays meanwhile
        "and ships on Thursday,",
        "and it comes with DHL.",
    ]
    # never inside an amount, nor before four words
    assert words_of("Twelve dollars and ninety eight cents was refunded.", True) == [
        "Twelve dollars and ninety eight cents was refunded."
    ]
    assert words_of("Yes and no, it depends on the size.", True) == ["Yes and no, it depends on the size."]
    # each LLM call's first clause (what follows a tool call is the answer's first)
    chunker = Chunker(min_words=4, split_first=True)
    out = chunker.feed("Let me look up that order. ", 0, 0)
    out += chunker.feed("Your order has shipped with DHL and should arrive Monday.", 1, 1)
    assert [c.text for c in out + chunker.flush()] == [
        "Let me look up that order.",
        "Your order has shipped with DHL",
        "and should arrive Monday.",
    ]
