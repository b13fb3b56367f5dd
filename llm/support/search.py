"""Finding what a caller, an ASR or the model means in the store's own terms, the way a shop's search box
does: ``ProductSearch`` for a product's name, ``order_id_of`` for an order number as the model writes it."""

from __future__ import annotations

import functools
import re

from llm.support.datafiles import load
from llm.support.spoken import number, parse_order_id

_IGNORED = set(load("catalog.toml")["search_ignores"])


def _stem(w: str) -> str:
    """A word's singular, with a final y or ie as i, so that both spellings of a plural meet: knives and
    knife, beanies and beanie, batteries and battery."""
    if len(w) > 4 and w.endswith(("ives", "lves")):  # knives, shelves
        w = w[:-3] + ("fe" if w[-4] == "i" else "f")
    elif len(w) > 3 and w.endswith(("ches", "shes", "xes", "sses")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if len(w) > 3 and w.endswith(("y", "ie")):
        w = w.removesuffix("e")[:-1] + "i"
    return w


def _norm_words(text: str) -> list[str]:
    """Lower-case content words: what a search box compares."""
    return [
        w for w in re.findall(r"[a-z]+", str(text).lower()) if w not in _IGNORED and _stem(w) not in _IGNORED
    ]


def _edits(a: str, b: str) -> int:
    """Levenshtein distance, with a swap of two neighbouring letters counted as one edit."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            d = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                d = min(d, prev2[j - 2] + 1)
            cur.append(d)
        prev2, prev = prev, cur
    return prev[-1]


MATCH_THRESHOLD = 0.5
MISSPELT = 0.75  # what a misspelt word counts for: "sneakers" must not find the bluetooth speaker


def _close(a: str, b: str) -> bool:
    """A small misspelling: one edit in a word of 4 to 7 letters, two when both have 8 or more, the first
    letter right (as a search box assumes)."""
    allowed = 0 if max(len(a), len(b)) < 4 else 1 if min(len(a), len(b)) < 8 else 2
    return 0 < allowed >= abs(len(a) - len(b)) and a[0] == b[0] and _edits(a, b) <= allowed


@functools.lru_cache(maxsize=65536)
def _word_match(said: str, name: str) -> float:
    """How well a word of the query matches a word of a product name: 1 when they are the same word
    (singular or plural), ``MISSPELT`` when one is a small misspelling of the other, else 0."""
    if _stem(said) == _stem(name):
        return 1.0
    return MISSPELT if _close(_stem(said), _stem(name)) or _close(said, name) else 0.0


def match_score(query: list[str], name: list[str]) -> float:
    """How well a query's words name a product, from 0 to 1: the words matched (a misspelt one counts
    ``MISSPELT``) over the name's words and the query's extra words. Words run together or split apart
    ("head phones", "smartwatch") compare as one. A query may leave out words of the name ("earbuds"
    for "wireless earbuds"), but an extra word of its own is only allowed beside a name of two or more
    words that it matches in full: "air conditioner" is not the hair conditioner, "printer ink" is not
    printer paper."""
    if not query or not name:
        return 0.0
    if len(query) != len(name) and (whole := _word_match("".join(query), "".join(name))):
        return whole
    left = list(query)
    matched, found = 0.0, 0
    for word in name:
        scores = [_word_match(q, word) for q in left]
        if scores and max(scores) > 0:
            best = max(scores)
            del left[scores.index(best)]
        else:  # two query words for one name word ("ear buds" for "earbuds")
            pairs = [_word_match(left[i] + left[i + 1], word) for i in range(len(left) - 1)]
            if not pairs or max(pairs) == 0:
                continue
            best = max(pairs)
            i = pairs.index(best)
            del left[i : i + 2]
        matched += best
        found += 1
    if not found or (left and (found < len(name) or len(name) < 2 or len(left) > 1)):
        return 0.0
    return matched / (len(name) + len(left))


@functools.cache
def _cardinals() -> dict[str, str]:
    """ "four thousand two hundred seventeen" -> "4217", for every order number."""
    return {number(i): f"{i:04d}" for i in range(1000, 10000)}


def order_id_of(text: str) -> str | None:
    """The four digits an order number argument stands for, or None."""
    raw = re.sub(r"\.0+$", "", text.strip())  # 4217.0: a number written as a float
    digits = re.sub(r"[\s#,.:-]", "", raw.lower().removeprefix("order").strip())
    if re.fullmatch(r"0*\d{4}", digits):
        return digits[-4:]
    words = [w for w in re.findall(r"[a-z]+", raw.lower()) if w != "and"]
    if "thousand" in words:  # the longest run of words at the end that spells an order number
        cardinals = _cardinals()
        for k in range(len(words)):
            if (oid := cardinals.get(" ".join(words[k:]))) is not None:
                return oid
    return parse_order_id(raw)


class ProductSearch:
    """The best catalogue name for a query, or None below ``MATCH_THRESHOLD``."""

    def __init__(self, names: list[str]):
        self.names = {name: _norm_words(name) for name in sorted(names)}
        self.stems = {name: {_stem(w) for w in words} for name, words in self.names.items()}
        self.squashed = {name.replace(" ", ""): name for name in self.names}  # "trashcan"

    def find(self, query: str) -> str | None:
        """The catalogue's name for what a caller (or an ASR, or the model) calls a product: case,
        singular or plural, a missing or extra word, words run together, a small misspelling. The best
        match scoring at least ``MATCH_THRESHOLD`` wins (more words spelt right, then the name in
        alphabetical order, break a tie)."""
        if (name := self.squashed.get(re.sub(r"[^a-z]", "", str(query).lower()))) is not None:
            return name
        words = _norm_words(query)
        stems = {_stem(w) for w in words}
        best, best_key = None, (0.0, 0)
        for name, name_words in self.names.items():
            key = (match_score(words, name_words), len(stems & self.stems[name]))
            if key > best_key:
                best, best_key = name, key
        return best if best_key[0] >= MATCH_THRESHOLD else None
