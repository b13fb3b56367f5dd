"""Streamed answer text -> clauses for TTS, each marked filler or useful.

piper speaks one sentence at a time, so waiting for the whole answer would waste the LLM's streaming.
A clause ends at . ! ? (not inside a number such as 4.99), or at , ; : once it has `min_words` words or
when what comes before is a filler ("Of course," carries no answer, whatever follows it: a voice pauses
there, and the caller waits through it for the useful words).
With `split_first`, the first clause of each LLM call also ends before "and", "but", "so" or "or" once
it has `min_words` words: the caller waits for that clause's synthesis, which grows with its length
("Your order is still processing | and ships on Thursday,"); later clauses are synthesized while
earlier ones play. Never inside an amount ("twelve dollars and ninety eight cents").
A *filler* clause ("Sure.", "One moment.", "Let me check that for you.") carries no answer: the first
clause that is not filler is where the first *useful* token and the first *useful* audio are
(docs/timing.md). Fillers are judged by what they do (voice/pipeline/fillers.py); an agent may name its
own besides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from asr.whisper import has_number
from voice.pipeline.fillers import is_filler

# after a digit, "." may be a decimal point still streaming in ("4." then "99"): wait for a space
_END = re.compile(r"(?<!\d)[.!?](?=\s|$)|(?<=\d)[.!?](?=\s)")
_SOFT = re.compile(r"[,;:](?=\s|$)")
# a conjunction whose next word is complete; after "and", a number word continues an amount
_CONJUNCTION = re.compile(r"\s(?=(?:and|but|so|or)\s+([a-z]+)[\s,.;:!?])", re.IGNORECASE)


@dataclass
class Clause:
    text: str
    first_token_ns: int  # arrival of the text's first character (on the call's clock)
    round: int  # which LLM call of the turn produced it (the last one is the answer)
    filler: bool


class Chunker:
    """`feed(text, t_ns, round)` returns the clauses completed by this piece; `flush()` the rest.
    `fillers`: the agent's own filler phrases."""

    def __init__(self, min_words: int, fillers: tuple[str, ...] = (), split_first: bool = False):
        self.min_words, self.fillers, self.split_first = min_words, fillers, split_first
        self.buffer = ""
        self.first_ns: int | None = None
        self.round = 0
        self.first = True  # the next clause is its LLM call's first

    def feed(self, text: str, t_ns: int, round_: int = 0) -> list[Clause]:
        out = []
        if round_ != self.round:  # a new LLM call never continues the last one's clause
            out += self.flush()
            self.round, self.first = round_, True
        if not self.buffer.strip():
            self.first_ns = t_ns
        self.buffer += text
        while cut := self._cut():
            out.append(self._clause(self.buffer[:cut]))
            self.buffer = self.buffer[cut:]
            self.first_ns, self.first = t_ns, False
        return out

    def flush(self) -> list[Clause]:
        rest, self.buffer = self.buffer, ""
        return [self._clause(rest)] if rest.strip() else []

    def _cut(self) -> int:
        """End of the first complete clause in the buffer, or 0."""
        hard = _END.search(self.buffer)
        limit = hard.end() if hard else len(self.buffer) + 1
        soft = [(m.start(), m.end()) for m in _SOFT.finditer(self.buffer, 0, limit)]
        if self.split_first and self.first:
            soft += [
                (m.start(), m.start())
                for m in _CONJUNCTION.finditer(self.buffer, 0, limit)
                if not has_number(m.group(1))
            ]
        for start, end in sorted(soft):
            head = self.buffer[:start]
            if len(head.split()) >= self.min_words or (head.strip() and is_filler(head, self.fillers)):
                return end
        return hard.end() if hard else 0

    def _clause(self, text: str) -> Clause:
        return Clause(text.strip(), self.first_ns or 0, self.round, is_filler(text, self.fillers))
