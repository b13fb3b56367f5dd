"""Where TTFAT is computed: one call's events on one monotonic clock, and the turn records derived
from them (the timing contract of docs/timing.md, the anchors of voice/timing/anchors.py).

Stages only *emit* events (`Timeline.emit`); everything measured is derived here, from `t0`, the end
of the caller's last voiced frame, not the moment the endpointer decided: every anchor's ms from t0
(TTFAT is `ttfat_ms`), the stages of the wait, and the LLM's share of it (`TurnRecord.llm`). A turn that
failed or was never answered keeps its status and whatever anchors it reached; it is never dropped.

What is not an event (a turn's status, its words, stage details) is written through the turn's
`TurnLog` and nowhere else, and only the `Timeline` starts a record again (`restart`): a record has one
writer, so what a stage may change in it is the list of `TurnLog`'s methods.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from llm.clock import ms
from voice.timing.anchors import ANCHORS, BY_NAME, METRICS, STAGES, WAITS
from voice.timing.events import known
from voice.timing.facts import first_fact

STATUSES = ("ok", "timeout", "error", "no_answer")


def tool_ms(tool_calls: list[dict]) -> float | None:
    """Time spent running tools in a turn (None: it made no tool call)."""
    return sum(c["ms"] for c in tool_calls) if tool_calls else None


def stage_durations(metrics: dict) -> dict[str, float | None]:
    """How much of the wait each stage took, from a record's ms-from-t0 metrics (None unless both its
    ends were reached): the waterfall of voice/timing/anchors.py. A stage starts where the wait has got to, so
    work done ahead (a transcript ready before the endpoint) takes none of it."""
    out, reached = {}, 0.0
    for stage in STAGES:
        start = 0.0 if stage.start is None else metrics.get(METRICS[stage.start])
        end = metrics.get(METRICS[stage.end])
        if start is None or end is None:
            out[stage.key] = None
        else:
            start = max(start, reached)
            out[stage.key] = max(end, start) - start
        reached = reached if end is None else max(reached, end)
    return out


# The work between the endpoint and the first useful words heard, in order, with the record's key for its
# end: the anchors that mark one (voice/timing/anchors.py, `waits`) and, after the transcript an answer
# began on, the second pass that confirms its words (`words_final_ms`: speech is held until then,
# voice/pipeline/speaking.py)
CRITICAL_PATH = (
    (WAITS[0].waits, WAITS[0].metric),
    ("ASR second pass", "words_final_ms"),
    *((a.waits, a.metric) for a in WAITS[1:]),
)


def waiting_on(metrics: dict) -> tuple[str, float] | None:
    """What the caller was still waiting on when the turn was declared over: the first work on the way to
    the first useful words heard (voice/timing/anchors.py, `waits`) that ended after the endpoint, and how
    long after it; None for a turn with no endpoint or no useful words heard. Nothing is heard before the
    endpoint, so playback at least is always still to come."""
    endpoint, heard = metrics.get("endpoint_ms"), metrics.get("first_useful_audio_ms")
    if endpoint is None or heard is None:
        return None
    for waits, key in CRITICAL_PATH:
        end = metrics.get(key)
        if end is not None and end > endpoint:
            return waits, end - endpoint
    return None  # an order violation: heard before the endpoint


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

    def __post_init__(self) -> None:
        known(self.name)

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
    llm_calls: list[dict] = field(default_factory=list)  # one per LLM request (llm.agent.LLMCall)
    tool_starts: list[int] = field(default_factory=list)  # when each tool call started (t_ns)
    clauses: list[dict] = field(default_factory=list)  # each clause spoken: synthesized, then heard
    info: dict = field(default_factory=dict)  # stage details kept in the record (speech span, reference)

    def _since_t0(self, anchor: str | None) -> float | None:
        t0 = self.anchors.get("t0")
        if t0 is None or (anchor is not None and anchor not in self.anchors):
            return None
        return 0.0 if anchor is None else ms(t0, self.anchors[anchor], None)

    def ms(self) -> dict[str, float | None]:
        """Every anchor's metric in milliseconds from t0; None where the anchor was never reached."""
        return {metric: self._since_t0(anchor) for anchor, metric in METRICS.items()}

    def llm(self) -> dict:
        """The LLM's part of the wait. `llm_ttfat_ms`: request -> first answer token of the call that
        answered (what Pipecat calls TTFAT). `llm_wait_ms`: how long the caller waited on the LLM before
        the first useful token (every tool-calling request until it ended, then the answering one until
        its first useful token; tool runs excluded). `llm_share`: that wait over first useful audio
        heard. Client-side times, so the HTTP overhead counts as the LLM's; `server_timings` says
        whether the endpoint also reported its own (queue, prefill, forwards: see `llm_calls`)."""
        calls = [{**c, "request_ms": self._ms_of(c.get("request_ns"))} for c in self.llm_calls]
        answer = next((c for c in calls if c["answered"]), None)
        useful, heard = self._since_t0("first_useful_token"), self._since_t0("first_useful_audio_heard")
        wait = None
        if answer is not None and useful is not None and answer["request_ms"] is not None:
            before = [c["done_ms"] or 0.0 for c in calls if c["round"] < answer["round"]]
            wait = sum(before) + useful - answer["request_ms"]
        return {
            "llm_ttfat_ms": answer and answer["first_content_ms"],
            "llm_wait_ms": wait,
            "llm_share": None if wait is None or not heard else round(wait / heard, 4),
            "server_timings": any(c["server"] for c in calls) if calls else None,
            "llm_calls": [{k: v for k, v in c.items() if k != "request_ns"} for c in calls],
        }

    def _ms_of(self, t_ns: int | None) -> float | None:
        return ms(self.anchors.get("t0"), t_ns)

    def order_violations(self) -> list[str]:
        """Anchors out of order: a bug in a stage or the clock, to be reported, never hidden."""
        problems = []
        for anchor in ANCHORS:
            if anchor.name in self.anchors:
                for before in self._reached_before(anchor.name):
                    if self.anchors[anchor.name] < self.anchors[before]:
                        problems.append(f"{anchor.name} before {before}")
        return problems

    def _reached_before(self, name: str) -> set[str]:
        """The nearest reached anchors that `name` may not precede (through unreached ones)."""
        anchor, out = BY_NAME[name], set()
        speculative = self.info.get("speculative") and anchor.speculative_after is not None
        after = anchor.speculative_after if speculative else anchor.after
        for before in after:
            out |= {before} if before in self.anchors else self._reached_before(before)
        return out

    def apply(self, name: str, t_ns: int, data: dict) -> None:
        """What an event means for the record: the first time of an anchor counts, an LLM call is kept."""
        if name in BY_NAME:
            self.anchors.setdefault(name, t_ns)
        elif name == "llm_call":
            self.llm_calls.append(data)
        elif name == "tool_start":
            self.tool_starts.append(t_ns)
        elif name == "clause":
            self.clauses.append({**data, "ready_ns": t_ns})

    def timed_tool_calls(self) -> list[dict]:
        """The tool calls, each with `start_ms` from t0 (they run one after another, in the order the
        model made them, so the n-th tool_start is the n-th call's)."""
        starts = self.tool_starts + [None] * len(self.tool_calls)  # a call that never started: None
        return [{**c, "start_ms": self._ms_of(t)} for c, t in zip(self.tool_calls, starts, strict=False)]

    def clause_spans(self) -> list[dict]:
        """Each clause spoken, in ms from t0: synthesis started (`synth_ms`), its audio ready
        (`ready_ms`), heard from `heard_ms` to `end_ms` (as planned: a barge-in may have cut it)."""
        times = ("synth", "ready", "heard", "end")
        return [
            {
                "text": c.get("text", ""),
                "filler": bool(c.get("filler")),
                **{f"{k}_ms": self._ms_of(c.get(f"{k}_ns")) for k in times},
            }
            for c in self.clauses
        ]

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
            "tool_calls": self.timed_tool_calls(),
            **(ms := self.ms()),
            **stage_durations(ms),
            "tool_ms": tool_ms(self.tool_calls),
            **self.llm(),
            "clauses": self.clause_spans(),
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
            self.turns.setdefault(turn, TurnRecord(self.call, turn)).apply(name, event.t_ns, data)
        for observer in self.observers:
            observer(event)
        return event

    def restart(self, turn: int) -> None:
        """The caller went on after a pause: the turn's record starts again, t0 and every anchor to come
        from the whole turn, keeping the count of the work discarded on it."""
        discarded = self.turns[turn].info.get("discarded")
        self.turns[turn] = TurnRecord(self.call, turn)
        if discarded:
            self.turns[turn].info["discarded"] = discarded


class TurnLog:
    """Where a turn's events and record are written (turn taking, and each attempt at answering it):
    the one writer of a record's fields, each change a method of its own. A held log (an answer
    started before the endpoint) keeps both aside, on a record of its own, until `release()` replays its
    events into the timeline, in order and at their own times, and hands its fields to the turn's
    record; a discarded attempt leaves nothing in the turn's record. A log that is not held writes
    through at once."""

    FIELDS = ("status", "error", "transcript", "answer", "tool_calls")

    def __init__(self, timeline: Timeline, turn: int, held: bool = False):
        self.timeline, self.turn = timeline, turn
        self.held: list[tuple[str, int, dict]] | None = [] if held else None
        self.scratch = TurnRecord(timeline.call, turn)

    @property
    def record(self) -> TurnRecord:
        if self.held is not None:
            return self.scratch
        return self.timeline.turns.setdefault(self.turn, TurnRecord(self.timeline.call, self.turn))

    def emit(self, name: str, t_ns: int | None = None, **data) -> None:
        if self.held is None:
            self.timeline.emit(self.turn, name, t_ns, **data)
            return
        t_ns = self.timeline.clock() if t_ns is None else t_ns
        self.held.append((known(name), t_ns, data))
        self.scratch.apply(name, t_ns, data)

    def release(self) -> None:
        held, self.held = self.held or [], None
        record = self.record
        for field_name in self.FIELDS:
            setattr(record, field_name, getattr(self.scratch, field_name))
        record.info.update(self.scratch.info)
        for name, t_ns, data in held:
            self.timeline.emit(self.turn, name, t_ns, **data)

    def note(self, **info) -> None:
        """Stage details the record keeps (speech span, reference, speculative, barge-in stop)."""
        self.record.info.update(info)

    def note_moment(self, key: str, t_ns: int) -> None:
        """A moment the record keeps besides its anchors, in ms from the turn's t0 (emitted already)."""
        self.note(**{key: ms(self.record.anchors["t0"], t_ns)})

    def transcribed(self, text: str, compute_ms: float) -> None:
        """The words the answer is for, and the ASR's compute to hear them."""
        self.record.transcript = text
        self.note(asr_compute_ms=round(compute_ms, 1))

    def answered(self, answer: str, tool_calls: list[dict], answered_by: str) -> None:
        self.record.answer, self.record.tool_calls = answer, tool_calls
        self.note(answered_by=answered_by)

    def fact_heard(self, heard: Sequence[tuple[str, int]]) -> None:
        """`first_fact_heard` where the clause that says the first of the reference's facts was heard,
        given the clauses heard so far, (text, heard from), in order (voice/timing/facts.py); once, and
        nothing without facts to hear."""
        facts = (self.record.info.get("reference") or {}).get("facts") or []
        if not facts or "first_fact_heard" in self.record.anchors:
            return
        if (i := first_fact([text for text, _ in heard], facts)) is not None:
            self.emit("first_fact_heard", heard[i][1])

    def set_status(self, status: str, error: str | None = None) -> None:
        """How the turn ended (a record starts "ok"): why it failed, or was never answered."""
        self.record.status, self.record.error = status, error

    def count_discarded(self, **work: float) -> None:
        """Add work done on words that were taken back (ASR and LLM runs, their ms) to the record's
        `discarded` (present, at zero, once any work on the turn was discarded)."""
        zero = {"asr_runs": 0, "asr_ms": 0.0, "llm_runs": 0, "llm_ms": 0.0}
        discarded = self.record.info.setdefault("discarded", zero)
        for key, amount in work.items():
            discarded[key] += amount
