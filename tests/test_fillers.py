"""Fillers judged by what they do (voice/pipeline/fillers.py): the stall phrases of agents we did not
write are fillers, and a clause that says anything is an answer, whatever it opens with."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from voice.pipeline.fillers import is_filler

DATA = Path(__file__).parent / "data"


def test_stalls_of_any_wording_are_fillers():
    for text in [
        "Let me look up that order.",  # a stall no list of ours held before
        "let me check that for you",
        "I'll check.",
        "One moment while I pull up your account.",
        "Bear with me.",
        "Checking that now.",
        "Give me a sec.",
        "Hang on while I look into that.",
        "Okay, I'm looking that up.",
        "Let me take a look at your recent transactions real quick.",  # what is worked on: any few words
        "Let me see if the doctor has any openings.",  # the question the work looks into
        "Sorry for the wait, I'm still checking.",
        "Sure.",
        "",
    ]:
        assert is_filler(text), text


def test_a_clause_that_says_anything_is_an_answer():
    for text in [
        "Let me check: yes, we have 59 in stock",
        "One moment, it shipped.",  # a verb in -ed
        "Let me transfer you to a person now.",  # something done for the caller
        "Bear with me while I transfer you.",
        "I checked, and it's out of stock.",
        "Could you tell me your order number?",  # a question to the caller
        "You can look it up in your account.",  # an instruction
        "Sure, your order number is 4417.",
        "4417.",
        "Thanks.",  # an acknowledgement alone may be the whole answer ("Thanks, goodbye.")
        "Checking accounts have no monthly fee.",
        "We are open until nine tonight.",
    ]:
        assert not is_filler(text), text


def test_an_agents_own_fillers_are_fillers_for_it_only():
    own = ("Righto, sorting that.",)
    assert is_filler("Righto, sorting that.", own)
    assert not is_filler("Righto, sorting that.")


@pytest.mark.parametrize(
    ("name", "rows", "recall"),
    [
        ("filler_clauses.tsv", 300, 0.93),  # looked at against the rule: a floor it must keep
        ("filler_clauses_fresh.tsv", 240, 0.92),  # not tuned on: measured once, 0.933 (bench/fillers.py)
    ],
)
def test_the_held_out_clauses(name, rows, recall):
    """Clauses written apart from the rule, from real voice agents' stall phrases and answers (tests/data,
    made by someone who had not seen the rule), half of them fillers; bench/fillers.py prints the figures."""
    clauses = list(csv.DictReader((DATA / name).open(), delimiter="\t"))
    judged = [(row["label"] == "filler", is_filler(row["clause"])) for row in clauses]
    assert len(clauses) >= rows and sum(truth for truth, _ in judged) >= rows // 2
    said = [truth for truth, said in judged if said]
    caught = [said for truth, said in judged if truth]
    assert sum(said) / len(said) >= 0.99  # precision: an answer taken for filler moves the anchor late
    assert sum(caught) / len(caught) >= recall
