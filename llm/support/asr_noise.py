"""How a caller's words reach the model through ASR (data/noise.toml): order ids in their spoken and
garbled forms, hesitations, false starts, casual or misheard rewrites, products said in the plural."""

from __future__ import annotations

import random

from llm.support.datafiles import load
from llm.support.spoken import ID_FORMS, digits, say_order_id
from llm.support.store import Store

_NOISE = load("noise.toml")
HESITATIONS, PREFIXES, SUFFIXES = _NOISE["hesitations"], _NOISE["prefixes"], _NOISE["suffixes"]
FALSE_STARTS, CORRECTIONS = _NOISE["false_starts"], _NOISE["corrections"]
_ID_FORM_WEIGHTS: dict[str, int] = _NOISE["id_form_weights"]
assert set(_ID_FORM_WEIGHTS) == set(ID_FORMS)
# Train only: ASR-style rewrites of a template (contractions, casual forms) and droppable words.
ASR_REWRITES: dict[str, list[str]] = _NOISE["asr_rewrites"]
DROPPABLE = set(_NOISE["droppable"])
_NO_PLURAL_ENDINGS = ("s", "f", "fe", "y", "o", "ss")
_MASS_NOUNS = set(_NOISE["mass_nouns"])


def spoken_id(order_id: str, rng: random.Random) -> str:
    """How a caller's order id reaches us through ASR (parse_order_id recovers it)."""
    forms = [
        f
        for f in ID_FORMS
        if not (f == "words_oh" and "0" not in order_id)
        and not (f == "homophone" and not ({"2", "4"} & set(order_id)))
        and not (f == "for_rest" and order_id[0] != "4")
    ]
    form = rng.choices(forms, [_ID_FORM_WEIGHTS[f] for f in forms])[0]
    text = say_order_id(order_id, form)
    words = text.split()
    if len(words) >= 3 and form in ("words", "words_oh", "homophone", "spaced") and rng.random() < 0.12:
        k = rng.randint(1, len(words) - 1)
        words.insert(k, rng.choice(["uh", "um"]))
        text = " ".join(words)
    if rng.random() < 0.07:
        # A false start or a correction: "4 no sorry 4217", "4218 no wait 4217".
        if rng.random() < 0.5:
            wrong = say_order_id(order_id, rng.choice(["digits", "words"])).split()[: rng.randint(1, 2)]
            wrong = " ".join(wrong)
        else:
            other = f"{(int(order_id) - 1000 + rng.choice([1, -1, 10, -10, 100])) % 9000 + 1000:04d}"
            wrong = say_order_id(other, rng.choice(["digits", "words"]))
        text = f"{wrong} {rng.choice(CORRECTIONS)} {text}"
    return text


def bad_spoken_id(order_id: str, rng: random.Random) -> str:
    """A garbled id that does not spell exactly four digits (three or five)."""
    d = order_id
    if rng.random() < 0.6:
        k = rng.randrange(4)
        d = d[:k] + d[k + 1 :]
    else:
        k = rng.randrange(5)
        d = d[:k] + str(rng.randrange(10)) + d[k:]
    form = rng.choice(["digits", "spaced", "words", "words", "spaced"])
    if form == "digits":
        return d
    if form == "spaced":
        return " ".join(d)
    return digits(d)


def noisy(template: str, rng: random.Random, slots: dict[str, str], *, light: bool = False) -> str:
    """Fill a template with slot text and ASR-style noise; returns lowercase text."""
    words = template.split()
    if not light:
        if rng.random() < 0.25:
            words.insert(rng.randint(0, len(words)), rng.choice(HESITATIONS))
        if rng.random() < 0.06:
            words.insert(rng.randint(0, len(words)), rng.choice(HESITATIONS))
        if rng.random() < 0.07 and len(words) > 2:
            if rng.random() < 0.5:
                words = [words[0]] + words
            else:
                words = rng.choice(FALSE_STARTS).split() + [rng.choice(["uh", "um"])] + words
        if rng.random() < 0.18:
            words = rng.choice(PREFIXES).split() + words
        if rng.random() < 0.1:
            words = words + rng.choice(SUFFIXES).split()
    text = " ".join(words)
    for k, v in slots.items():
        text = text.replace("{" + k + "}", v)
    if rng.random() < 0.15:
        text = text.replace("'", "")
    if rng.random() < 0.06:
        text += rng.choice(["?", "."])
    return text.lower()


def asr_rewrite(template: str, rng: random.Random) -> str:
    """A casual or misheard variant: one contraction or phrase rewritten, or one small word dropped."""
    words = template.split()
    droppable = [i for i, w in enumerate(words) if w in DROPPABLE]
    if droppable and rng.random() < 0.4:
        del words[rng.choice(droppable)]
        return " ".join(words)
    text = f" {template} "
    hits = [k for k in ASR_REWRITES if f" {k} " in text]
    if not hits:
        return template
    k = rng.choice(hits)
    return text.replace(f" {k} ", f" {rng.choice(ASR_REWRITES[k])} ", 1).strip()


def product_mention(name: str, rng: random.Random, store: Store) -> str:
    """The product as the caller names it (sometimes plural): what check_stock is called with, as
    the store's search finds a product from any such mention."""
    if not name.endswith(_NO_PLURAL_ENDINGS) and name not in _MASS_NOUNS and rng.random() < 0.25:
        plural = name + ("es" if name.endswith(("sh", "ch", "x")) else "s")
        if store.find_product(plural) == store.find_product(name):
            return plural
    return name
