"""Where TTFAT is computed: one call's events on one monotonic clock, and the turn records derived
from them (the timing contract of DESIGN.md §2).

Stages only *emit* events (`Timeline.emit`); everything measured is derived here, from `t0` — the end
of the caller's last voiced frame, not the moment the endpointer decided. A turn that failed or was
never answered keeps its status and whatever anchors it reached; it is never dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import pairwise

# Anchors in the order they must happen (a later one never precedes an earlier one in the chain).
ANCHORS = (
    "t0",
    "endpoint",
    "asr_final",
    "llm_request",
    "first_token",
    "first_answer_token",
    "first_useful_token",
    "llm_done",
)
# Audio anchors hang off the text ones: (anchor, the anchors it must not precede).
AUDIO_ORDER = {
    "tts_first_audio": ("first_answer_token",),
    "first_audio_heard": ("llm_request",),
    "first_useful_audio_heard": ("first_useful_token", "first_audio_heard"),
    "last_audio_heard": ("first_useful_audio_heard",),
}
# The metric name (ms from t0) of each anchor in turn records and reports.
METRICS = {
    "endpoint": "endpoint_ms",
    "asr_final": "asr_ms",
    "llm_request": "llm_request_ms",
    "first_token": "first_token_ms",
    "first_answer_token": "ttfat_ms",
    "first_useful_token": "first_useful_token_ms",
    "llm_done": "llm_done_ms",
    "tts_first_audio": "tts_first_audio_ms",
    "first_audio_heard": "first_audio_ms",
    "first_useful_audio_heard": "first_useful_audio_ms",
    "last_audio_heard": "complete_ms",
}
STATUSES = ("ok", "timeout", "error", "no_answer")


class CallClock:
    """One call's clock: the monotonic clock plus the audio waits that fast replay skipped. Compute is
    always real; fast mode only skips waiting for audio while no turn is being processed, so durations
    measured inside a turn are the same as in realtime mode. Times from code that reads
    `time.monotonic_ns()` itself (the LLM client, tools) convert with `from_monotonic`."""

    def __init__(self):
        self.skipped_ns = 0

    def __call__(self) -> int:
        return time.monotonic_ns() + self.skipped_ns

    def skip(self, ns: int) -> None:
        self.skipped_ns += max(0, ns)

    def from_monotonic(self, t_ns: int) -> int:
        return t_ns + self.skipped_ns


@dataclass
class Event:
    call: str
    turn: int
    name: str
    t_ns: int
    data: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"call": self.call, "turn": self.turn, "event": self.name, "t_ns": self.t_ns, **self.data}


@dataclass
class TurnRecord:
    call: str
    turn: int
    status: str = "ok"
    error: str | None = None
    transcript: str = ""
    answer: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    anchors: dict[str, int] = field(default_factory=dict)  # anchor -> t_ns on the call's clock
    info: dict = field(default_factory=dict)  # stage details kept in the record (speech span, reference)

    def ms(self) -> dict[str, float | None]:
        """Every metric in milliseconds from t0; None where the anchor was never reached."""
        t0 = self.anchors.get("t0")
        return {
            metric: None if t0 is None or anchor not in self.anchors else (self.anchors[anchor] - t0) / 1e6
            for anchor, metric in METRICS.items()
        }

    def order_violations(self) -> list[str]:
        """Anchors out of order: a bug in a stage or the clock, to be reported, never hidden."""
        seen = [(a, self.anchors[a]) for a in ANCHORS if a in self.anchors]
        problems = [f"{a} before {b}" for (b, tb), (a, ta) in pairwise(seen) if ta < tb]
        for anchor, befores in AUDIO_ORDER.items():
            for before in befores:
                if (
                    anchor in self.anchors
                    and before in self.anchors
                    and self.anchors[anchor] < self.anchors[before]
                ):
                    problems.append(f"{anchor} before {before}")
        return problems

    def to_dict(self) -> dict:
        if self.status not in STATUSES:
            raise ValueError(f"turn status must be one of {STATUSES}, not {self.status!r}")
        return {
            "call": self.call,
            "turn": self.turn,
            "status": self.status,
            "error": self.error,
            "transcript": self.transcript,
            "answer": self.answer,
            "tool_calls": self.tool_calls,
            **self.ms(),
            "order_violations": self.order_violations(),
            **self.info,
        }


class Timeline:
    """One call's events. Observers (run log, MQTT, live console) see each event as it is emitted."""

    def __init__(self, call: str, clock: Callable[[], int] = time.monotonic_ns):
        self.call, self.clock = call, clock
        self.events: list[Event] = []
        self.turns: dict[int, TurnRecord] = {}
        self.observers: list[Callable[[Event], None]] = []

    def emit(self, turn: int, name: str, t_ns: int | None = None, **data) -> Event:
        """Record an event (now, or at `t_ns` for anchors known after the fact such as t0). The first
        time of an anchor counts: a second `first_token` is kept as an event but moves nothing."""
        event = Event(self.call, turn, name, self.clock() if t_ns is None else t_ns, data)
        self.events.append(event)
        if turn >= 0:  # turn -1: events of the call itself (start, end)
            record = self.turns.setdefault(turn, TurnRecord(self.call, turn))
            if name in METRICS or name == "t0":
                record.anchors.setdefault(name, event.t_ns)
        for observer in self.observers:
            observer(event)
        return event
