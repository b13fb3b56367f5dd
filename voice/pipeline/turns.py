"""Turn detection with webrtcvad: classic ring-buffer endpointing.

A turn starts when `start_ratio` of the last `start_ms` of frames are voiced, and ends when `end_ratio`
of the last `end_ms` are unvoiced. That decision (the *endpoint*) lags the end of speech by about
`end_ms`; t0, the end of the last voiced frame, is recovered from frame counts, so it does not depend
on when the detector decided (docs/timing.md).

webrtcvad keeps saying "speech" for about 100 ms after speech ends (its own smoothing), so its last
voiced frame is late. t0 is refined on 10 ms sub-frames: the end of the last one whose energy is within
`tail_db` of the turn's speech level and clearly above the background heard after it. For the same
reason a Pause also comes once `pause_ms` of frames are `tail_db` below the turn's speech level, while
webrtcvad may still say "speech" (`quiet_pause`); only speech at that level again is a Resume then.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from voice.pipeline.audio import to_pcm16
from voice.pipeline.settings import VadConfig


@dataclass
class Turn:
    """One detected caller turn, in samples from the start of the audio."""

    start: int  # first voiced frame
    end: int  # end of the last voiced frame: t0
    decided: int  # the frame at whose end the detector declared the endpoint
    audio: np.ndarray  # pre-roll + speech + hangover, for the ASR
    cut: bool = False  # ended by max_turn_s, not by silence
    continues: bool = False  # it is the previous turn resumed after a short pause (see `resume`)


@dataclass
class Pause:
    """The caller fell silent `pause_ms` into a turn that has not ended: a chance to start on it."""

    audio: np.ndarray  # pre-roll + speech + the silence so far
    end: int  # end of speech so far, as the pause judged it (before t0 refinement)
    at: int  # where the audio ends (a sample of the call)


@dataclass
class Resume:
    """Speech came back after a Pause, before the endpoint: what was started on the pause is stale."""

    at: int  # the voiced frame's end


def frame_db(x: np.ndarray) -> np.ndarray:
    return 10 * np.log10(np.mean(np.square(x, dtype=np.float64), axis=-1) + 1e-12)


class TurnDetector:
    """Feed frames in order with `push(frame)`; it returns a Turn when one ends, a Pause when the caller
    falls silent within a turn and a Resume when speech comes back before the endpoint. `flush()` ends
    a turn still open when the audio runs out; `end_now()` ends it at once (a turn model says it is
    complete) and `wait_longer(ms)` stretches the end window of this turn (it says it is not).

    A caller who pauses mid-sentence longer than the end window gets an endpoint too early. When speech
    starts again within `merge_ms` of that endpoint, `resuming` is true: the pipeline may call
    `resume()` (when the agent has not spoken yet) to make the new speech the continuation of the last
    turn, so the turn that ends next spans both parts, with all the audio in between."""

    def __init__(self, rate: int = 16000, config: VadConfig | None = None):
        import webrtcvad

        self.config = config or VadConfig()
        self.config.validate(rate)
        self.rate = rate
        self.frame_len = rate * self.config.frame_ms // 1000
        self.vad = webrtcvad.Vad(self.config.aggressiveness)
        n_start = self.config.start_ms // self.config.frame_ms
        n_end = self.config.end_ms // self.config.frame_ms
        self.window: deque[bool] = deque(maxlen=n_start)
        self.tail: deque[bool] = deque(maxlen=n_end)
        self.pause_frames = max(1, self.config.pause_ms // self.config.frame_ms)
        self.silent = 0  # unvoiced frames in a row, within a turn
        self.quiet = 0  # frames in a row, within a turn, far below the caller's speech level
        self.paused = False  # a Pause was reported and no speech came since
        self.voiced_db: list[float] = []  # the energy of this turn's voiced frames
        n_pre = self.config.pre_roll_ms // self.config.frame_ms
        self.history: deque[np.ndarray] = deque(maxlen=n_start + n_pre)
        self.pos = 0  # samples consumed
        self.in_turn = self.resuming = self.continues = False
        self.frames: list[np.ndarray] = []
        self.start = self.last_voiced_end = 0
        self.level_db = -np.inf  # the caller's speech level, learned from finished turns
        self.last: Turn | None = None  # the last turn, and every frame since, for `resume`
        self.since_last: list[np.ndarray] = []

    def push(self, frame: np.ndarray) -> Turn | Pause | Resume | None:
        """One frame of float32 samples in [-1, 1] (exactly frame_ms long)."""
        if len(frame) != self.frame_len:
            raise ValueError(f"a VAD frame must be {self.frame_len} samples, not {len(frame)}")
        loud_enough = frame_db(frame) >= self.level_db - self.config.gate_db  # babble stays below
        voiced = self.vad.is_speech(to_pcm16(frame), self.rate) and loud_enough  # the VAD sees every frame
        frame_start, self.pos = self.pos, self.pos + self.frame_len
        if not self.in_turn:
            self.history.append(frame)
            if (
                self.last is not None
                and self.pos - self.last.decided <= self.config.merge_ms * self.rate // 1000
            ):
                self.since_last.append(frame)
            self.window.append(voiced)
            if len(self.window) == self.window.maxlen and sum(self.window) >= self.config.start_ratio * len(
                self.window
            ):
                self.in_turn = True
                first_voiced = self.window.index(True)
                self.start = self.pos - (len(self.window) - first_voiced) * self.frame_len
                self.last_voiced_end = self.pos if voiced else frame_start
                self.frames = list(self.history)
                self.tail.clear()
                self.resuming = self.last is not None and len(self.since_last) * self.frame_len == (
                    self.pos - self.last.decided
                )
            return None
        self.frames.append(frame)
        self.tail.append(voiced)
        quiet = self._quiet(frame, voiced)
        self.quiet = self.quiet + 1 if quiet else 0
        event = None
        if voiced and (not quiet or self.silent >= self.pause_frames):  # speech (not webrtcvad's lag)
            event = Resume(self.pos) if self.paused else None
            if event and self.tail.maxlen != self.config.end_ms // self.config.frame_ms:
                self.wait_longer(self.config.end_ms)  # what was judged on the pause no longer holds
            self.silent, self.last_voiced_end, self.paused = 0, self.pos, False
        else:
            self.silent = 0 if voiced else self.silent + 1
            self.last_voiced_end = self.pos if voiced else self.last_voiced_end
            if not self.paused and (self.silent >= self.pause_frames or self.quiet >= self.pause_frames):
                self.paused = True
                end = self.pos - max(self.silent, self.quiet) * self.frame_len
                event = Pause(np.concatenate(self.frames), end, self.pos)
        ended = (  # mostly unvoiced, and not on a voiced frame: that is speech coming back
            not voiced
            and len(self.tail) == self.tail.maxlen
            and self.tail.count(False) >= self.config.end_ratio * len(self.tail)
        )
        if ended and self._refine_end(np.concatenate(self.frames)) >= self.pos - self.rate // 50:
            ended = False  # the last 20 ms are as loud as speech: it is coming back (webrtcvad lags there)
        cut = self.pos - self.start >= self.config.max_turn_s * self.rate
        return self._end(cut=cut and not ended) if ended or cut else event

    def _quiet(self, frame: np.ndarray, voiced: bool) -> bool:
        """Far below this turn's speech level (as t0's refinement judges it): webrtcvad says "speech" for
        ~100 ms after speech ends, the energy knows sooner."""
        if not self.config.quiet_pause:
            return False
        sub = frame_db(frame.reshape(-1, self.rate // 100))  # its 10 ms sub-frames, as t0 is refined
        if voiced:
            self.voiced_db.extend(sub)
        level = np.percentile(self.voiced_db, 90) if len(self.voiced_db) > 10 else -np.inf  # too soon to say
        return sub.max() < level - self.config.tail_db

    def end_now(self) -> Turn:
        """End the turn under way here (its t0 refined as at any endpoint)."""
        if not self.in_turn:
            raise RuntimeError("end_now() needs a turn under way")
        return self._end(cut=False)

    def wait_longer(self, end_ms: int) -> None:
        """Make this turn's end window `end_ms` long (back to the configured one when speech resumes or
        the next turn starts)."""
        self.tail = deque(self.tail, maxlen=max(1, end_ms // self.config.frame_ms))

    def resume(self) -> None:
        """Make the turn just started the continuation of the last one (only while `resuming`)."""
        if not self.resuming:
            raise RuntimeError("resume() only right after speech restarts within merge_ms")
        self.frames = [self.last.audio, *self.since_last]
        self.start = self.last.start
        self.continues, self.resuming = True, False

    def _refine_end(self, audio: np.ndarray) -> int:
        """The end of speech at 10 ms resolution, searched from 300 ms before the VAD's last voiced
        frame to the endpoint (see the module docstring)."""
        sub = self.rate // 100
        first = self.pos - len(audio)  # sample index of audio[0]
        n = len(audio) // sub
        db = frame_db(audio[: n * sub].reshape(n, sub))
        vad_end = (self.last_voiced_end - first) // sub
        speech, after = db[max(0, (self.start - first) // sub) : vad_end], db[vad_end:]
        if len(speech) == 0 or len(after) == 0:
            return self.last_voiced_end
        self.level_db = max(self.level_db, float(np.percentile(speech, 90)))
        threshold = max(np.percentile(speech, 90) - self.config.tail_db, np.median(after) + 6)
        lo = max(0, vad_end - 30)
        loud = np.nonzero(db[lo:] >= threshold)[0]
        return first + (lo + loud[-1] + 1) * sub if len(loud) else self.last_voiced_end

    def flush(self) -> Turn | None:
        return self._end(cut=False) if self.in_turn else None

    def _end(self, cut: bool) -> Turn:
        audio = np.concatenate(self.frames)
        end = self.pos if cut else self._refine_end(audio)
        turn = Turn(int(self.start), int(end), self.pos, audio, cut, self.continues)
        self.in_turn = self.resuming = self.continues = self.paused = False
        self.silent = self.quiet = 0
        self.voiced_db = []
        self.tail = deque(maxlen=self.config.end_ms // self.config.frame_ms)
        self.window.clear()
        self.history.clear()
        self.frames, self.last, self.since_last = [], None if cut else turn, []
        return turn
