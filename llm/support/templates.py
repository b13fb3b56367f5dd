"""The caller's hand-written phrasings (data/templates.toml: lowercase, no punctuation, ASR style) by
intent and split, and the checks that keep what training says apart from the held-out phrasings and
product names, so the held-out split measures phrasings the model never saw."""

from __future__ import annotations

import functools

from llm.support.datafiles import load
from llm.support.splits import split_items
from llm.support.store import NOT_CARRIED, Store

_TEMPLATES = load("templates.toml")
USER_TEMPLATES: dict[str, list[str]] = _TEMPLATES["user_templates"]
NO_ID_TEMPLATES: dict[str, list[str]] = _TEMPLATES["no_id_templates"]
ID_REPLY_TEMPLATES: list[str] = _TEMPLATES["id_reply_templates"]
ALWAYS_TRAIN: dict[str, list[str]] = _TEMPLATES["always_train"]


def templates_for(intent: str, split: str) -> list[str]:
    """The user templates of an intent in a split ("no_id:<intent>" and "id_reply" also work); an
    intent's ``always_train`` phrasings are train templates and never drawn into the held-out split."""
    if intent == "id_reply":
        return split_items(ID_REPLY_TEMPLATES, "id_reply", split)
    if intent.startswith("no_id:"):
        return split_items(NO_ID_TEMPLATES[intent[6:]], intent, split)
    pinned = ALWAYS_TRAIN.get(intent, [])
    held = split_items([t for t in USER_TEMPLATES[intent] if t not in pinned], intent, split)
    return held + pinned if split == "train" else held


def all_template_groups() -> list[str]:
    return list(USER_TEMPLATES) + [f"no_id:{k}" for k in NO_ID_TEMPLATES] + ["id_reply"]


def _words(text: str) -> str:
    """Space-padded, apostrophe-free words, so substring tests respect word boundaries."""
    return " " + " ".join(text.lower().replace("'", "").split()) + " "


@functools.cache
def _heldout_phrasings() -> tuple[str, ...]:
    return tuple(_words(t) for g in all_template_groups() for t in templates_for(g, "heldout"))


def leaks_heldout(template: str) -> bool:
    """Whether a training phrasing is a held-out template of any group, or (both at least three words
    long) contains one or is contained in one. Apostrophes and spacing do not count as a difference."""
    t = _words(template)
    for h in _heldout_phrasings():
        if t == h or (min(len(t.split()), len(h.split())) >= 3 and (h in t or t in h)):
            return True
    return False


def _overlaps_any(name: str, others: list[str]) -> bool:
    words = set(name.split())
    return any(words <= set(o.split()) or set(o.split()) <= words for o in others)


HELDOUT_MISSING = split_items(NOT_CARRIED, "missing_product", "heldout")


def train_may_name(store: Store, name: str) -> bool:
    """An unknown product training may name: the store carries nothing it matches (any split) and it
    neither holds nor sits inside a held-out missing name."""
    return store.find_product(name) is None and not _overlaps_any(name, HELDOUT_MISSING)
