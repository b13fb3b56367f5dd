"""Training and evaluation data for the bundled support-line model (DESIGN.md section 6).

One :class:`Example` is one model call. A data turn (order or stock question) gives two calls:
call 1 maps the caller's words to a short filler plus a tool call; call 2 sees the tool result and
speaks the answer. Every other intent is one call with a direct answer. Answers follow one fixed
template per intent and status, with numbers and dates copied verbatim from the tool result, so a
~5M parameter model can learn them.

Callers speak through ASR: user text is lowercase, mostly unpunctuated, with fillers, false starts
and order ids in many spoken forms (see :func:`llm.spoken.say_order_id`).

``split="heldout"`` uses phrasing templates, order ids and product names that ``split="train"`` never
uses (a stable hash puts ~15% of each into heldout).
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import math
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from llm.phrasing import compose, extra_missing_products, fresh_product_name
from llm.spoken import ID_FORMS, digits, parse_order_id, say_order_id
from llm.store import STATUSES, STORE_NAME, SYSTEM_PROMPT, Store, order_result, stock_result

HELDOUT_FRACTION = 0.15
SPLITS = ("train", "heldout")

# ---------------------------------------------------------------------------------------------
# User phrasings (lowercase, no punctuation: ASR style). {id} is an order id, {product} a product.
# Avoid number words and digits in templates: only the id may spell digits.
# ---------------------------------------------------------------------------------------------

ID_INTENTS = ("order_status", "delivery_date", "cancel_order", "change_order", "return_refund")

USER_TEMPLATES: dict[str, list[str]] = {
    "order_status": [
        "where is my order {id}",
        "whats the status of order {id}",
        "what's the status of my order {id}",
        "can you check order {id}",
        "i want to check on my order the number is {id}",
        "i'm calling about order {id}",
        "can you tell me where order {id} is",
        "order number {id} where is it",
        "has my order {id} shipped yet",
        "i need an update on order {id}",
        "can you look up order {id} please",
        "what's going on with my order {id}",
        "track order {id}",
        "i'd like to track my package it's order {id}",
        "status of order {id}",
        "check the status of {id}",
        "my order number is {id} can you tell me the status",
        "i placed an order it's {id} what's happening with it",
        "could you check my order it's number {id}",
        "i never got an update on order {id}",
        "i'm calling to check on an order {id}",
        "is order {id} on its way",
        "can i get the status on {id}",
        "where's my package the order is {id}",
        "what happened with my order {id}",
        "i'm checking on order number {id}",
        "can you find my order {id}",
        "what's the status on order number {id}",
    ],
    "delivery_date": [
        "when will order {id} arrive",
        "when is my order {id} going to get here",
        "when will i get my order {id}",
        "what's the delivery date for order {id}",
        "when does order {id} arrive",
        "when should i expect order {id}",
        "how long until order {id} gets here",
        "is order {id} coming today",
        "when's my package coming it's order {id}",
        "what day will order {id} be delivered",
        "can you tell me when order {id} will be delivered",
        "i need to know when {id} will arrive",
        "when can i expect my delivery order number {id}",
        "order {id} when is it coming",
        "what's the eta on order {id}",
        "when will my package arrive it's order {id}",
        "has order {id} been delivered yet",
        "when do i get order {id}",
        "what's the expected delivery for {id}",
        "how soon will order {id} get here",
        "when is {id} supposed to arrive",
    ],
    "cancel_order": [
        "i want to cancel order {id}",
        "can i cancel my order {id}",
        "please cancel order {id}",
        "i need to cancel an order it's {id}",
        "cancel order number {id}",
        "i'd like to cancel my order {id}",
        "is it too late to cancel order {id}",
        "i changed my mind cancel order {id}",
        "how do i cancel order {id}",
        "can you stop order {id} from shipping",
        "i don't want order {id} anymore",
        "i ordered by mistake please cancel {id}",
        "cancel my order {id} please",
        "i want my order {id} cancelled",
        "can you cancel {id}",
        "i'd like to cancel the order number {id}",
        "is there a way to cancel order {id}",
        "i need order {id} cancelled",
    ],
    "change_order": [
        "i need to change the address on order {id}",
        "can i change my shipping address on order {id}",
        "i want to change the item in order {id}",
        "can i swap an item in my order {id}",
        "i moved can you update the address on order {id}",
        "i need to change the size on order {id}",
        "can i add something to order {id}",
        "i want to change the color on my order {id}",
        "wrong address on order {id} can you fix it",
        "please update the delivery address on {id}",
        "can i change order {id}",
        "i made a mistake in order {id} can i change it",
        "can you send order {id} somewhere else",
        "i want to modify my order {id}",
        "can i remove an item from order {id}",
        "i'd like to change my order {id}",
        "i need to update my order number {id}",
        "could you change the shipping address on {id}",
    ],
    "return_refund": [
        "i want to return order {id}",
        "how do i return my order {id}",
        "can i return order {id}",
        "i'd like a refund on order {id}",
        "where is my refund on order {id}",
        "i want my money back on order {id}",
        "can i send back order {id}",
        "i need to return something from order {id}",
        "did you get my return on order {id}",
        "i'm still waiting on a refund order {id}",
        "has my refund gone through order number {id}",
        "i want to return the stuff from {id}",
        "can i get a refund on order {id}",
        "the item in order {id} doesn't fit can i return it",
        "i don't like what i got in order {id} can i return it",
        "what about my refund on {id}",
        "i returned order {id} where's my money",
        "can order {id} be returned",
    ],
    "stock": [
        "do you have {product} in stock",
        "is the {product} in stock",
        "do you have any {product}",
        "are there any {product} left",
        "is {product} available",
        "can i still buy the {product}",
        "how many {product} do you have",
        "do you sell {product}",
        "is the {product} sold out",
        "when will the {product} be back in stock",
        "check stock on {product}",
        "i want to buy {product} is it in stock",
        "how much is the {product} and do you have it",
        "do you guys carry {product}",
        "is the {product} available right now",
        "i'd like to know if {product} is in stock",
        "have you got {product} in stock",
        "what's the price of the {product}",
        "can you check if you have {product}",
        "i need {product} do you have it in stock",
        "is there any {product} available",
        "are you out of {product}",
    ],
    "return_policy": [
        "what's your return policy",
        "how do returns work",
        "how long do i have to return something",
        "how many days do i have to send something back",
        "how long does a refund take",
        "when do i get my money back after a return",
        "do you accept returns",
        "what's the return window",
        "how long do refunds take",
        "is there a time limit on returns",
        "how does the refund work",
        "what is your refund policy",
        "can i return stuff after a month",
        "how long until my refund shows up on my card",
    ],
    "hours": [
        "what are your hours",
        "when are you open",
        "are you open on sunday",
        "what time do you close",
        "what time do you open tomorrow",
        "are you open on weekends",
        "what are your opening hours",
        "how late are you open",
        "when can i call you",
        "is the phone line open on saturday",
        "what time does customer service open",
        "what days are you open",
        "when does your support line close",
        "what are your business hours",
    ],
    "shipping": [
        "how much is shipping",
        "do you have free shipping",
        "what does shipping cost",
        "how much do you charge for delivery",
        "is shipping free",
        "what are the shipping fees",
        "how much is delivery",
        "do i have to pay for shipping",
        "when is shipping free",
        "is there a minimum for free shipping",
        "what's the delivery charge",
        "how much does it cost to ship an order",
    ],
    "greeting": [
        "hi",
        "hello",
        "hey",
        "hi there",
        "hello is this northwind",
        "good morning",
        "good afternoon",
        "hey how are you",
        "hello anyone there",
        "hi i have a question",
        "yes hello",
        "hello can you hear me",
        "good evening",
        "hi is this the store",
    ],
    "thanks": [
        "thanks",
        "thank you",
        "thank you so much",
        "great thanks",
        "ok thanks a lot",
        "perfect thank you",
        "that's helpful thanks",
        "awesome thanks",
        "thanks for your help",
        "cool thank you",
        "ok great thank you",
        "i appreciate it",
    ],
    "goodbye": [
        "bye",
        "goodbye",
        "ok bye",
        "that's all bye",
        "no that's it bye",
        "have a nice day bye",
        "i'm done goodbye",
        "see you",
        "that's everything goodbye",
        "ok that's all i needed bye",
        "bye bye",
        "talk to you later",
    ],
    "agent": [
        "can i talk to a person",
        "i want to speak to a human",
        "agent",
        "representative please",
        "let me talk to a real person",
        "can you transfer me to someone",
        "i need a human",
        "get me a manager",
        "customer service representative",
        "operator",
        "i want to talk to an agent",
        "put me through to a real person",
        "is there a person i can talk to",
        "speak to someone please",
    ],
    "out_of_scope": [
        "what's the weather tomorrow",
        "tell me a joke",
        "what's my bank balance",
        "book a flight to chicago",
        "how do i make pancakes",
        "who won the game last night",
        "set an alarm",
        "what's the capital of france",
        "can you play some music",
        "how do i reset my email password",
        "what's the exchange rate on euros",
        "can you recommend a good restaurant",
        "what time is it in tokyo",
        "how far away is the moon",
        "translate hello into spanish",
        "what's the meaning of life",
        "can you help me with my taxes",
        "order me a pizza",
        "call my mom",
        "what movies are playing tonight",
        "how do i change a tire",
        "is it going to rain today",
        "write me a poem",
        "what's in the news today",
        "who is the president",
        "how many calories are in an apple",
        "remind me to buy milk",
        "turn on the lights",
    ],
}

# Order questions without a number: the agent asks for it.
NO_ID_TEMPLATES: dict[str, list[str]] = {
    "order_status": [
        "where is my order",
        "can you check my order status",
        "i want to track my order",
        "what's the status of my order",
        "i'm calling about my order",
        "has my order shipped",
        "i need an update on my order",
        "can you find my package",
        "my order hasn't arrived yet",
        "i want to know where my package is",
    ],
    "delivery_date": [
        "when will my order arrive",
        "when is my package coming",
        "when will i get my stuff",
        "what's the delivery date of my order",
        "when should my order get here",
        "how long until my order arrives",
    ],
    "cancel_order": [
        "i want to cancel my order",
        "can i cancel an order",
        "please cancel my order",
        "i need to cancel something i ordered",
        "how do i cancel my order",
        "i want to cancel a purchase",
    ],
    "change_order": [
        "i need to change my shipping address",
        "can i change my order",
        "i want to change an item in my order",
        "i need to update the address on my order",
        "can i modify my order",
        "i ordered the wrong size can i change it",
    ],
    "return_refund": [
        "i want to return my order",
        "where is my refund",
        "i'd like to return something i bought",
        "i want my money back",
        "can i send my order back",
        "i'm waiting on a refund",
    ],
}

# What callers say after the agent asked for the number.
ID_REPLY_TEMPLATES = [
    "{id}",
    "it's {id}",
    "yeah it's {id}",
    "sure it's {id}",
    "the number is {id}",
    "order number {id}",
    "my order number is {id}",
    "it is {id}",
    "ok it's {id}",
    "yes it's {id}",
    "i think it's {id}",
    "let me see it's {id}",
    "the order is {id}",
    "that's {id}",
    "it should be {id}",
    "i have it here {id}",
    "number {id}",
    "sorry it's {id}",
]

# Products that the store does not carry (check_stock answers found=false).
MISSING_PRODUCTS = [
    "lawn mower",
    "television",
    "sofa",
    "refrigerator",
    "car tires",
    "guitar",
    "microwave",
    "washing machine",
    "printer ink",
    "bicycle",
    "piano",
    "drone",
    "projector",
    "dishwasher",
    "treadmill",
    "kayak",
    "charcoal grill",
    "espresso machine",
    "sewing machine",
    "hammock",
    "chainsaw",
    "baby crib",
    "stroller",
    "mattress",
    "vinyl records",
    "golf clubs",
    "snowboard",
    "fish tank",
    "hot tub",
    "ceiling fan",
    "wedding dress",
    "motorcycle",
    "space heater",
    "air conditioner",
    "video camera",
    "electric guitar",
]

# ---------------------------------------------------------------------------------------------
# Answers: one template per intent and status. Braced names are tool-result fields.
# ---------------------------------------------------------------------------------------------

FILLER = {"lookup_order": "Let me look up that order.", "check_stock": "Let me check that for you."}

REPEAT_ID = "Could you say the four digit order number again?"

# What the agent says when a tool call of its own came back as an error (arguments cut off or garbled):
# it asks again and states nothing, since it learned nothing.
TOOL_ERROR_ANSWERS: dict[str, tuple[str, list[str]]] = {
    "lookup_order": ("Sorry, I couldn't look that up. " + REPEAT_ID, ["four digit order number"]),
    "check_stock": ("Sorry, I couldn't check that. Which product was it?", ["Which product"]),
}

DIRECT_ANSWERS: dict[str, tuple[str, list[str]]] = {
    "ask_order_id": ("Sure, what is your four digit order number?", ["four digit order number"]),
    "bad_order_id": ("Sorry, I didn't catch the whole number. " + REPEAT_ID, ["four digit order number"]),
    "return_policy": (
        "You can return items within thirty days of delivery, and refunds reach your card "
        "in five business days.",
        ["thirty days", "five business days"],
    ),
    "hours": (
        "We are open Monday to Saturday, from eight in the morning to eight at night.",
        ["Monday to Saturday", "eight in the morning", "eight at night"],
    ),
    "shipping": (
        "Shipping is free on orders over fifty dollars, otherwise it costs five dollars and "
        "ninety nine cents.",
        ["fifty dollars", "five dollars and ninety nine cents"],
    ),
    "greeting": (f"Hi, thanks for calling {STORE_NAME}. How can I help you today?", [STORE_NAME]),
    "thanks": ("You're welcome. Is there anything else I can help you with?", ["welcome"]),
    "goodbye": (f"Thanks for calling {STORE_NAME}. Have a great day, goodbye.", ["goodbye"]),
    "agent": (
        "Of course, I will connect you with a person now. Please stay on the line.",
        ["connect you with a person"],
    ),
    "out_of_scope": (
        "Sorry, I can't help with that. I can help with orders, deliveries, returns and product stock.",
        ["can't help with that"],
    ),
}

_SAME = {
    "processing": ("Your order is still processing and ships on {ships}.", ["processing", "{ships}"]),
    "delivered": ("Your order was delivered on {delivered}.", ["delivered", "{delivered}"]),
    "cancelled": (
        "Your order was cancelled, and {refund} was refunded to your card.",
        ["cancelled", "{refund}"],
    ),
    "returned": (
        "Your order was returned, and {refund} was refunded to your card.",
        ["returned", "{refund}"],
    ),
}

ORDER_ANSWERS: dict[str, dict[str, tuple[str, list[str]]]] = {
    "order_status": {
        **_SAME,
        "shipped": (
            "Your order has shipped with {carrier} and should arrive on {eta}.",
            ["shipped", "{carrier}", "{eta}"],
        ),
        "out_for_delivery": (
            "Your order is out for delivery with {carrier} and should arrive today, {eta}.",
            ["out for delivery", "{carrier}", "{eta}"],
        ),
    },
    "delivery_date": {
        **_SAME,
        "shipped": (
            "Your order should arrive on {eta}. It shipped with {carrier}.",
            ["{eta}", "shipped", "{carrier}"],
        ),
        "out_for_delivery": (
            "Your order should arrive today, {eta}. It is out for delivery with {carrier}.",
            ["{eta}", "out for delivery", "{carrier}"],
        ),
    },
    "cancel_order": {
        "processing": (
            "Your order has not shipped yet, so it can still be cancelled. Ask for an agent and "
            "a person will cancel it.",
            ["not shipped yet", "agent"],
        ),
        "shipped": (
            "Your order has already shipped with {carrier}, so it can't be cancelled. You can "
            "return it within thirty days of delivery.",
            ["already shipped", "{carrier}", "thirty days"],
        ),
        "out_for_delivery": (
            "Your order is already out for delivery, so it can't be cancelled. You can "
            "return it within thirty days of delivery.",
            ["out for delivery", "thirty days"],
        ),
        "delivered": (
            "Your order was delivered on {delivered}, so it can't be cancelled. You can return "
            "it within thirty days of delivery.",
            ["{delivered}", "thirty days"],
        ),
        "cancelled": (
            "Your order is already cancelled, and {refund} was refunded to your card.",
            ["already cancelled", "{refund}"],
        ),
        "returned": (
            "Your order was already returned, and {refund} was refunded to your card.",
            ["already returned", "{refund}"],
        ),
    },
    "change_order": {
        "processing": (
            "Your order has not shipped yet, so it can still be changed. Ask for an agent and "
            "a person will change it.",
            ["not shipped yet", "agent"],
        ),
        "shipped": (
            "Your order has already shipped with {carrier}, so it can't be changed anymore.",
            ["already shipped", "{carrier}"],
        ),
        "out_for_delivery": (
            "Your order is already out for delivery, so it can't be changed anymore.",
            ["out for delivery"],
        ),
        "delivered": (
            "Your order was delivered on {delivered}, so it can't be changed anymore.",
            ["{delivered}"],
        ),
        "cancelled": ("Your order was cancelled, so it can't be changed anymore.", ["cancelled"]),
        "returned": ("Your order was returned, so it can't be changed anymore.", ["returned"]),
    },
    "return_refund": {
        "processing": (
            "Your order has not shipped yet, so you can cancel it instead. Ask for an agent and "
            "a person will cancel it.",
            ["not shipped yet", "agent"],
        ),
        "shipped": (
            "Your order is on its way with {carrier}. Once it arrives, you can return it within thirty days.",
            ["{carrier}", "thirty days"],
        ),
        "out_for_delivery": (
            "Your order is out for delivery today. Once it arrives, you can return it within thirty days.",
            ["out for delivery", "thirty days"],
        ),
        "delivered": (
            "Your order was delivered on {delivered}, so you can return it within thirty days of delivery.",
            ["{delivered}", "thirty days"],
        ),
        "cancelled": (
            "Your order was cancelled, and {refund} was refunded to your card.",
            ["cancelled", "{refund}"],
        ),
        "returned": (
            "Your return was received, and {refund} was refunded to your card.",
            ["return was received", "{refund}"],
        ),
    },
}

UNKNOWN_ORDER_ANSWER = ("Sorry, I couldn't find that order. " + REPEAT_ID, ["couldn't find that order"])
STOCK_ANSWERS = {
    "in_stock": ("Yes, we have {in_stock_words} in stock at {price} each.", ["{in_stock_words}", "{price}"]),
    "out_of_stock": ("Sorry, that is out of stock until {restock}.", ["out of stock", "{restock}"]),
    "not_found": (
        "Sorry, I couldn't find that product. We may not carry it.",
        ["couldn't find that product"],
    ),
}


def order_answer(intent: str, result: dict) -> tuple[str, list[str]]:
    """The spoken answer (and its facts) for an order intent given a lookup_order result."""
    if not result.get("found"):
        return UNKNOWN_ORDER_ANSWER
    text, facts = ORDER_ANSWERS[intent][result["status"]]
    return text.format(**result), [f.format(**result) for f in facts]


def stock_answer(result: dict) -> tuple[str, list[str]]:
    """The spoken answer (and its facts) for a check_stock result."""
    if not result.get("found"):
        text, facts = STOCK_ANSWERS["not_found"]
    elif result["in_stock"] > 0:
        text, facts = STOCK_ANSWERS["in_stock"]
    else:
        text, facts = STOCK_ANSWERS["out_of_stock"]
    return text.format(**result), [f.format(**result) for f in facts]


# ---------------------------------------------------------------------------------------------
# Splits
# ---------------------------------------------------------------------------------------------


def _h(*parts: str) -> int:
    return int(hashlib.sha1("\x1f".join(parts).encode()).hexdigest()[:12], 16)


def split_items(items: list[str], tag: str, split: str) -> list[str]:
    """Deterministic ~15% / 85% partition of a list (heldout gets at least one item)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    ranked = sorted(items, key=lambda s: (_h(tag, s), s))
    k = max(1, math.ceil(HELDOUT_FRACTION * len(ranked)))
    held = set(ranked[:k])
    return [s for s in items if (s in held) == (split == "heldout")]


def in_heldout_id(order_id: str) -> bool:
    """Whether an order id (in the database or not) belongs to the heldout split."""
    return _h("order_id", order_id) % 100 < round(100 * HELDOUT_FRACTION)


def templates_for(intent: str, split: str) -> list[str]:
    """The user templates of an intent in a split ("no_id:<intent>" and "id_reply" also work)."""
    if intent == "id_reply":
        return split_items(ID_REPLY_TEMPLATES, "id_reply", split)
    if intent.startswith("no_id:"):
        return split_items(NO_ID_TEMPLATES[intent[6:]], intent, split)
    return split_items(USER_TEMPLATES[intent], intent, split)


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


HELDOUT_MISSING = split_items(MISSING_PRODUCTS, "missing_product", "heldout")


def _train_may_name(store: Store, name: str) -> bool:
    """An unknown product training may name: the store carries nothing it matches (any split) and it
    neither holds nor sits inside a held-out missing name."""
    return store.find_product(name) is None and not _overlaps_any(name, HELDOUT_MISSING)


# ---------------------------------------------------------------------------------------------
# ASR-style noise
# ---------------------------------------------------------------------------------------------

FILLERS = ["um", "uh", "like", "uh", "um"]
PREFIXES = [
    "hi",
    "hello",
    "yeah",
    "yeah hi",
    "hey",
    "ok",
    "so",
    "yes",
    "hi there",
    "um hi",
    "ok so",
    "hi yeah",
    "hello there",
]
SUFFIXES = ["please", "thanks", "thank you", "real quick", "if you can"]
FALSE_STARTS = ["i", "i want", "can you", "so i", "i was", "where", "i need", "could you"]
CORRECTIONS = ["no sorry", "no wait", "sorry i mean", "i mean", "no no", "sorry"]

# Weights of the id forms (see llm.spoken.say_order_id).
_ID_FORM_WEIGHTS = {
    "digits": 30,
    "spaced": 10,
    "words": 22,
    "words_oh": 4,
    "homophone": 8,
    "for_rest": 5,
    "pairs": 8,
    "pair_words": 10,
    "mixed": 3,
}
assert set(_ID_FORM_WEIGHTS) == set(ID_FORMS)


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
            words.insert(rng.randint(0, len(words)), rng.choice(FILLERS))
        if rng.random() < 0.06:
            words.insert(rng.randint(0, len(words)), rng.choice(FILLERS))
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


def _n_words(text: str) -> int:
    return len(text.split())


# ---------------------------------------------------------------------------------------------
# Examples
# ---------------------------------------------------------------------------------------------


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
        "content": FILLER[name],
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
    "greeting": 5,
    "out_of_scope": 9,
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
# Train only: share of user turns phrased by llm.phrasing instead of a hand-written template.
COMPOSED_FRACTION = 0.6
# Train only: ASR-style rewrites of a template (contractions, casual forms) and droppable words.
ASR_REWRITES = {
    "what's": ["whats", "what is"],
    "where's": ["wheres", "where is"],
    "i'm": ["im", "i am"],
    "i'd": ["i would", "id"],
    "don't": ["dont", "do not"],
    "want to": ["wanna"],
    "going to": ["gonna"],
    "can you": ["could you", "can ya"],
    "do you": ["you", "d you"],
    "my": ["me", "mah"],
}
DROPPABLE = {"the", "my", "a", "an", "is", "it", "of", "on", "you", "to", "do", "can"}


_NO_PLURAL_ENDINGS = ("s", "f", "fe", "y", "o", "ss")
_MASS_NOUNS = {
    "cat litter",
    "sunscreen",
    "conditioner",
    "hand soap",
    "face cream",
    "printer paper",
    "bath towel",
    "bed sheets",
}


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
            p
            for p in split_items(MISSING_PRODUCTS, "missing_product", split)
            if store.find_product(p) is None
        ]
        if split == "train":
            self.missing += [
                p
                for p in extra_missing_products(random.Random(f"ttfat-missing:{seed}"), self.products)
                if _train_may_name(store, p)
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

    def _product_mention(self, name: str) -> str:
        rng = self.rng
        if not name.endswith(_NO_PLURAL_ENDINGS) and name not in _MASS_NOUNS and rng.random() < 0.25:
            if name.endswith(("sh", "ch", "x")):
                return name + "es"
            return name + "s"
        return name

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
            if _train_may_name(self.store, name):
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
            text, template = self._stock_text(name)
            answer, _ = stock_answer(self.store.check_stock(name))
        return (
            [{"role": "user", "content": text}, {"role": "assistant", "content": answer}],
            {"history_intent": intent, "history_template": template},
        )

    def _stock_text(self, name: str) -> tuple[str, str]:
        for _ in range(20):
            template = self._template("stock")
            text = noisy(template, self.rng, {"product": self._product_mention(name)})
            if _n_words(text) <= MAX_USER_WORDS:
                return text, template
        template = self.templates["stock"][0]
        return noisy(template, self.rng, {"product": name}, light=True), template

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
            user, template = self._stock_text(name)
            result = self._copy_practice(self.store.check_stock(name), meta)
            answer, facts = stock_answer(result)
            meta.update(template=template, template_group="stock", product=name)
            return self._two_calls(
                prefix, user, "check_stock", {"product": name}, result, answer, facts, intent, meta
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


# ---------------------------------------------------------------------------------------------
# Real user queries (read from the shared data directory; never copied into the repo)
# ---------------------------------------------------------------------------------------------

# CLINC150 intents a store support line handles; every other CLINC150 intent (and "oos") is out of scope.
CLINC_IN_SCOPE = {"order_status", "greeting", "goodbye", "thank_you", "what_can_i_ask_you"}
# Too context-dependent to call either way: left out.
CLINC_AMBIGUOUS = {"yes", "no", "maybe", "repeat", "cancel"}


def shared_text_dir() -> Path:
    env = os.environ.get("TTFAT_SHARED_DATA")
    if env:
        p = Path(env)
        return p / "text" if (p / "text").is_dir() else p
    return Path(__file__).resolve().parents[2] / "shared" / "data" / "text"


def real_queries(limit: int | None = None) -> list[dict]:
    """Real user queries: CLINC150 (test + oos_test), Banking77 (test), ABCD sample (customer openings).

    Returns ``[{"text", "source", "label", "out_of_scope"}]`` in a fixed shuffled order (so a ``limit``
    mixes the sources). Missing sources are skipped; an empty list when nothing is there.
    """
    root = shared_text_dir()
    out: list[dict] = []
    clinc = root / "clinc150" / "data_full.json"
    if clinc.exists():
        data = json.loads(clinc.read_text())
        for part in ("test", "oos_test"):
            for text, label in data.get(part, []):
                if label in CLINC_AMBIGUOUS:
                    continue
                out.append(
                    {
                        "text": text,
                        "source": "clinc150",
                        "label": label,
                        "out_of_scope": label not in CLINC_IN_SCOPE,
                    }
                )
    banking = root / "banking77" / "test.csv"
    if banking.exists():
        with banking.open(newline="") as f:
            for row in csv.DictReader(f):
                out.append(
                    {
                        "text": row["text"],
                        "source": "banking77",
                        "label": row["category"],
                        "out_of_scope": True,
                    }
                )
    abcd = root / "abcd_sample" / "abcd_sample.json"
    if abcd.exists():
        for conv in json.loads(abcd.read_text()):
            flow = conv.get("scenario", {}).get("flow", "")
            sub = conv.get("scenario", {}).get("subflow", "")
            for speaker, text in conv.get("original", []):
                # The caller's first real request (skip bare greetings and names).
                if speaker == "customer" and _n_words(text) >= 4:
                    out.append(
                        {"text": text, "source": "abcd", "label": f"{flow}/{sub}", "out_of_scope": False}
                    )
                    break
    random.Random(0).shuffle(out)
    return out if limit is None else out[:limit]


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

__all__ = [
    "Example",
    "make_examples",
    "real_queries",
    "order_answer",
    "stock_answer",
    "templates_for",
    "split_items",
    "in_heldout_id",
    "spoken_id",
    "all_template_groups",
    "SYSTEM_PROMPT",
]
