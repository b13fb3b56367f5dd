"""Each turn's audio as it sounded on the line: the caller's speech and the agent's answer as played
(cut where a barge-in cut it), on one time axis. One stereo FLAC file per turn in the run directory
(`audio/`; left: the caller, right: the agent), listed in `audio.jsonl` with where it starts from t0 and
a coarse loudness outline; the HTML report plays it, as Opus, beside the turn's anchors.

The call keeps its audio while it runs (`CallAudio`: the frames the turn detector got, and what the
speaker was given, through `TappedSpeaker`); the files are written once the call is over, off the
event loop, so encoding never delays a timestamp. FLAC, lossless, costs under 0.1% of the clip's length
to write (Opus 1.4%, which under load took CPU the calls needed); Opus is made when a page is."""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import soundfile as sf

from llm.clock import ms
from voice.pipeline.audio import RATE, to_float
from voice.timing.timeline import Timeline

BEFORE_NS = 300_000_000  # kept before the caller starts speaking
AFTER_NS = 500_000_000  # and after the last thing heard
LONGEST_S = 30.0  # a turn's clip is cut here (a monologue, an answer that never ended)
OUTLINE_PER_S = 50  # loudness points per second for the page's waveform
PAGE_QUALITY = 0.9  # the page's Opus, in soundfile's compression level (0: best, 1: smallest): ~64 kbit/s


def _at_rate(samples: np.ndarray, rate: int) -> np.ndarray:
    """Mono float32 in -1..1 at RATE from what a speaker was handed (piper's int16). Linear
    interpolation: enough to listen to, and unlike voice.pipeline.audio.resample it does not ring at a piece's
    hard start."""
    samples = to_float(np.asarray(samples).reshape(-1))
    if rate == RATE or not len(samples):
        return samples
    n = int(len(samples) * RATE / rate)
    return np.interp(np.arange(n) * (rate / RATE), np.arange(len(samples)), samples).astype(np.float32)


class CallAudio:
    """One call's audio on the call's clock: the caller's frames from `origin_ns` on, and each piece
    the speaker played, as it was handed over, with the time it started being heard. Kept as it comes
    (on the event loop); joined and converted only in `clips`, once per call."""

    def __init__(self):
        self.origin_ns: int | None = None
        self.frames: list[np.ndarray] = []
        self.pieces: list[tuple[int, np.ndarray, int]] = []  # (heard from, samples, their rate)

    @classmethod
    def whole(cls, origin_ns: int, caller: np.ndarray, agent: np.ndarray) -> CallAudio:
        """A call whose two sides are known whole once it is over, both at RATE from `origin_ns` (what a
        probe sent and heard: voice/runs/probe/)."""
        audio = cls()
        audio.origin_ns, audio.frames, audio.pieces = origin_ns, [caller], [(origin_ns, agent, RATE)]
        return audio

    def heard(self, frame: np.ndarray, origin_ns: int) -> None:
        if self.origin_ns is None:
            self.origin_ns = origin_ns
        self.frames.append(frame)

    def played(self, speech, start_ns: int) -> None:
        self.pieces.append((start_ns, speech.audio, speech.sample_rate))

    def stopped(self, at_ns: int) -> None:
        """Playback was cut at `at_ns`: nothing queued is heard after it."""
        self.pieces = [
            (start, samples[: max(0, (at_ns - start) * rate // 1_000_000_000)], rate)
            for start, samples, rate in self.pieces
        ]

    def clips(self, spans: list[tuple[int, int]]) -> Iterator[np.ndarray]:
        """(samples, 2) float32 for each (start_ns, end_ns): the caller left, the agent right."""
        caller = np.concatenate(self.frames) if self.frames else np.zeros(0, np.float32)
        agent = [(heard_ns, _at_rate(samples, rate)) for heard_ns, samples, rate in self.pieces]
        for start_ns, end_ns in spans:
            out = np.zeros((max(0, (end_ns - start_ns) * RATE // 1_000_000_000), 2), np.float32)
            if self.origin_ns is not None:
                _add(out[:, 0], caller, (self.origin_ns - start_ns) * RATE // 1_000_000_000)
            for heard_ns, samples in agent:
                _add(out[:, 1], samples, (heard_ns - start_ns) * RATE // 1_000_000_000)
            yield np.clip(out, -1.0, 1.0)


def _add(into: np.ndarray, samples: np.ndarray, offset: int) -> None:
    """Add `samples` into `into` starting at sample `offset` (either may stick out of the other)."""
    lo, hi = max(0, offset), min(len(into), offset + len(samples))
    if hi > lo:
        into[lo:hi] += samples[lo - offset : hi - offset]


class TappedSpeaker:
    """A speaker that also hands what it plays, and where it was cut, to a `CallAudio`."""

    def __init__(self, speaker, audio: CallAudio):
        self.speaker, self.audio = speaker, audio

    @property
    def playing(self) -> bool:
        return self.speaker.playing

    async def play(self, speech, ready_ns: int) -> tuple[int, int]:
        start, end = await self.speaker.play(speech, ready_ns)
        self.audio.played(speech, start)
        return start, end

    async def drain(self, end_ns: int) -> None:
        await self.speaker.drain(end_ns)

    async def stop(self) -> int:
        at = await self.speaker.stop()
        self.audio.stopped(at)
        return at


def spans(timeline: Timeline) -> dict[int, tuple[int, int, int]]:
    """Each turn's (clip start, clip end, t0) on the call's clock: from just before the caller spoke
    to just after the last thing heard (the answer's end, a barge-in's silence), at most LONGEST_S."""
    starts: dict[int, int] = {}
    ends: dict[int, int] = {}
    for e in timeline.events:
        if e.turn < 0:
            continue
        if e.name == "speech_start":
            starts.setdefault(e.turn, e.t_ns)
        end = e.data.get("stopped_ns", e.t_ns) if e.name == "barge_in" else e.t_ns
        if e.name in ("t0", "last_audio_heard", "barge_in", "first_audio_heard"):
            ends[e.turn] = max(ends.get(e.turn, end), end)
    out = {}
    for turn, record in timeline.turns.items():
        t0 = record.anchors.get("t0")
        if t0 is None:
            continue
        start = min(starts.get(turn, t0 - 2_000_000_000), t0) - BEFORE_NS
        end = min(max(ends.get(turn, t0), t0) + AFTER_NS, start + int(LONGEST_S * 1e9))
        out[turn] = (start, end, t0)
    return out


def outline(clip: np.ndarray) -> list[list[int]]:
    """Per channel, the peak of every 1/OUTLINE_PER_S s, 0..100: the page draws the waveform from it."""
    step = RATE // OUTLINE_PER_S
    n = len(clip) // step
    peaks = np.abs(clip[: n * step]).reshape(n, step, 2).max(axis=1) if n else np.zeros((0, 2))
    return [[int(round(v * 100)) for v in peaks[:, c]] for c in range(2)]


def encode(clip: np.ndarray) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, clip, RATE, format="FLAC", subtype="PCM_16")
    return buf.getvalue()


def for_page(data: bytes) -> bytes:
    """A clip file's bytes as Ogg Opus, about 8 KB a second, what a page embeds."""
    clip, rate = sf.read(io.BytesIO(data), dtype="float32")
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", rate, 2, format="OGG", subtype="OPUS", compression_level=PAGE_QUALITY) as f:
        f.write(clip)
    return buf.getvalue()


def file_name(call: str, turn: int) -> str:
    """A portable file name for a call's turn (a name changed to fit gets a hash, so two never meet)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", call)[:80]
    if safe != call:
        safe += "-" + hashlib.sha1(call.encode()).hexdigest()[:8]
    return f"{safe}-{turn}.flac"


def write_turns(folder: Path, timeline: Timeline, audio: CallAudio) -> list[dict]:
    """Write each turn's clip of the call into `folder`; its rows for `audio.jsonl`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    turns = sorted(spans(timeline).items())
    clips = audio.clips([(start, end) for _, (start, end, _) in turns])
    for (turn, (start, _, t0)), clip in zip(turns, clips, strict=True):
        if not len(clip):
            continue
        name = file_name(timeline.call, turn)
        (folder / name).write_bytes(encode(clip))
        rows.append(
            {
                "call": timeline.call,
                "turn": turn,
                "file": f"{folder.name}/{name}",
                "start_ms": ms(t0, start),
                "seconds": round(len(clip) / RATE, 3),
                "outline": outline(clip),
            }
        )
    return rows
