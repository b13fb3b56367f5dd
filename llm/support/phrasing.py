"""Compositional caller phrasings for training the bundled support-line model (model card:
`weights/README.md`).

The hand-written templates in :mod:`llm.support.templates` give 10-28 wordings per intent; a 5.6M parameter
model trained on them memorises the wordings and misreads new ones. Here each intent is built from
independent pools (`data/phrasing.toml`: opener x request x object x closer), so training sees thousands
of surface forms and has to learn which words carry the intent. Used by ``split="train"`` only:
:mod:`llm.support.conversations` drops any composition that contains (or is contained in) a held-out template,
so held-out phrasings stay unseen. Same rules as the templates: lowercase, no punctuation, no digits or
number words (only ``{id}`` may spell digits), ``{product}`` is a product mention.
"""

from __future__ import annotations

import random

from llm.support.datafiles import load

_POOLS = load("phrasing.toml")
OPENERS, CLOSERS = _POOLS["openers"], _POOLS["closers"]
ORDER_OBJECTS, TRAILING_ORDER_OBJECTS = _POOLS["order_objects"], _POOLS["trailing_order_objects"]
NO_ID_OBJECTS, NO_ID_RETURN_OBJECTS = _POOLS["no_id_objects"], _POOLS["no_id_return_objects"]
REQUESTS: dict[str, list[str]] = _POOLS["requests"]
ID_REPLY_LEADS, ID_REPLY_BODIES = _POOLS["id_reply_leads"], _POOLS["id_reply_bodies"]
ID_LEADS, BARE_REQUESTS = _POOLS["id_leads"], _POOLS["bare_requests"]
STOCK_REQUESTS = _POOLS["stock_requests"]
DIRECT: dict[str, list[list[str]]] = _POOLS["direct"]
AGENT_IMPERATIVES, SLOT_WORDS = _POOLS["agent_imperatives"], _POOLS["slot_words"]
EXTRA_MISSING_NOUNS, MODIFIERS = _POOLS["extra_missing_nouns"], _POOLS["modifiers"]
SYLLABLES = _POOLS["syllables"]

# Out-of-scope requests: the share whose noun slot (a topic, a place, a city, ...) is a word made up for
# that request instead of a pool word, and the share told with a story before it ("so yesterday ...").
MADE_UP_SLOTS = ("subject", "venue", "service", "food", "city", "country", "music")
MADE_UP_NOUNS = 0.3
OUT_OF_SCOPE_LEADS = _POOLS["out_of_scope_leads"]
OUT_OF_SCOPE_LEAD = 0.2

# Share of id replies with a lead where the number follows the lead directly ("found it 4217"): the
# number must be copied whatever words come just before it.
LEAD_THEN_ID = 0.4


def _pick(rng: random.Random, pool: list[str], p: float = 1.0) -> str:
    """A pool item with probability ``p``, else nothing."""
    return rng.choice(pool) if rng.random() < p else ""


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


# Share of composed greetings that are a greeting word alone ("hi there", "um hello"): openers like
# "hello there" start many requests for a person, so a bare one must be seen to be answered as a greeting.
BARE_GREETINGS = 0.3
# Share of those said to someone ("hi everyone", "hello sam"): one more word is not a request either.
ADDRESSED = 0.4


def compose(group: str, rng: random.Random) -> str:
    """One composed template for a template group of :mod:`llm.support.templates` (same slot names)."""
    if group == "id_reply":
        lead = _pick(rng, ID_REPLY_LEADS, 0.5)
        body = "{id}" if lead and rng.random() < LEAD_THEN_ID else rng.choice(ID_REPLY_BODIES)
        return _join(lead, body, _pick(rng, ["thanks", "i think", "that's it", "please"], 0.15))
    if group.startswith("no_id:"):
        objects = NO_ID_OBJECTS + (NO_ID_RETURN_OBJECTS if group == "no_id:return_refund" else [])
        core = rng.choice(REQUESTS[group[6:]]).replace("{o}", rng.choice(objects))
        return _join(_pick(rng, OPENERS, 0.35), core, _pick(rng, CLOSERS, 0.2))
    if group in REQUESTS:
        if rng.random() < 0.2:
            core = _join(rng.choice(ID_LEADS), rng.choice(BARE_REQUESTS[group]))
        else:
            core = rng.choice(REQUESTS[group])
            objects = ORDER_OBJECTS + (TRAILING_ORDER_OBJECTS if core.endswith("{o}") else [])
            core = core.replace("{o}", rng.choice(objects))
        return _join(_pick(rng, OPENERS, 0.35), core, _pick(rng, CLOSERS, 0.2))
    if group == "stock":
        return _join(_pick(rng, OPENERS, 0.3), rng.choice(STOCK_REQUESTS), _pick(rng, CLOSERS, 0.15))
    if group == "agent" and rng.random() < 0.3:
        pools = [AGENT_IMPERATIVES, *DIRECT["agent"][2:]]  # "get me" + who + closer
        return _join(*(rng.choice(pool) for pool in pools))
    if group == "greeting" and rng.random() < BARE_GREETINGS:
        return _join(rng.choice(DIRECT["greeting"][0]), _pick(rng, SLOT_WORDS["addressee"], ADDRESSED))
    text = _join(*(rng.choice(pool) for pool in DIRECT[group]))
    scope = group == "out_of_scope"
    for slot, words in SLOT_WORDS.items():
        made_up = scope and slot in MADE_UP_SLOTS and rng.random() < MADE_UP_NOUNS
        text = text.replace("{" + slot + "}", made_up_words(rng) if made_up else rng.choice(words))
    while "{made_up}" in text:
        text = text.replace("{made_up}", made_up_words(rng), 1)
    if scope:
        text = _join(_pick(rng, OUT_OF_SCOPE_LEADS, OUT_OF_SCOPE_LEAD), text)
    if group in ("hours", "shipping", "return_policy", "out_of_scope"):
        text = _join(_pick(rng, OPENERS, 0.3), text, _pick(rng, ["please", "thanks", "real quick"], 0.1))
    return text


def made_up_words(rng: random.Random) -> str:
    """One or two words made up for one out-of-scope request: a word the model has never met must not
    by itself send it to check_stock; only a stock question's frame does."""
    return " ".join(pseudo_word(rng) for _ in range(rng.choice((1, 1, 2))))


def invented_name(rng: random.Random) -> str:
    """A made-up product name: one or two invented words, sometimes before an everyday noun."""
    words = [
        "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(rng.randint(1, 2))
    ]
    if rng.random() < 0.5:
        words.append(rng.choice(EXTRA_MISSING_NOUNS))
    return " ".join(words)


def recombined_name(rng: random.Random, names: list[str]) -> str:
    """The front of one product name and the last word of another ("dog" + "mat"): familiar words in
    an order training never pairs, so check_stock must copy the words rather than recall a name."""
    a, b = rng.sample(names, 2)
    front = a.split()[:-1] or a.split()
    return " ".join(front[: rng.randint(1, len(front))] + b.split()[-1:])


# English spelling patterns for pseudo_word, weighted by repetition: the plain consonant-vowel word is
# still the most common.
_SPELLING = _POOLS["spelling"]
CONSONANTS, VOWELS = _SPELLING["consonants"], _SPELLING["vowels"]
ONSETS = [*CONSONANTS * 2, *_SPELLING["onset_clusters"]]
NUCLEI = [*VOWELS * 6, *_SPELLING["vowel_pairs"]]
CODAS = [""] * 30 + [*CONSONANTS, *_SPELLING["coda_clusters"]]
ENDINGS = [""] * 12 + _SPELLING["endings"]


def pseudo_word(rng: random.Random) -> str:
    """A pronounceable nonsense word spelled like English ("tavemo", "shoalick", "greaver"): the names
    callers say are real words, whose BPE pieces ("read", "oa", "ll") come from clusters, vowel pairs
    and double letters, so a copy of any such pieces is trained, not only of consonant-vowel ones."""
    word = rng.choice(ONSETS) + rng.choice(NUCLEI)
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        word += rng.choice(CONSONANTS) + rng.choice(NUCLEI)
    return word + rng.choice(CODAS) + rng.choice(ENDINGS)


def blended_word(rng: random.Random, names: list[str]) -> str:
    """The start of one real word and the end of another ("micr" + "andle"): made-up, yet with the
    letter sequences, and so the BPE pieces, of real English words, whose rarer pieces ("ave", "ater")
    are where the models still miscopy names they never met."""
    a, b = (rng.choice(rng.choice(names).split()) for _ in range(2))
    return a[: rng.randint(2, max(2, len(a) - 1))] + b[rng.randint(1, max(1, len(b) - 2)) :]


def fresh_product_name(rng: random.Random, names: list[str]) -> str:
    """A product name made up for one question: nonsense or blended words (half the time before an
    everyday noun), an invented brand-like name, or a recombination of known words."""
    pool = names + EXTRA_MISSING_NOUNS
    r = rng.random()
    if r < 0.6:
        n = rng.randint(1, 2)
        words = [pseudo_word(rng) if rng.random() < 0.5 else blended_word(rng, pool) for _ in range(n)]
        if rng.random() < 0.5:
            words.append(rng.choice(EXTRA_MISSING_NOUNS + names).split()[-1])
        return " ".join(words)
    if r < 0.8:
        return invented_name(rng)
    return recombined_name(rng, pool)


def extra_missing_products(rng: random.Random, names: list[str]) -> list[str]:
    """Names the store does not carry: everyday nouns with and without a modifier, recombinations of
    ``names`` and these nouns, and invented names (deterministic for a given rng)."""
    out = list(EXTRA_MISSING_NOUNS)
    out += [f"{rng.choice(MODIFIERS)} {n}" for n in EXTRA_MISSING_NOUNS for _ in range(3)]
    pool = names + EXTRA_MISSING_NOUNS
    out += [recombined_name(rng, pool) for _ in range(600)]
    out += [invented_name(rng) for _ in range(150)]
    return sorted(set(out))
