"""Compositional caller phrasings for training the bundled support-line model (DESIGN.md section 6).

The hand-written templates in :mod:`llm.data` give 10-28 wordings per intent; a 5.6M parameter model
trained on them memorises the wordings and misreads new ones. Here each intent is built from
independent pools (opener x request x object x closer), so training sees thousands of surface forms
and has to learn which words carry the intent. Used by ``split="train"`` only: :mod:`llm.data` drops
any composition that contains (or is contained in) a held-out template, so held-out phrasings stay
unseen. Same rules as the templates: lowercase, no punctuation, no digits or number words (only
``{id}`` may spell digits), ``{product}`` is a product mention.
"""

from __future__ import annotations

import random

OPENERS = [
    "hi",
    "hello",
    "hey",
    "hi there",
    "yeah hi",
    "um hi",
    "good morning",
    "good afternoon",
    "so",
    "ok so",
    "yes",
    "yeah so",
    "quick question",
    "i have a question",
    "i was wondering",
    "i was hoping you could help",
    "i need some help",
    "hi i need help",
    "i'm calling because",
    "sorry to bother you but",
    "excuse me",
    "hi um",
    "hello yes",
    "hey there",
    "right so",
]
CLOSERS = [
    "please",
    "thanks",
    "thank you",
    "if you can",
    "if you could",
    "real quick",
    "as soon as possible",
    "i've been waiting a while",
    "i'm getting worried",
    "thanks a lot",
    "please help",
    "i'd appreciate it",
    "that would be great",
    "if that's possible",
]

# Order objects: {o} in a request. The trailing forms only fit when {o} ends the request.
ORDER_OBJECTS = [
    "my order {id}",
    "order {id}",
    "order number {id}",
    "my order number {id}",
    "the order {id}",
    "my package {id}",
    "package {id}",
    "my purchase {id}",
    "my shipment {id}",
    "my delivery {id}",
    "order no {id}",
]
TRAILING_ORDER_OBJECTS = [
    "my order it's {id}",
    "my order the number is {id}",
    "my order which is {id}",
    "my order number is {id}",
    "the order i placed it's {id}",
    "my package the order is {id}",
    "an order it's {id}",
    "my order {id} please",
]
NO_ID_OBJECTS = [
    "my order",
    "an order",
    "my package",
    "my purchase",
    "my delivery",
    "my stuff",
    "the order i placed",
    "my recent order",
    "my last order",
    "my online order",
    "the thing i ordered",
    "my shipment",
]
NO_ID_RETURN_OBJECTS = [
    "something i bought",
    "an item i bought",
    "something i ordered",
    "an item i ordered",
    "the thing i bought",
    "a purchase",
]

REQUESTS: dict[str, list[str]] = {
    "order_status": [
        "where is {o}",
        "where's {o}",
        "what's the status of {o}",
        "what is the status of {o}",
        "can you check {o}",
        "can you check on {o}",
        "could you look up {o}",
        "can you look into {o}",
        "i'd like an update on {o}",
        "any update on {o}",
        "what's happening with {o}",
        "what's up with {o}",
        "i need to track {o}",
        "can you track {o}",
        "help me find {o}",
        "has {o} shipped",
        "did {o} ship yet",
        "has {o} been sent out",
        "is {o} on the way",
        "is {o} still processing",
        "what's the latest on {o}",
        "i'm following up on {o}",
        "just checking on {o}",
        "i haven't heard anything about {o}",
        "can i get an update on {o}",
        "look up {o} for me",
        "pull up {o}",
        "i want to know what happened to {o}",
        "could you find {o}",
        "what's going on with {o}",
        "i'm wondering about {o}",
        "do you know where {o} is",
        "can you see where {o} is",
        "track {o}",
        "i never got {o}",
        "i never received {o}",
        "i still haven't received {o}",
        "what happened with {o}",
        "is {o} lost",
        "i think {o} got lost",
    ],
    "delivery_date": [
        "when will {o} arrive",
        "when will {o} get here",
        "when is {o} coming",
        "when does {o} arrive",
        "when should i expect {o}",
        "when can i expect {o}",
        "what's the delivery date for {o}",
        "what's the eta for {o}",
        "what day will {o} be delivered",
        "how long until {o} arrives",
        "how long will {o} take",
        "is {o} coming today",
        "will {o} arrive tomorrow",
        "will {o} get here by the weekend",
        "when am i getting {o}",
        "how soon will {o} be here",
        "when is {o} being delivered",
        "what's the expected delivery date for {o}",
        "is {o} arriving soon",
        "when do i get {o}",
        "when will {o} be delivered",
        "what time will {o} show up",
        "do you know when {o} will arrive",
        "when is {o} due",
        "when am i supposed to get {o}",
        "when is {o} supposed to show up",
        "when is {o} expected",
        "when is {o} scheduled to arrive",
        "what's the arrival date for {o}",
        "how many days until {o} comes",
    ],
    "cancel_order": [
        "i want to cancel {o}",
        "can i cancel {o}",
        "please cancel {o}",
        "cancel {o}",
        "how do i cancel {o}",
        "is it too late to cancel {o}",
        "i need to cancel {o}",
        "i'd like to cancel {o}",
        "can you cancel {o}",
        "i don't want {o} anymore",
        "can you stop {o}",
        "i want {o} cancelled",
        "i changed my mind about {o} please cancel it",
        "is it possible to cancel {o}",
        "could you cancel {o} for me",
        "i ordered by accident can you cancel {o}",
        "i want to call off {o}",
        "can {o} still be cancelled",
        "i'd like {o} cancelled",
        "please stop {o} from shipping",
        "i no longer need {o}",
    ],
    "change_order": [
        "i need to change the address on {o}",
        "i want to change the shipping address for {o}",
        "can i update the address on {o}",
        "can i change {o}",
        "i need to make a change to {o}",
        "i want to swap an item in {o}",
        "can i change the size in {o}",
        "can i change the color on {o}",
        "can i add something to {o}",
        "can i remove something from {o}",
        "i need to modify {o}",
        "i put the wrong address on {o}",
        "can you ship {o} to a different address",
        "can you edit {o}",
        "i want to change what's in {o}",
        "is it possible to change {o}",
        "can you update {o}",
        "i'd like to make changes to {o}",
        "can i switch the item in {o}",
        "i moved can you change the address on {o}",
        "i made a typo on {o}",
        "i made an error with the address on {o}",
        "the address on {o} is wrong",
        "can you fix the address on {o}",
        "i gave the wrong address for {o}",
    ],
    "return_refund": [
        "i want to return {o}",
        "i'd like to return {o}",
        "how do i return {o}",
        "can i return {o}",
        "can i send back {o}",
        "i want a refund for {o}",
        "can i get a refund on {o}",
        "i need a refund on {o}",
        "where's my refund for {o}",
        "i haven't got my refund for {o}",
        "i'm waiting on a refund for {o}",
        "did you get my return for {o}",
        "has my refund for {o} gone through",
        "i want my money back for {o}",
        "i want to send back {o}",
        "something in {o} was damaged can i return it",
        "i need to return {o}",
        "can i exchange {o}",
        "how do i get a refund for {o}",
        "what's happening with my refund for {o}",
        "i bought the wrong size in {o}",
        "is it too late to return {o}",
        "{o} arrived damaged i want my money back",
        "i was never refunded for {o}",
        "i'd like to send {o} back",
    ],
}

# What callers say after the agent asked for the number.
ID_REPLY_LEADS = [
    "yes",
    "yeah",
    "sure",
    "ok",
    "yep",
    "right",
    "sorry",
    "oh",
    "um",
    "hold on",
    "let me check",
    "just a second",
    "let me look",
    "one sec",
    "hang on",
    "ok ready",
    "got it",
    "found it",
    "i see it",
    "ok so",
    "it's on the receipt",
    "from the email",
    "let me read it",
]
# Share of id replies with a lead where the number follows the lead directly ("found it 4217"): the
# number must be copied whatever words come just before it.
LEAD_THEN_ID = 0.4
ID_REPLY_BODIES = [
    "{id}",
    "it's {id}",
    "it is {id}",
    "the number is {id}",
    "the order number is {id}",
    "my order number is {id}",
    "order number {id}",
    "order {id}",
    "that's {id}",
    "i think it's {id}",
    "it should be {id}",
    "i believe it's {id}",
    "it says {id}",
    "ok the number is {id}",
]

# "order {id} ... where is it": the id first, then a request about "it".
ID_LEADS = [
    "my order number is {id}",
    "order {id}",
    "i have order {id}",
    "it's order {id}",
    "i'm calling about order {id}",
    "this is about order {id}",
    "the order number is {id}",
    "order number {id}",
    "i have an order {id}",
    "my order is {id}",
    "i placed order {id}",
    "about my order {id}",
]
BARE_REQUESTS: dict[str, list[str]] = {
    "order_status": [
        "where is it",
        "what's the status",
        "can you check it",
        "has it shipped",
        "what's going on with it",
        "can you tell me where it is",
        "any update",
        "is it on the way",
        "can you track it",
    ],
    "delivery_date": [
        "when will it arrive",
        "when is it coming",
        "when does it get here",
        "when can i expect it",
        "what's the delivery date",
        "is it coming today",
        "how long until it gets here",
    ],
    "cancel_order": [
        "i want to cancel it",
        "can you cancel it",
        "please cancel it",
        "i don't need it anymore",
        "can i still cancel it",
        "i'd like to cancel",
    ],
    "change_order": [
        "i need to change the address",
        "can i change it",
        "i want to swap the size",
        "can i add an item",
        "i need to update the shipping address",
        "can i change the color",
    ],
    "return_refund": [
        "i want to return it",
        "can i send it back",
        "where's my refund",
        "i want a refund",
        "it arrived broken can i return it",
        "it doesn't fit can i return it",
    ],
}

STOCK_REQUESTS = [
    "do you have {product}",
    "do you have {product} in stock",
    "do you have any {product} in stock",
    "have you got any {product}",
    "is {product} in stock",
    "are there any {product} left",
    "do you sell {product}",
    "do you carry {product}",
    "can i buy {product}",
    "can i order {product}",
    "i'm looking for {product}",
    "i want to buy {product}",
    "i'd like to order {product}",
    "is {product} available",
    "how many {product} do you have",
    "how much is the {product}",
    "how much does the {product} cost",
    "what's the price on {product}",
    "what do you charge for {product}",
    "can you check if {product} is in stock",
    "any {product} in stock",
    "got any {product}",
    "is {product} sold out",
    "when is {product} back in stock",
    "do you still have {product}",
    "can you check stock for {product}",
    "i need {product}",
    "is there {product} in stock",
    "are you out of {product}",
    "do you guys have {product}",
    "does your store sell {product}",
    "are you selling {product}",
    "is {product} something you sell",
    "do you stock {product}",
    "is {product} something you carry",
    "would you have {product}",
    "can i get {product} from you",
    "is {product} for sale",
    "i want to know if you have {product}",
    "look up {product} for me",
    "please check {product}",
    "how about {product}",
]

DIRECT: dict[str, list[list[str]]] = {
    "greeting": [
        [
            "hi",
            "hello",
            "hey",
            "hey there",
            "hi there",
            "hello there",
            "good morning",
            "good afternoon",
            "good evening",
            "morning",
            "yes hello",
            "hello hello",
            "hiya",
            "oh hi",
            "um hello",
            "hi yes",
            "yeah hello",
        ],
        [
            "",
            "how are you",
            "how's it going",
            "is this northwind",
            "is this the northwind store",
            "is this customer service",
            "is this customer support",
            "am i speaking to northwind",
            "can you hear me",
            "anyone there",
            "is anybody there",
            "i have a question",
            "i need some help",
            "can you help me",
            "are you there",
            "is this the right number",
            "how are you doing today",
            "i hope you can help me",
        ],
    ],
    "thanks": [
        [
            "",
            "ok",
            "great",
            "perfect",
            "awesome",
            "alright",
            "cool",
            "oh nice",
            "got it",
            "that helps",
            "that's helpful",
            "that's great",
            "sounds good",
            "wonderful",
            "ok great",
            "nice",
        ],
        [
            "thanks",
            "thank you",
            "thanks a lot",
            "thank you so much",
            "thanks so much",
            "thank you very much",
            "many thanks",
            "cheers",
            "i appreciate it",
            "appreciate it",
            "thanks for your help",
            "thank you for helping",
            "thanks for checking",
            "thanks for looking",
        ],
        ["", "that's helpful", "you've been very helpful", "that's what i needed", "really"],
    ],
    "goodbye": [
        [
            "",
            "ok",
            "alright",
            "great",
            "ok great",
            "no that's it",
            "that's all",
            "that's everything",
            "nothing else",
            "i'm all set",
            "that's all i needed",
            "ok thanks",
            "thanks",
            "no i'm good",
        ],
        [
            "bye",
            "goodbye",
            "bye bye",
            "see you",
            "see ya",
            "talk to you later",
            "have a good day bye",
            "have a nice day bye",
            "take care bye",
            "bye now",
            "have a good one bye",
        ],
    ],
    "agent": [
        [
            "can i",
            "i'd like to",
            "i want to",
            "let me",
            "i need to",
            "could i",
            "please let me",
            "i wanna",
            "i'd rather",
        ],
        ["talk to", "speak to", "speak with", "talk with", "be transferred to", "get through to"],
        [
            "a person",
            "a human",
            "a real person",
            "someone",
            "somebody",
            "an agent",
            "a representative",
            "a manager",
            "a supervisor",
            "a live agent",
            "a human being",
            "customer service",
            "an operator",
            "someone real",
        ],
        ["", "please", "right now", "this isn't working", "not a robot", "now"],
    ],
    "hours": [
        [
            "what are your hours",
            "what are your opening hours",
            "what are your business hours",
            "when are you open",
            "when do you open",
            "when do you close",
            "what time do you open",
            "what time do you close",
            "are you open on {day}",
            "are you open {when}",
            "how late are you open",
            "how early do you open",
            "when is customer service available",
            "when can i reach you",
            "when is the support line open",
            "what days are you open",
            "are you closed on {day}",
            "is someone there on {day}",
            "until what time are you open",
            "is the store open {when}",
            "can i call {when}",
            "what are your opening times",
            "when does the phone line open",
            "what are your hours of operation",
            "what time does the support line open {when}",
        ],
    ],
    "shipping": [
        [
            "how much is shipping",
            "how much does shipping cost",
            "what's the shipping cost",
            "what do you charge for shipping",
            "what do you charge for delivery",
            "is shipping free",
            "do you offer free shipping",
            "do i get free shipping",
            "how much for delivery",
            "what are your delivery fees",
            "is there a shipping fee",
            "what's the minimum for free shipping",
            "how much do i need to spend for free shipping",
            "do you charge for delivery",
            "how much is it to ship",
            "what does delivery cost",
            "is delivery free",
            "how much are shipping charges",
        ],
        ["", "on an order", "to my house", "for small orders", "these days", "on everything"],
    ],
    "return_policy": [
        [
            "what's your return policy",
            "what is the return policy",
            "how do returns work",
            "how long do i have to return things",
            "how long do i have to make a return",
            "what's the refund policy",
            "how long do refunds take",
            "how long does it take to get a refund",
            "when will a refund show up",
            "how long for a refund to hit my card",
            "what's the return window",
            "is there a deadline for returns",
            "how many days do i have for a return",
            "do you take returns",
            "how does your refund policy work",
            "what are the rules for returns",
            "can you explain the return policy",
            "how fast are refunds",
            "is there a limit on how long i have to return things",
            "how many weeks do i have to send something back",
            "can i still return something after two weeks",
            "is a month too late to send it back",
            "what's your policy on returns",
            "do returns have a deadline",
        ],
    ],
    "out_of_scope": [
        [
            "what's the weather like in {city}",
            "will it snow {when}",
            "play some {music}",
            "put on some {music}",
            "set a timer",
            "wake me up early",
            "tell me something funny",
            "who is the richest person in the world",
            "how tall is the eiffel tower",
            "what's the capital of {country}",
            "how do i cook {food}",
            "give me a recipe for {food}",
            "find me a restaurant in {city}",
            "book a table for dinner",
            "book a hotel in {city}",
            "how do i get to the airport",
            "is my flight on time",
            "what's the traffic like",
            "call a taxi",
            "what's my account balance",
            "why was my card declined",
            "my bank card isn't working",
            "how do i activate my new credit card",
            "i lost my credit card",
            "i need a new pin",
            "how do i transfer money to my friend",
            "my bank transfer hasn't gone through",
            "why was i charged a fee at the atm",
            "how do i top up my account",
            "what's the exchange rate for {currency}",
            "can i open a savings account",
            "what's my credit score",
            "how do i pay my electric bill",
            "can you change my phone plan",
            "my internet is down",
            "how do i fix my wifi",
            "reset my password",
            "what's the score of the game",
            "who won the world cup",
            "when is the next holiday",
            "add eggs to my shopping list",
            "what's on my calendar {when}",
            "schedule a meeting with my boss",
            "text my sister",
            "send an email to my boss",
            "how do you say thank you in {language}",
            "translate this into {language}",
            "what does this word mean",
            "spell necessary",
            "what's a square root",
            "how many miles is a marathon",
            "how do i lose weight",
            "i have a headache what should i take",
            "make a doctor's appointment",
            "how do i renew my passport",
            "do i need a visa for {country}",
            "what's the best movie this year",
            "recommend a good book",
            "how old is the universe",
            "why is the sky blue",
            "what should i name my dog",
            "how do i change my car's oil",
            "where can i rent a car",
            "what's the gas price today",
            "how do i file my taxes",
            "is the stock market up today",
            "how do i invest in bitcoin",
            "what's your favorite color",
            "are you a robot",
            "do you like pizza",
            "turn off the tv",
            "dim the lights",
            "lock the front door",
            "what's the pollen count",
            "how do i get rid of ants",
            "what's my insurance deductible",
            "when is my rent due",
            "how do i apply for a job",
            "what's the speed of light",
            "what time is it in {city}",
            "what's the time in {country}",
            "what's today's date",
            "who is the president",
            "tell me a joke",
            "what is the meaning of this word",
            "what's the point of school",
            "how far away is the moon",
            "sing me a song",
            "who made you",
            "what's the population of {country}",
            "who won the election",
            "how do i make friends",
            "what should i do this weekend",
        ],
    ],
}
# "get me a person": the agent request as a bare imperative.
AGENT_IMPERATIVES = [
    "get me",
    "put me through to",
    "connect me with",
    "transfer me to",
    "i need",
    "i want",
    "can i have",
    "give me",
    "find me",
]
SLOT_WORDS = {
    "day": ["sunday", "saturday", "monday", "friday", "weekends", "holidays", "sundays", "saturdays"],
    "when": ["today", "tomorrow", "tonight", "this weekend", "right now", "on the weekend", "late"],
    "city": [
        "chicago",
        "boston",
        "paris",
        "london",
        "denver",
        "seattle",
        "miami",
        "dallas",
        "tokyo",
        "sydney",
        "rome",
        "berlin",
        "toronto",
        "madrid",
        "dubai",
    ],
    "music": ["jazz", "rock music", "country music", "classical music", "my playlist", "taylor swift"],
    "country": ["france", "japan", "canada", "brazil", "italy", "mexico", "spain", "germany"],
    "food": ["lasagna", "pancakes", "fried rice", "chicken soup", "banana bread", "tacos"],
    "currency": ["euros", "yen", "pounds", "pesos", "canadian dollars"],
    "language": ["spanish", "french", "german", "italian", "japanese"],
}

# Everyday products the store does not carry: copy practice for check_stock on names never seen.
EXTRA_MISSING_NOUNS = [
    "rice cooker",
    "pressure cooker",
    "waffle iron",
    "toaster oven",
    "stand mixer",
    "food processor",
    "slow cooker",
    "ice maker",
    "sandwich press",
    "paddle board",
    "fishing rod",
    "tennis racket",
    "ski goggles",
    "rain jacket",
    "sleeping bag",
    "power drill",
    "tool box",
    "paint roller",
    "step ladder",
    "shower curtain",
    "curtain rod",
    "picture frame",
    "wall clock",
    "phone case",
    "screen protector",
    "usb cable",
    "power bank",
    "webcam",
    "mouse pad",
    "computer monitor",
    "hard drive",
    "smart watch",
    "baby monitor",
    "car seat",
    "dog crate",
    "bird cage",
    "hamster wheel",
    "litter box",
    "scratching post",
    "doll house",
    "toy train",
    "kite",
    "skateboard",
    "roller skates",
    "swim goggles",
    "beach umbrella",
    "patio chair",
    "garden gnome",
    "watering can",
    "leaf blower",
    "snow shovel",
    "air purifier",
    "humidifier",
    "vacuum cleaner",
    "robot vacuum",
    "sunglasses",
    "winter coat",
    "rain boots",
    "handbag",
    "perfume",
    "nail polish",
    "lipstick",
    "shampoo bottle",
    "bath robe",
    "pillow case",
    "duvet cover",
    "wine glasses",
    "tea kettle",
    "soup pot",
    "cast iron skillet",
]
MODIFIERS = [
    "wireless",
    "electric",
    "stainless steel",
    "portable",
    "ceramic",
    "wooden",
    "folding",
    "kids",
    "mini",
    "outdoor",
    "smart",
    "cordless",
    "glass",
    "bamboo",
    "vintage",
    "heated",
    "waterproof",
    "digital",
    "travel",
    "large",
    "black",
    "red",
    "blue",
    "pink",
]


def _pick(rng: random.Random, pool: list[str], p: float = 1.0) -> str:
    """A pool item with probability ``p``, else nothing."""
    return rng.choice(pool) if rng.random() < p else ""


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


# Share of composed greetings that are a greeting word alone ("hi there", "um hello"): openers like
# "hello there" start many requests for a person, so a bare one must be seen to be answered as a greeting.
BARE_GREETINGS = 0.3


def compose(group: str, rng: random.Random) -> str:
    """One composed template for a template group of :mod:`llm.data` (same slot names)."""
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
        return rng.choice(DIRECT["greeting"][0])
    text = _join(*(rng.choice(pool) for pool in DIRECT[group]))
    for slot, words in SLOT_WORDS.items():
        text = text.replace("{" + slot + "}", rng.choice(words))
    if group in ("hours", "shipping", "return_policy", "out_of_scope"):
        text = _join(_pick(rng, OPENERS, 0.3), text, _pick(rng, ["please", "thanks", "real quick"], 0.1))
    return text


# Syllables for invented brand-like names: words no tokenizer merge or training name predicts, so the
# model has to copy the caller's spelling into check_stock token by token.
SYLLABLES = [
    "ka", "lo", "vi", "zen", "tor", "mi", "ra", "bel", "qu", "dro", "fen", "lux", "po", "sa",
    "nim", "ber", "ko", "tri", "vo", "gal", "ex", "ol", "ari", "mon", "pex", "ul", "ste", "dax",
]  # fmt: skip


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


CONSONANTS, VOWELS = "bcdfghjklmnprstvwz", "aeiou"
# English spelling patterns for pseudo_word: onset clusters, vowel pairs, coda clusters and double
# letters, word endings. Weighted by repetition; the plain consonant-vowel word is still the most common.
# fmt: off
ONSETS = [*CONSONANTS * 2, "bl", "br", "ch", "cl", "cr", "dr", "fl", "fr", "gl", "gr", "pl", "pr", "qu",
          "sc", "sh", "sk", "sl", "sm", "sn", "sp", "st", "str", "sw", "th", "tr", "wh"]
NUCLEI = [*VOWELS * 6, "ai", "au", "ay", "ea", "ee", "ie", "oa", "oi", "oo", "ou", "ow", "y"]
CODAS = [""] * 30 + [*CONSONANTS, "ck", "ct", "ff", "ft", "ll", "lt", "mp", "nd", "ng", "nk", "nt", "rd",
                     "rk", "rm", "rn", "rt", "sh", "ss", "st", "tch", "th", "x"]
ENDINGS = [""] * 12 + ["e", "er", "y", "le", "et", "or", "s"]
# fmt: on


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
