"""Each turn of a probed call, found in what was sent and what was heard (docs/timing.md, measured from
outside), written as turn records on the probe's clock.

The caller's turns are the manifest's when it gives them (the probe is the caller: t0 is where the
reference's speech ends); otherwise they are found in the audio the agent received, by our own turn
detector: t0 is the end of the caller's last voiced frame, as everywhere. A turn's answer is what was
heard from its t0 to the next turn's t0 (the last: to the end of the call); sound still playing at t0
belongs to the answer before. In it:
- first audio heard: the first 10 ms of sound (`SILENT_DB`);
- first useful audio heard: the answer is cut where sound starts again after a silence (a voice pauses
  between clauses), each stretch transcribed on its own with word timestamps and its words cut into
  clauses by the same chunker and filler rule as our own pipeline (voice/pipeline/chunker.py); the first
  clause that is not filler starts with its stretch of sound, or, inside one, at its first word (Whisper's
  word times are tens of ms off, the onset of sound is not);
- first fact heard: where the clause that says the first of the manifest's facts was heard
  (voice/timing/facts.py), the words as they were said ("$70" is "seventy dollars");
- complete answer heard: the end of its last sound.
A caller who starts a turn while the agent is heard (or pauses between clauses) barges in: the record
says whether the agent fell silent before the caller's turn ended, and how long after the caller started.

What cannot be seen from outside (the endpoint, ASR, LLM, TTFAT, TTS) is absent from the records, not
zero; the record's `measured_from` says so and the report leaves those rows out.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from voice.pipeline.audio import RATE, resample
from voice.pipeline.chunker import Chunker
from voice.pipeline.settings import VadConfig
from voice.pipeline.turns import Turn, TurnDetector, frame_db
from voice.pipeline.turntaking import describe
from voice.runs.probe.session import Session
from voice.runs.replay import References
from voice.timing.timeline import Timeline, TurnLog

SILENT_DB = -60.0  # a 10 ms frame of the agent's audio quieter than this is silence (tts/piper.py, LEAD_DB)
GAP_FRAMES = 12  # 120 ms of silence between sounds: the next sound is an onset (a clause, a new answer)
HELD_FRAMES = 50  # the agent's sound up to 500 ms before a caller starts may go on (a pause between clauses)
LEAD_FRAMES = 5  # each stretch of sound is transcribed with 50 ms of what comes before and after it
FRAME = RATE // 100  # 10 ms at 16 kHz
NS = 10_000_000  # a frame's length on the clock


@dataclass
class Heard:
    """The agent's audio as the caller heard it, at 16 kHz from the call's origin, and where it sounds."""

    audio: np.ndarray
    loud: np.ndarray  # one bool a 10 ms frame
    cut_short: tuple[int, ...] = ()  # frames where a clear dropped audio the agent had still to play

    @classmethod
    def of(cls, session: Session) -> Heard:
        track = session.playout.track(session.origin_ns, session.ended_ns)
        heard = cls.of_audio(resample(track, session.rate, RATE) if len(track) else track)
        heard.cut_short = tuple((t - session.origin_ns) // NS for t in session.playout.cut_short)
        return heard

    @classmethod
    def of_audio(cls, audio: np.ndarray) -> Heard:
        """`audio` at 16 kHz (a call's, or a turn's clip: bench/hearing.py)."""
        n = len(audio) // FRAME
        loud = frame_db(audio[: n * FRAME].reshape(n, FRAME)) > SILENT_DB if n else np.zeros(0, bool)
        return cls(audio, loud)

    def sound(self, lo: int, hi: int) -> int | None:
        """The first frame of sound in [lo, hi)."""
        hits = np.nonzero(self.loud[lo:hi])[0]
        return lo + int(hits[0]) if len(hits) else None

    def silence(self, lo: int, hi: int) -> int | None:
        """The first frame of `GAP_FRAMES` of silence in [lo, hi) (the audio's end counts as silence)."""
        quiet = 0
        for f in range(lo, hi):
            quiet = 0 if f < len(self.loud) and self.loud[f] else quiet + 1
            if quiet >= GAP_FRAMES:
                return f - GAP_FRAMES + 1
        return None

    def onsets(self, lo: int, hi: int) -> list[int]:
        """Frames of sound in [lo, hi) that come after `GAP_FRAMES` of silence."""
        loud = self.loud[max(0, lo - GAP_FRAMES) : hi]
        out, quiet = [], GAP_FRAMES if lo < GAP_FRAMES else 0
        for i, is_loud in enumerate(loud):
            f = max(0, lo - GAP_FRAMES) + i
            if is_loud and quiet >= GAP_FRAMES and f >= lo:
                out.append(f)
            quiet = 0 if is_loud else quiet + 1
        return out


@dataclass
class Listener:
    """How the agent's words are heard: `words_of` transcribes its audio with word times
    (asr.whisper.Transcriber.words, in a worker thread); the chunker's clause length and the fillers
    (the common ones and these) find the first useful words."""

    words_of: Callable[[np.ndarray], Awaitable[list]]
    min_words: int = 4
    fillers: tuple[str, ...] = ()


def caller_turns(sent: np.ndarray, vad: VadConfig, heard: Heard) -> list[Turn]:
    """The caller's turns in the audio the agent received. Speech that resumes soon after an endpoint,
    before the agent was heard, continues the turn (as our pipeline does, voice/pipeline/turns.py)."""
    detector = TurnDetector(RATE, vad)
    turns: list[Turn] = []
    n = detector.frame_len
    for i in range(len(sent) // n):
        started = detector.in_turn
        event = detector.push(sent[i * n : (i + 1) * n])
        resumes = not started and detector.in_turn and detector.resuming and turns
        if resumes and heard.sound(turns[-1].end // FRAME, detector.start // FRAME) is None:
            detector.resume()
            turns.pop()
        if isinstance(event, Turn):
            turns.append(event)
    if turn := detector.flush():
        turns.append(turn)
    return turns


def reference_turn(reference: dict) -> Turn:
    """A manifest's turn as the caller said it: its own start and end of speech."""
    start, end = (round(reference[k] * RATE) for k in ("speech_start_s", "speech_end_s"))
    return Turn(start, end, end, np.zeros(0, np.float32))


async def write_turns(
    session: Session,
    heard: Heard,
    timeline: Timeline,
    listener: Listener,
    vad: VadConfig,
    references: References,
    concurrency: int = 1,
) -> int:
    """Every caller turn of the call as a record (through `timeline`'s observers: the run log, MQTT,
    OTLP), with the calls made at once with it. Returns how many turns were written."""
    given = references.take_all()  # with a manifest the probe is the caller: it knows when it stopped
    turns = [reference_turn(r) for r in given] if given else caller_turns(session.sent, vad, heard)
    at = lambda frame: session.origin_ns + frame * NS  # noqa: E731
    end = (session.ended_ns - session.origin_ns) // NS
    for k, turn in enumerate(turns):
        log = TurnLog(timeline, k)
        log.note(
            measured_from="outside",
            concurrency=concurrency,
            turns_from="manifest" if given else "turn detector",
            speech_start_s=round(turn.start / RATE, 3),
            speech_end_s=round(turn.end / RATE, 3),
            **({"reference": given[k]} if given else references.annotate(turn)),
        )
        t0, start = turn.end // FRAME, turn.start // FRAME
        hi = turns[k + 1].end // FRAME if k + 1 < len(turns) else end
        if start >= end:
            log.set_status("error", session.failure or "the call ended before this turn")
            log.emit("turn_done", at(end), status="error")
            continue
        log.emit("speech_start", at(start))
        log.emit("t0", at(t0))
        if k and (barged := barge_in(heard, start, t0, end)):
            log.note(barge_in=barged)
        try:
            answer = await heard_answer(heard, t0, min(hi, end), listener)
        except Exception as e:  # the agent's audio in one turn that cannot be heard fails that turn only
            log.set_status("error", f"the agent's audio could not be heard: {describe(e)}")
            log.emit("turn_done", at(min(hi, end)), status="error")
            continue
        for anchor, frame in sorted(answer.anchors.items(), key=lambda a: a[1]):
            log.emit(anchor, at(frame))
        for clause in answer.clauses:
            log.emit(
                "clause",
                at(clause["heard"]),
                text=clause["text"],
                filler=clause["filler"],
                heard_ns=at(clause["heard"]),
                end_ns=at(clause["end"]),
            )
        log.answered(answer.text, [], answered_by="agent")
        log.fact_heard([(clause["text"], at(clause["heard"])) for clause in answer.clauses])
        if session.failure and hi > end:
            log.set_status("error", session.failure)
        elif "first_useful_audio_heard" not in answer.anchors:
            log.set_status("no_answer", answer.why)
        log.emit("turn_done", at(min(hi, end)), status=log.record.status)
    return len(turns)


def barge_in(heard: Heard, start: int, t0: int, end: int) -> dict | None:
    """The caller began a turn (frames `start` to `t0`) while the agent was heard, or in a pause between
    its clauses (heard within `HELD_FRAMES` before, and again after, or a clear then dropped what it had
    still to play): whether the agent then fell silent before the caller had finished, and when (the end
    of its last sound, the clear's if it was silent from the caller's start, or when it fell silent)."""
    if heard.sound(max(0, start - HELD_FRAMES), start + 1) is None:
        return None
    cut = next((f for f in heard.cut_short if start <= f < t0), None)
    loud = np.nonzero(heard.loud[start:t0])[0]
    if not len(loud):  # silent since the caller began: stopped only if a clear cut the rest
        return None if cut is None else {"agent_stopped": True, "stop_ms": (cut - start) * 10}
    last = start + int(loud[-1]) + 1
    stopped = last + GAP_FRAMES <= t0
    stop = last if stopped else heard.silence(last, end)
    return {"agent_stopped": stopped, "stop_ms": None if stop is None else (stop - start) * 10}


@dataclass
class Answer:
    anchors: dict[str, int]  # anchor -> frame
    text: str
    clauses: list[dict]
    why: str | None  # why no useful words were heard


async def heard_answer(heard: Heard, t0: int, hi: int, listener: Listener) -> Answer:
    """The answer heard from frame `t0` to `hi`: its anchors (frames), words and clauses."""
    lo = t0
    if heard.loud[t0 : t0 + 1].any():  # the answer before is still heard: it is not this one's
        lo = heard.silence(t0, hi) or hi
    first = heard.sound(lo, hi)
    if first is None:
        return Answer({}, "", [], "the agent said nothing")
    last = first + int(np.nonzero(heard.loud[first:hi])[0][-1]) + 1
    anchors = {"first_audio_heard": first, "last_audio_heard": last}
    onsets = [first, *(o for o in heard.onsets(first, last) if o > first)]
    spans = []
    for a, b in zip(onsets, [*onsets[1:], last], strict=True):
        # each stretch of sound on its own: its words are its own, whatever Whisper's word times or
        # punctuation would say ("One moment your order shipped", said half a second apart); its
        # lead after it stops at its silence, short of the next stretch, whose first word (heard there,
        # early) would be taken for a clause of this one
        quiet = heard.silence(a, b)
        begin, end = max(lo, a - LEAD_FRAMES), min(hi, (b if quiet is None else quiet) + LEAD_FRAMES)
        words = await listener.words_of(heard.audio[begin * FRAME : end * FRAME])
        chunker = Chunker(listener.min_words, listener.fillers)
        clauses = [c for w in words for c in chunker.feed(w.text + " ", begin + round(w.start_s * 100))]
        for i, clause in enumerate([*clauses, *chunker.flush()]):
            at = a if i == 0 else min(max(clause.first_token_ns, a), b - 1)
            spans.append({"text": as_spoken(clause.text), "filler": clause.filler, "heard": at})
    for i, span in enumerate(spans):  # each clause ends where the next is heard, the last with the sound
        span["end"] = spans[i + 1]["heard"] if i + 1 < len(spans) else last
    useful = next((s for s in spans if not s["filler"]), None)
    if useful is not None:
        anchors["first_useful_audio_heard"] = useful["heard"]
    why = None if useful else ("only filler was heard" if spans else "sound, but no words, was heard")
    return Answer(anchors, " ".join(s["text"] for s in spans), spans, why)


MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"


def as_spoken(text: str) -> str:
    """Whisper's written numbers as they were said ("$70" -> "seventy dollars", "5th" and "December 5" ->
    "fifth", "59" -> "fifty nine"), so the answer reads as the manifests' facts are written; numbers of
    four digits or more stay digits ("1,924" too: order numbers are said digit by digit)."""
    from llm.numbers import money, number, ordinal

    cents = lambda m: int(m[1]) * 100 + int(m[2] or 0)  # noqa: E731
    text = re.sub(r"(?<=\d),(?=\d{3}\b)", "", text)  # "1,924": one number
    text = re.sub(r"\b(?:[A-Z]\.){2,}", lambda m: m[0].replace(".", ""), text)  # "D.H.L.": a name, spelt
    text = re.sub(r"\$(\d{1,3})(?:\.(\d\d))?\b", lambda m: money(cents(m)), text)
    text = re.sub(r"\b(\d{1,3})(?:st|nd|rd|th)\b", lambda m: ordinal(int(m[1])), text)
    text = re.sub(rf"\b({MONTHS}) (\d{{1,2}})\b", lambda m: f"{m[1]} {ordinal(int(m[2]))}", text)  # a date
    return re.sub(r"\b\d{1,3}\b", lambda m: number(int(m[0])), text)
