"""What it takes for an expected fact to be said, and the clause in which the caller first hears one: the
`first_fact_heard` anchor (docs/timing.md) and the reports' fact accuracy match a manifest's facts the
same way. A fact is a string said as words (case and punctuation aside, each digit as its word), or
``{"regex": ...}``."""

from __future__ import annotations

import re
from collections.abc import Sequence

DIGIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
# one word spelt two ways: said alike, so the same word ("canceled" as Whisper writes it)
SPELLINGS = {"canceled": "cancelled", "canceling": "cancelling"}


def normalize(text: str) -> list[str]:
    """Words: lowercase, no punctuation, each digit as its word ("4217" -> four two one seven), one
    spelling for a word spelt two ways."""
    text = re.sub(r"\d", lambda m: f" {DIGIT_WORDS[int(m.group())]} ", text.lower())
    return [SPELLINGS.get(w, w) for w in re.sub(r"[^a-z' ]+", " ", text.replace("-", " ")).split()]


def fact_stated(answer: str, fact: str | dict) -> bool:
    if isinstance(fact, dict):
        return re.search(fact["regex"], answer, flags=re.IGNORECASE) is not None
    return " ".join(normalize(fact)) in " ".join(normalize(answer))


def first_fact(clauses: Sequence[str], facts: Sequence[str | dict]) -> int | None:
    """The index of the clause that completes the first fact said (the clauses heard in order: a fact
    may run across two), or None when none is said."""
    said = ""
    for i, text in enumerate(clauses):
        said = f"{said} {text}"
        if any(fact_stated(said, f) for f in facts):
            return i
    return None
