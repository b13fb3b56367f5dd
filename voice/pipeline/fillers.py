"""Whether a clause carries no answer, judged by what it does rather than by its exact words.

A clause is filler when it holds the line ("one moment", "bear with me") or announces work ("let me
check that for you", "I'm pulling up your recent transactions", "checking that now"), and nothing else
in it says anything: the words around the stall only point at the work (who, for whom, how soon), and
what is worked on is a few words that carry no content. One word of content makes it an answer,
whatever it opens with: a number, a date, "yes", "no", a verb in -ed ("Let me check: yes, we have 59 in
stock", "One moment, it shipped"), or something done for the caller ("bear with me while I transfer
you"). What a clause is made of is data (`fillers.toml`); an agent's own fillers are fillers too. Used
by our pipeline (voice/pipeline/chunker.py) and by the probe (voice/runs/probe/), so both judge an agent
they did not write the same way; tests/test_fillers.py measures it on clauses it was not written on.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources


def words(text: str) -> str:
    """The clause as its words: lowercase, punctuation dropped (digits and apostrophes kept)."""
    return " ".join(re.sub(r"[^a-z0-9' ]", " ", text.lower().replace("\u2019", "'")).split())


@dataclass(frozen=True)
class Rules:
    alone: frozenset[str]
    phrases: re.Pattern  # a stall (group hold or work), an acknowledgement (group ack), or a word
    caller_does: re.Pattern
    around: frozenset[str]
    content: frozenset[str]
    acts: frozenset[str]
    doers: frozenset[str]
    asks: frozenset[str]
    object_words: int


@cache
def rules() -> Rules:
    data = tomllib.loads(resources.files("voice.pipeline").joinpath("fillers.toml").read_text())

    def any_of(key: str) -> str:  # longest first, so "one moment" wins over "one"
        return "|".join(re.escape(p) for p in sorted(data[key], key=len, reverse=True))

    phrases = (
        rf"\b(?:(?P<hold>{any_of('hold')})|(?P<work>{any_of('work')})|(?P<ack>{any_of('acknowledge')}))\b|\S+"
    )
    return Rules(
        frozenset(data["alone"]),
        re.compile(phrases),
        re.compile(rf"\b(?:{any_of('caller_does')})\b"),
        *(frozenset(data[key]) for key in ("around", "content", "acts", "doers", "asks")),
        data["object_words"],
    )


@cache
def _said(own: tuple[str, ...]) -> frozenset[str]:
    """An agent's own fillers as words, once (a streamed answer asks at every comma)."""
    return frozenset(map(words, own))


def is_filler(text: str, own: tuple[str, ...] = ()) -> bool:
    """Whether a clause carries no answer: no words, a common filler or one of the agent's `own` said
    alone, or a stall that nothing else in the clause says anything beside. (Acknowledgements alone are
    not: "Thanks." may be the whole answer to "Thanks, goodbye.")"""
    said, r = words(text), rules()
    if not said or said in r.alone or said in _said(own):
        return True
    if r.caller_does.search(said) or any(c.isdigit() for c in said) or text.rstrip().endswith("?"):
        return False  # an instruction, a number, a question to the caller
    stalls = 0
    free = 0  # words of what is worked on that may still come
    asking = False  # inside the question the work looks into
    previous = ""
    for m in r.phrases.finditer(said):
        word = m.group()
        if word in r.acts and previous in r.doers:
            return False  # something done for the caller
        previous = word.rsplit(" ", 1)[-1]
        if m.group("hold") or m.group("work"):
            stalls += 1
            free, asking = (r.object_words if m.group("work") else 0), False
        elif m.group("ack") or asking:  # the question looked into says nothing of its own
            continue
        elif free and word in r.asks:
            asking = True
        elif word in r.around:
            if word == "while" and stalls:  # "one moment while the system loads"
                free = r.object_words
        elif free and word not in r.content and not word.endswith("ed"):
            free -= 1
        else:
            return False
    return bool(stalls)
