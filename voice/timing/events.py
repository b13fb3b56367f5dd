"""Every event a call's timeline may hold: the anchors of a turn (anchors.py) and the events besides
them, each named here once with what it marks. The set is closed: `Timeline` refuses a name that is not
in it, and tests/test_events.py checks every name the sources emit or look for, so a typo in an event
name fails at once instead of matching nothing."""

from __future__ import annotations

from voice.timing.anchors import ANCHORS

# What each event marks, besides the anchors. Turn -1 is the call itself.
OTHER_EVENTS = {
    "call_start": "the call begins (turn -1)",
    "call_end": "the caller's audio has ended (turn -1)",
    "call_replayed": "every record of the call is written: --resume keeps it (the run log's own line)",
    "greeting": "the agent's greeting, played as a live call opens (turn -1)",
    "line_error": "the phone line failed during the call (turn -1)",
    "speech_start": "the caller starts speaking: a turn begins",
    "turn_resumed": "the caller went on after a pause: the turn goes on",
    "turn_judged": "the words or Smart Turn changed how long the end of the turn is waited for",
    "turn_done": "the turn's record is final",
    "asr_spec_start": "an attempt transcribes the turn in the silence before the endpoint",
    "asr_spec_first": "the attempt's first pass is in",
    "asr_spec_final": "the attempt's words are final",
    "attempt_kept": "the attempt's words are the turn's",
    "attempt_discarded": "the attempt was dropped (speech came back, the words changed)",
    "answer_dropped": "an answer started on a dropped attempt was thrown away",
    "tool_start": "a tool call starts",
    "tool_end": "a tool call ends",
    "llm_call": "an LLM request ended, with its client and server timings",
    "clause": "a clause of the answer was synthesized and heard",
    "filler_skipped": "a filler was not spoken (the answer was ready)",
    "barge_in": "the caller spoke while the agent was heard",
}
EVENTS: frozenset[str] = frozenset(a.name for a in ANCHORS) | frozenset(OTHER_EVENTS)


def known(name: str) -> str:
    """`name`, if it is an event's; a ValueError that names the closed set otherwise."""
    if name not in EVENTS:
        raise ValueError(f"unknown event {name!r}: events are named in voice/timing/events.py")
    return name
