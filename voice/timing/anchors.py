"""The anchors of a turn (docs/timing.md), in one table that the timeline, the reports, the HTML page, the
live console, the benchmarks and the tests all read.

Each anchor is an event on the call's clock; its `metric` is its time in ms from t0 (the end of the
caller's last voiced frame) in turn records and reports. `after` names the anchors it may never
precede when both happened (an absent one is skipped: its own `after` count instead); in a turn whose
answer was started before the endpoint (`speculative`), `speculative_after` replaces it, so the text
anchors may precede the endpoint while the audio ones never do. `stage` names
the stage of the wait that ends at this anchor: consecutive stage anchors cut a turn's wait into the
waterfall that says where the time went (the first stage, endpoint, is the endpoint delay itself).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Anchor:
    name: str
    metric: str | None  # ms from t0 in records and reports (t0 itself has none)
    label: str
    after: tuple[str, ...] = ()
    stage: tuple[str, str] | None = None  # (key, label) of the stage that ends here
    reported: bool = True  # a row of the report's latency table
    console: bool = False  # shown per turn in `ttfat talk`
    speculative_after: tuple[str, ...] | None = None  # `after` in a turn answered speculatively
    waits: str | None = None  # the work a caller still waits on until this anchor (`waiting_on`)
    outside: bool = False  # seen from outside, in the audio both ways (`ttfat probe`, voice/runs/probe/)


ANCHORS: tuple[Anchor, ...] = (
    Anchor("t0", None, "end of speech", reported=False, outside=True),
    Anchor(
        "endpoint", "endpoint_ms", "endpoint delay", ("t0",), stage=("endpoint_ms", "endpoint"), console=True
    ),
    Anchor(
        "asr_final",
        "asr_ms",
        "transcript",
        ("endpoint",),
        stage=("asr_stage_ms", "ASR"),
        reported=False,
        console=True,
        waits="ASR",
        # a transcript made on a pause, before the endpoint (docs/timing.md), even before the refined t0
        # when the VAD fell silent ahead of the energy's end of speech
        speculative_after=(),
    ),
    Anchor("llm_request", "llm_request_ms", "LLM request", ("asr_final",), reported=False),
    Anchor("first_token", "first_token_ms", "first token", ("llm_request",)),
    Anchor(
        "first_answer_token",
        "ttfat_ms",
        "TTFAT",
        ("first_token",),
        stage=("llm_stage_ms", "LLM to first answer token"),
        console=True,
        waits="LLM and tools",
    ),
    Anchor(
        "first_useful_token",
        "first_useful_token_ms",
        "first useful token",
        ("first_answer_token",),
        stage=("lead_in_stage_ms", "to first useful token"),
        waits="lead-in words",
    ),
    Anchor("llm_done", "llm_done_ms", "LLM done", ("first_useful_token",), reported=False),
    Anchor("tts_first_audio", "tts_first_audio_ms", "TTS first audio", ("first_answer_token",), waits="TTS"),
    Anchor(
        "first_audio_heard", "first_audio_ms", "first audio heard", ("endpoint", "llm_request"), outside=True
    ),
    Anchor(
        "first_useful_audio_heard",
        "first_useful_audio_ms",
        "first useful audio heard",
        ("first_useful_token", "first_audio_heard"),
        stage=("speech_stage_ms", "TTS + playback start"),
        console=True,
        waits="playback",
        outside=True,
    ),
    Anchor(
        # the clause that says the first of the turn's expected facts (a manifest's), whatever came before
        # it: the caller's question answered (voice/timing/facts.py)
        "first_fact_heard",
        "first_fact_ms",
        "first fact heard",
        ("first_audio_heard",),
        outside=True,
    ),
    Anchor(
        "last_audio_heard",
        "complete_ms",
        "complete answer heard",
        ("first_useful_audio_heard",),
        stage=("playing_stage_ms", "answer playing"),
        outside=True,
    ),
)
BY_NAME = {a.name: a for a in ANCHORS}
METRICS = {a.name: a.metric for a in ANCHORS if a.metric}  # anchor -> metric key
WAITS = tuple(a for a in ANCHORS if a.waits)  # the way from the endpoint to the first useful words heard
# The two figures the product is about: the model's first answer token and the first useful words heard.
HEADLINE = ("ttfat_ms", "first_useful_audio_ms")
# What a probe's report leads with: every moment it hears, from the first sound to the answer's end.
OUTSIDE_HEADLINE = tuple(a.metric for a in ANCHORS if a.outside and a.metric)


@dataclass(frozen=True)
class Stage:
    key: str  # its duration in ms in records and reports
    label: str
    start: str | None  # the anchor it starts at (None: t0)
    end: str


def _stages() -> tuple[Stage, ...]:
    out, start = [], None
    for a in ANCHORS:
        if a.stage:
            out.append(Stage(*a.stage, start, a.name))
            start = a.name
    return tuple(out)


STAGES = _stages()
# What a probe measures (voice/runs/probe/): the anchors seen from outside and the stages between two of them.
OUTSIDE = {a.metric for a in ANCHORS if a.outside and a.metric} | {
    s.key for s in STAGES if s.start and BY_NAME[s.start].outside and BY_NAME[s.end].outside
}
