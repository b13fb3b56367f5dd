"""Support-line conversations drawn as training and evaluation data for the bundled model (model card:
`weights/README.md`).

One :class:`Example` is one model call. A data turn (order or stock question) gives two calls:
call 1 maps the caller's words to a short filler plus a tool call; call 2 sees the tool result and
speaks the answer. Every other intent is one call with a direct answer. Answers follow one fixed
template per intent and status, with numbers and dates copied verbatim from the tool result, so a
~5M parameter model can learn them.

Callers speak through ASR: user text is lowercase, mostly unpunctuated, with fillers, false starts
and order ids in many spoken forms (see :mod:`llm.support.asr_noise`).

``split="heldout"`` uses phrasing templates (:mod:`llm.support.templates`), order ids and product names
that ``split="train"`` never uses (a stable hash puts ~15% of each into heldout).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from llm.support.asr_noise import asr_rewrite, bad_spoken_id, noisy, product_mention, spoken_id
from llm.support.phrasing import compose, extra_missing_products, fresh_product_name
from llm.support.policy import (
    DIRECT_ANSWERS,
    FILLERS,
    SYSTEM_PROMPT,
    TOOL_ERROR_ANSWERS,
    order_answer,
    stock_answer,
)
from llm.support.splits import SPLITS, in_heldout_id, split_items
from llm.support.spoken import parse_order_id
from llm.support.store import NOT_CARRIED, STATUSES, Store, order_result, stock_result
from llm.support.templates import all_template_groups, leaks_heldout, templates_for, train_may_name

ID_INTENTS = ("order_status", "delivery_date", "cancel_order", "change_order", "return_refund")


def _n_words(text: str) -> int:
    return len(text.split())


@dataclass
class Example:
    messages: list[dict]
    target: dict
    intent: str
    facts: list[str]
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "messages": self.messages,
            "target": self.target,
            "intent": self.intent,
            "facts": self.facts,
            "meta": self.meta,
        }


def tool_call_target(name: str, arguments: dict | str) -> dict:
    """Filler and tool call; ``arguments`` as a dict, or as the exact text of broken ones."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "role": "assistant",
        "content": FILLERS[name],
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": text}}],
    }


# Turn-level intent weights (a data turn yields two examples).
INTENT_WEIGHTS = {
    "order_status": 14,
    "delivery_date": 9,
    "cancel_order": 6,
    "change_order": 6,
    "return_refund": 6,
    "stock": 14,
    "unknown_order": 5,
    "bad_order_id": 4,
    "ask_order_id": 5,
    "unknown_product": 3,
    "return_policy": 3,
    "hours": 3,
    "shipping": 3,
    "greeting": 3,
    "thanks": 3,
    "goodbye": 2,
    "agent": 3,
    "out_of_scope": 5,
}
# Train only: more of the intents held-out phrasings confused (greetings, ids of three or five digits,
# out-of-scope questions, product names never seen). The heldout split keeps INTENT_WEIGHTS.
TRAIN_INTENT_WEIGHTS = {
    **INTENT_WEIGHTS,
    "bad_order_id": 7,
    "greeting": 6,
    "out_of_scope": 24,
    "unknown_product": 20,
}
HISTORY_FRACTION = 0.25
MAX_USER_WORDS = 25
# Train only: share of order numbers said right after a word drawn from all training templates, so the
# number is copied whatever word comes just before it.
ID_CONTEXT = 0.15
# Train only: share of tool results whose facts come from other rows (see _Generator._copy_practice).
COPY_PRACTICE = 0.3
# Train only: share of tool calls whose arguments are broken in the context, answered by an error (see
# _Generator._two_calls).
TOOL_ERRORS = 0.04
# Train only: share of unknown-product questions naming a product made up for that question.
FRESH_NAMES = 0.7
# Train only: share of user turns phrased by llm.support.phrasing instead of a hand-written template.
COMPOSED_FRACTION = 0.6


class _Generator:
    def __init__(self, seed: int, split: str, store: Store, new_products: bool = True):
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.rng = random.Random(f"ttfat-data:{split}:{seed}")
        self.split = split
        self.store = store
        self.templates = {g: templates_for(g, split) for g in all_template_groups()}
        held = split == "heldout"
        ids = sorted(store.orders)
        mine = [i for i in ids if in_heldout_id(i) == held]
        self.ids = mine  # this split's order ids
        self.ids_by_status = {s: [i for i in mine if store.orders[i]["status"] == s] for s in STATUSES}
        known = set(ids)
        self.unknown_ids = [
            f"{i:04d}"
            for i in range(1000, 10000)
            if f"{i:04d}" not in known and in_heldout_id(f"{i:04d}") == held
        ]
        catalog = sorted(store.products)
        self.products = split_items(catalog, "product", split) if new_products else catalog
        self.missing = [
            p for p in split_items(NOT_CARRIED, "missing_product", split) if store.find_product(p) is None
        ]
        if split == "train":
            self.missing += [
                p
                for p in extra_missing_products(random.Random(f"ttfat-missing:{seed}"), self.products)
                if train_may_name(store, p)
            ]
            # The words that may come right before an order number (ID_CONTEXT).
            self.context_words = sorted(
                {w for ts in self.templates.values() for t in ts for w in t.split() if w.isalpha()}
            )
        weights = TRAIN_INTENT_WEIGHTS if split == "train" else INTENT_WEIGHTS
        self.intents = list(weights)
        self.weights = [weights[i] for i in self.intents]

    # -- user text -------------------------------------------------------------------------

    def _template(self, group: str) -> str:
        """A phrasing for a template group: train mixes in compositions and ASR rewrites that never
        touch a held-out template; heldout draws its own templates exactly as before."""
        rng = self.rng
        if self.split != "train":
            return rng.choice(self.templates[group])
        template = rng.choice(self.templates[group])
        if rng.random() < COMPOSED_FRACTION:
            composed = (compose(group, rng) for _ in range(20))
            template = next((t for t in composed if not leaks_heldout(t)), template)
        if rng.random() < 0.25:
            rewritten = asr_rewrite(template, rng)
            if not leaks_heldout(rewritten):
                return rewritten
        return template

    def _user_with_id(self, group: str, order_id: str | None, *, bad: bool = False) -> tuple[str, str]:
        """(text, template) for an order question; the id must parse back exactly (or not at all)."""
        rng = self.rng
        for _ in range(50):
            template = self._template(group)
            if order_id is None:
                slot = {}
            else:
                slot = {"id": bad_spoken_id(order_id, rng) if bad else spoken_id(order_id, rng)}
                if self.split == "train" and not bad and rng.random() < ID_CONTEXT:
                    slot["id"] = f"{rng.choice(self.context_words)} {slot['id']}"
            text = noisy(template, rng, slot)
            if _n_words(text) > MAX_USER_WORDS:
                continue
            want = None if (bad or order_id is None) else order_id
            if parse_order_id(text) == want:
                return text, template
        # Fallback: plain digits and no noise always parse.
        template = self.templates[group][0]
        slot = {} if order_id is None else {"id": order_id if not bad else order_id[:3]}
        return noisy(template, rng, slot, light=True), template

    # -- pieces ----------------------------------------------------------------------------

    def _direct(self, intent: str) -> tuple[str, str, str, list[str]]:
        template = self._template(intent)
        light = intent in ("greeting", "thanks", "goodbye") and self.rng.random() < 0.5
        text = noisy(template, self.rng, {}, light=light)
        answer, facts = DIRECT_ANSWERS[intent]
        return text, template, answer, list(facts)

    def _fresh_name(self) -> str:
        """A name made up for this one question (drawn again until training may name it): no fixed
        list the model could learn by heart."""
        while True:
            name = fresh_product_name(self.rng, self.products)
            if train_may_name(self.store, name):
                return name

    def _copy_practice(self, result: dict, meta: dict) -> dict:
        """Train only: sometimes a tool result whose facts are drawn from other database rows, so the
        answer must copy them from the result (each id or product otherwise always has the same
        facts, which a small model memorises instead of reading)."""
        if self.split != "train" or not result.get("found") or self.rng.random() >= COPY_PRACTICE:
            return result
        rng = self.rng
        meta["copy_practice"] = True
        if "order_id" in result:
            # Status and its dates from one row, carrier and total from others.
            a, b, c = (self.store.orders[i] for i in rng.sample(self.ids, 3))
            row = {**a, "total_cents": b["total_cents"], "carrier": c["carrier"] or a["carrier"]}
            return order_result(result["order_id"], row)
        a, b = (self.store.products[p] for p in rng.sample(self.products, 2))
        row = {**a, "price_cents": b["price_cents"]}
        return stock_result(result["product"], row)

    def _pick_order(self) -> str:
        status = self.rng.choice(STATUSES)
        return self.rng.choice(self.ids_by_status[status])

    def _history(self) -> tuple[list[dict], dict]:
        """One earlier exchange (user + assistant answer) unrelated to the new question."""
        rng = self.rng
        r = rng.random()
        if r < 0.45:
            intent = rng.choice(["greeting", "greeting", "greeting", "hours", "shipping", "return_policy"])
            text, template, answer, _ = self._direct(intent)
        elif r < 0.8:
            intent = rng.choice(ID_INTENTS)
            oid = self._pick_order()
            text, template = self._user_with_id(intent, oid)
            answer, _ = order_answer(intent, self.store.lookup_order(oid))
        else:
            intent = "stock"
            name = rng.choice(self.products)
            text, template, _ = self._stock_text(name)
            answer, _ = stock_answer(self.store.check_stock(name))
        return (
            [{"role": "user", "content": text}, {"role": "assistant", "content": answer}],
            {"history_intent": intent, "history_template": template},
        )

    def _stock_text(self, name: str) -> tuple[str, str, str]:
        """(text, template, the product as said in it)."""
        for _ in range(20):
            template = self._template("stock")
            mention = product_mention(name, self.rng, self.store)
            text = noisy(template, self.rng, {"product": mention})
            if _n_words(text) <= MAX_USER_WORDS:
                return text, template, mention
        template = self.templates["stock"][0]
        return noisy(template, self.rng, {"product": name}, light=True), template, name

    def _two_calls(
        self,
        prefix: list[dict],
        user: str,
        tool: str,
        args: dict,
        result: dict,
        answer: str,
        facts: list[str],
        intent: str,
        meta: dict,
    ) -> list[Example]:
        system = [{"role": "system", "content": SYSTEM_PROMPT}]
        msgs1 = system + prefix + [{"role": "user", "content": user}]
        call = tool_call_target(tool, args)
        ex1 = Example(msgs1, call, intent, [], {**meta, "call": 1})
        if self.split == "train" and self.rng.random() < TOOL_ERRORS:
            # Train only: the model's own call came out broken, so the tool answers with an error.
            broken = self._broken_arguments(args)
            call, result = tool_call_target(tool, broken), self.store.execute(tool, broken)
            answer, facts = TOOL_ERROR_ANSWERS[tool]
            meta = {**meta, "tool_error": result["error"]}
            meta.pop("copy_practice", None)  # the practice result was replaced by the error
        call_msg = {
            "role": "assistant",
            "content": call["content"],
            "tool_calls": [{"id": "call_1", **call["tool_calls"][0]}],
        }
        tool_msg = {"role": "tool", "tool_call_id": "call_1", "content": json.dumps(result)}
        ex2 = Example(
            msgs1 + [call_msg, tool_msg],
            {"role": "assistant", "content": answer},
            intent,
            facts,
            {**meta, "call": 2},
        )
        return [ex1, ex2]

    def _broken_arguments(self, args: dict) -> str:
        """Arguments as a small model breaks them: cut off, or under a garbled key."""
        text = json.dumps(args)
        if self.rng.random() < 0.7:
            return text[: self.rng.randint(1, len(text) - 2)]
        key, value = next(iter(args.items()))
        cut = self.rng.randint(1, len(key) - 1)
        return json.dumps({key[cut:] + key[:cut]: value})

    def _one_call(
        self, prefix: list[dict], user: str, answer: str, facts: list[str], intent: str, meta: dict
    ) -> list[Example]:
        msgs = [{"role": "system", "content": SYSTEM_PROMPT}] + prefix + [{"role": "user", "content": user}]
        return [Example(msgs, {"role": "assistant", "content": answer}, intent, facts, {**meta, "call": 1})]

    # -- turns -----------------------------------------------------------------------------

    def turn(self) -> list[Example]:
        rng = self.rng
        intent = rng.choices(self.intents, self.weights)[0]
        prefix: list[dict] = []
        meta: dict = {"split": self.split}
        want_history = rng.random() < (0.5 if intent in ("thanks", "goodbye") else HISTORY_FRACTION)

        if intent in ID_INTENTS or intent == "unknown_order":
            asked = intent if intent in ID_INTENTS else rng.choice(ID_INTENTS)
            oid = self._pick_order() if intent in ID_INTENTS else rng.choice(self.unknown_ids)
            if want_history and rng.random() < 0.6:
                # The caller gives the number after the agent asked for it (or asked to repeat it).
                if rng.random() < 0.6:
                    first, t0 = self._user_with_id(f"no_id:{asked}", None)
                    ask = DIRECT_ANSWERS["ask_order_id"][0]
                    meta["history_intent"] = "ask_order_id"
                else:
                    first, t0 = self._user_with_id(asked, oid, bad=True)
                    ask = DIRECT_ANSWERS["bad_order_id"][0]
                    meta["history_intent"] = "bad_order_id"
                meta["history_template"] = t0
                prefix = [{"role": "user", "content": first}, {"role": "assistant", "content": ask}]
                user, template = self._user_with_id("id_reply", oid)
                meta["template_group"] = "id_reply"
            else:
                if want_history:
                    prefix, hmeta = self._history()
                    meta.update(hmeta)
                user, template = self._user_with_id(asked, oid)
                meta["template_group"] = asked
            result = self._copy_practice(self.store.lookup_order(oid), meta)
            answer, facts = order_answer(asked, result)
            meta.update(
                template=template, order_id=oid, asked_intent=asked, status=result.get("status", "unknown")
            )
            return self._two_calls(
                prefix, user, "lookup_order", {"order_id": oid}, result, answer, facts, intent, meta
            )

        if want_history:
            prefix, hmeta = self._history()
            meta.update(hmeta)

        if intent in ("stock", "unknown_product"):
            if intent == "stock":
                name = rng.choice(self.products)
            elif self.split == "train" and rng.random() < FRESH_NAMES:
                name = self._fresh_name()
                meta["made_up_product"] = True
            else:
                name = rng.choice(self.missing)
            user, template, said = self._stock_text(name)
            result = self._copy_practice(self.store.check_stock(said), meta)
            answer, facts = stock_answer(result)
            meta.update(template=template, template_group="stock", product=name)
            return self._two_calls(
                prefix, user, "check_stock", {"product": said}, result, answer, facts, intent, meta
            )

        if intent == "ask_order_id":
            asked = rng.choice(ID_INTENTS)
            user, template = self._user_with_id(f"no_id:{asked}", None)
            answer, facts = DIRECT_ANSWERS["ask_order_id"]
            meta.update(template=template, template_group=f"no_id:{asked}", asked_intent=asked)
            return self._one_call(prefix, user, answer, list(facts), intent, meta)

        if intent == "bad_order_id":
            asked = rng.choice(ID_INTENTS)
            oid = self._pick_order()
            user, template = self._user_with_id(asked, oid, bad=True)
            answer, facts = DIRECT_ANSWERS["bad_order_id"]
            meta.update(template=template, template_group=asked, asked_intent=asked, garbled_id=oid)
            return self._one_call(prefix, user, answer, list(facts), intent, meta)

        user, template, answer, facts = self._direct(intent)
        meta.update(template=template, template_group=intent)
        return self._one_call(prefix, user, answer, facts, intent, meta)


def make_examples(
    n: int, *, seed: int = 0, split: str = "train", store: Store | None = None, new_products: bool = True
) -> list[Example]:
    """``n`` examples (model calls) of the given split; the same seed gives the same list.

    ``new_products=False`` lets questions name any catalog product (held-out phrasings and order ids
    stay unseen); the default keeps each split's product names apart too (a harder copy test)."""
    gen = _Generator(seed, split, store if store is not None else Store(), new_products)
    out: list[Example] = []
    while len(out) < n:
        out.extend(gen.turn())
    return out[:n]


def answer_prompts(n: int = 64, seed: int = 99) -> list[list[dict]]:
    """Held-out support-line conversations whose reply is a spoken answer (so each has a TTFAT), as
    OpenAI message lists: what `ttfat bench-llm` sends."""
    examples = make_examples(4 * n, seed=seed, split="heldout")
    return [e.messages for e in examples if not e.target.get("tool_calls")][:n]


def _main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(description="Print or write generated examples as JSON lines.")
    ap.add_argument("-n", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", default="train", choices=SPLITS)
    ap.add_argument("--out", default=None, help="write JSONL here instead of stdout")
    args = ap.parse_args(argv)
    exs = make_examples(args.n, seed=args.seed, split=args.split)
    lines = [json.dumps(e.to_dict()) for e in exs]
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    _main()
