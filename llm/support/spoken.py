"""Speakable English for the support-line domain, and a forgiving order-id parser.

Everything a tool returns to the model is already in the words the caller should hear, so a tiny
model only has to copy: ``digits("4217") == "four two one seven"``,
``spoken_date("2026-12-03") == "Thursday, December third"``,
``money(2499) == "twenty four dollars and ninety nine cents"``, ``number(12) == "twelve"``.

``parse_order_id`` recovers a four digit order id from what an ASR system makes of it
("for 217", "42 17", "forty two seventeen", "four to one seven", ...).
"""

from __future__ import annotations

import datetime as _dt
import itertools
import re

from llm.numbers import ONES, TEENS, TENS, money, number, ordinal  # noqa: F401 (this domain's words)

MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def digits(s: str) -> str:
    """Each digit as a word: "4217" -> "four two one seven" (non-digits are dropped)."""
    return " ".join(ONES[int(c)] for c in str(s) if c.isdigit())


def _as_date(d: str | _dt.date) -> _dt.date:
    return d if isinstance(d, _dt.date) else _dt.date.fromisoformat(str(d))


def spoken_date(d: str | _dt.date) -> str:
    """ "2026-12-03" -> "Thursday, December third" (weekday included: a tiny model cannot compute it)."""
    d = _as_date(d)
    return f"{WEEKDAYS[d.weekday()]}, {MONTHS[d.month - 1]} {ordinal(d.day)}"


# ---------------------------------------------------------------------------------------------
# Order id parsing
# ---------------------------------------------------------------------------------------------

_DIGIT_WORDS = {w: str(i) for i, w in enumerate(ONES)}
_DIGIT_WORDS.update({"oh": "0", "o": "0", "zero": "0", "nil": "0"})
# ASR homophones: only counted as digits inside a run of other number tokens.
_HOMOPHONES = {"for": "4", "fore": "4", "to": "2", "too": "2", "won": "1", "ate": "8", "tree": "3"}
_TEEN_WORDS = {w: str(10 + i) for i, w in enumerate(TEENS)}
_TENS_WORDS = {w: i for i, w in enumerate(TENS) if w}
_FILLERS = {"um", "uh", "er", "erm", "ah", "hmm", "mm"}
_REPEAT = {"double": 2, "triple": 3}


def _tokens(text: str) -> list[str]:
    text = text.lower().replace("-", " ")
    return re.findall(r"[a-z]+|[0-9]+", text)


def _is_numberish(tok: str) -> bool:
    return (
        tok.isdigit()
        or tok in _DIGIT_WORDS
        or tok in _HOMOPHONES
        or tok in _TEEN_WORDS
        or tok in _TENS_WORDS
        or tok in _REPEAT
        or tok == "hundred"
    )


def _run_digits(run: list[str]) -> str | None:
    """Digits spelled by a run of number tokens, or None if the run is malformed."""
    out = ""
    i = 0
    while i < len(run):
        tok = run[i]
        nxt = run[i + 1] if i + 1 < len(run) else None
        if tok.isdigit():
            out += tok
        elif tok in _REPEAT:
            if nxt is None:
                return None
            nd = (
                _DIGIT_WORDS.get(nxt)
                or _HOMOPHONES.get(nxt)
                or (nxt if nxt.isdigit() and len(nxt) == 1 else None)
            )
            if nd is None:
                return None
            out += nd * _REPEAT[tok]
            i += 1
        elif tok in _TENS_WORDS:
            unit = _DIGIT_WORDS.get(nxt) if nxt is not None else None
            if unit is not None and unit != "0":
                out += str(_TENS_WORDS[tok]) + unit
                i += 1
            else:
                out += str(_TENS_WORDS[tok] * 10)
        elif tok in _TEEN_WORDS:
            out += _TEEN_WORDS[tok]
        elif tok == "hundred":
            if not out:
                return None
            out += "00"
        elif tok in _DIGIT_WORDS:
            out += _DIGIT_WORDS[tok]
        elif tok in _HOMOPHONES:
            out += _HOMOPHONES[tok]
        i += 1
    return out


def _runs(tokens: list[str]) -> list[list[str]]:
    runs: list[list[str]] = []
    cur: list[str] = []
    for tok in tokens:
        if _is_numberish(tok):
            cur.append(tok)
        elif tok in _FILLERS and cur:
            continue  # "four two uh one seven": fillers do not break a number
        else:
            if cur:
                runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    return runs


def _run_candidates(run: list[str]):
    """The run itself, then the run with homophones ("for", "to", ...) trimmed from either end."""
    yield run
    lo, hi = 0, len(run)
    while lo < hi and run[lo] in _HOMOPHONES:
        lo += 1
    while hi > lo and run[hi - 1] in _HOMOPHONES:
        hi -= 1
    if lo > 0 or hi < len(run):
        for a in range(0, lo + 1):
            for b in range(len(run), hi - 1, -1):
                if (a, b) != (0, len(run)) and a < b:
                    yield run[a:b]


def caller_words(text: str) -> str:
    """ASR output as the bundled models were trained to read it: lowercase, no punctuation but
    apostrophes. Whisper writes "Hello, can you check order 777-0?"; a dash or dot between digits goes
    ("7770"), any other mark becomes a space; and runs of numbers that make four digits together, as
    Whisper splits an order number ("663 3", "42 17"), are joined into one ("6633")."""
    text = re.sub(r"(?<=\d)[-.,](?=\d)", "", text.lower())
    words = re.sub(r"[^\w\s']", " ", text).split()
    return " ".join(_join_split_numbers(words))


def _join_split_numbers(words: list[str]) -> list[str]:
    out: list[str] = []
    for word in words:
        run = list(itertools.takewhile(str.isdigit, reversed(out)))  # the numbers just before, latest first
        if word.isdigit() and len(run) >= 1 and len("".join(run)) + len(word) == 4:
            del out[-len(run) :]
            word = "".join(reversed(run)) + word
        out.append(word)
    return out


def parse_order_id(text: str) -> str | None:
    """Recover a 4-digit order id from ASR-like text, or None.

    Accepts "4217", "4 2 1 7", "four two one seven", "for two one seven", "for 217", "42 17",
    "forty two seventeen", "four to one seven", "four oh one seven", "double seven", and corrections
    ("order 4 no sorry 4217": the last run of number words that spells exactly four digits wins).
    One or two homophones alone ("to", "for") are never read as digits. Returns None unless exactly four
    digits can be recovered from some run.
    """
    if not text:
        return None
    found = None
    for run in _runs(_tokens(text)):
        for cand in _run_candidates(run):
            if len(cand) < 3 and all(t in _HOMOPHONES for t in cand):
                continue
            ds = _run_digits(cand)
            if ds is not None and len(ds) == 4:
                found = ds
                break
    return found


def holds_order_id(text: str) -> bool:
    """Whether ASR words give a whole order number: a run of number words that spells exactly four digits
    as it stands. A short Whisper window miscopies digits by dropping or doubling one ("order 511" for
    5011, "77770" for 7770), or by hearing one as a word ("3508 to" for three five eight two): those
    leave no such run, and are heard again in the full window (asr/whisper.py). `parse_order_id`, which
    trims homophones off a run, reads more, but is not sure of it."""
    return any(len(_run_digits(run) or "") == 4 for run in _runs(_tokens(text)))


# ---------------------------------------------------------------------------------------------
# Speaking an order id the way callers (and their ASR) do
# ---------------------------------------------------------------------------------------------


def pair_words(two: str) -> str:
    """Two digits as a caller would say them in "forty two seventeen": "42" -> "forty two",
    "07" -> "oh seven", "00" -> "hundred"."""
    if two == "00":
        return "hundred"
    if two[0] == "0":
        return "oh " + ONES[int(two[1])]
    return number(int(two))


ID_FORMS = ("digits", "spaced", "words", "words_oh", "homophone", "for_rest", "pairs", "pair_words", "mixed")


def say_order_id(order_id: str, form: str) -> str:
    """Render a 4-digit id in one of ``ID_FORMS`` (all of which ``parse_order_id`` recovers)."""
    d = order_id
    if form == "digits":
        return d
    if form == "spaced":
        return " ".join(d)
    if form == "words":
        return digits(d)
    if form == "words_oh":
        return " ".join("oh" if c == "0" else ONES[int(c)] for c in d)
    if form == "homophone":
        hom = {"4": "for", "2": "to"}
        return " ".join(hom.get(c, ONES[int(c)]) for c in d)
    if form == "for_rest":
        head = "for" if d[0] == "4" else ONES[int(d[0])]
        return f"{head} {d[1:]}"
    if form == "pairs":
        return f"{d[:2]} {d[2:]}"
    if form == "pair_words":
        return f"{pair_words(d[:2])} {pair_words(d[2:])}"
    if form == "mixed":
        return f"{digits(d[:2])} {d[2:]}"
    raise ValueError(f"unknown id form {form!r}")
