"""A turn's clip puts the caller and the agent where they were heard on the call's clock, and a cut
(barge-in) silences everything the speaker had queued after it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voice.pipeline.audio import RATE
from voice.record.turnaudio import AFTER_NS, BEFORE_NS, CallAudio, file_name, spans
from voice.timing.timeline import Timeline

MS = 1_000_000


@dataclass
class Speech:
    audio: np.ndarray
    sample_rate: int


def test_the_clip_places_both_sides_on_the_calls_clock_and_a_cut_ends_the_agent():
    audio = CallAudio()
    for _ in range(100):  # 3 s of caller audio from 1 s on the call's clock, at 0.5
        audio.heard(np.full(480, 0.5, np.float32), origin_ns=1000 * MS)
    audio.played(Speech(np.full(22050, 0.25, np.float32), 22050), start_ns=2500 * MS)  # 1 s at 22.05 kHz
    audio.played(Speech(np.full(16000, 8192, np.int16), 16000), start_ns=3500 * MS)  # piper's int16
    audio.stopped(3000 * MS)  # a barge-in: half the first piece heard, none of the second
    (clip,) = audio.clips([(500 * MS, 4500 * MS)])
    assert clip.shape == (4 * RATE, 2)
    at = lambda ms: int((ms - 500) * RATE / 1000)  # noqa: E731
    assert (clip[: at(1000), 0] == 0).all() and (clip[at(1000) : at(4000), 0] == 0.5).all()
    assert (clip[at(4000) :, 0] == 0).all()
    assert (clip[: at(2500), 1] == 0).all() and np.allclose(clip[at(2500) : at(3000), 1], 0.25)
    assert (clip[at(3000) :, 1] == 0).all()
    audio.pieces.clear()
    audio.played(Speech(np.full(16000, 8192, np.int16), 16000), start_ns=3500 * MS)
    (clip,) = audio.clips([(3500 * MS, 4500 * MS)])
    assert np.allclose(clip[:, 1], 0.25)


def test_a_turns_span_runs_from_its_speech_to_the_last_thing_heard():
    tl = Timeline("c")
    tl.emit(0, "speech_start", t_ns=1000 * MS)
    tl.emit(0, "t0", t_ns=2000 * MS)
    tl.emit(0, "last_audio_heard", t_ns=5000 * MS)
    tl.emit(1, "t0", t_ns=9000 * MS)  # no speech_start: 2 s before t0
    tl.emit(1, "barge_in", t_ns=9500 * MS, stopped_ns=9600 * MS)
    assert spans(tl) == {
        0: (1000 * MS - BEFORE_NS, 5000 * MS + AFTER_NS, 2000 * MS),
        1: (7000 * MS - BEFORE_NS, 9600 * MS + AFTER_NS, 9000 * MS),
    }


def test_file_names_are_portable_and_never_collide():
    assert file_name("call01", 3) == "call01-3.flac"
    a, b = file_name("a/b", 0), file_name("a?b", 0)
    assert a != b and "/" not in a and "?" not in b
