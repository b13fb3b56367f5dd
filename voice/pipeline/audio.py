"""Audio in and out for replay: decoding any file into 16 kHz mono, a recording as a pipeline source,
and the simulated playback device.

Decoding goes through PyAV (FFmpeg; already a faster-whisper dependency), so WAV, FLAC, MP3 and OGG at
any sample rate work the same way; resampling uses soxr (never linear interpolation, which aliases).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llm.clock import ns

RATE = 16000  # what the turn detector and the ASR take
AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".oga", ".opus", ".m4a")


# What FFmpeg (through PyAV) raises on a hostile header, besides its own errors
DECODE_ERRORS = (UnicodeDecodeError, IndexError, ValueError, AttributeError, TypeError, OverflowError,
                 ZeroDivisionError, MemoryError)  # fmt: skip


class AudioError(ValueError):
    """A file that cannot be used as caller audio; the message says why."""


@dataclass
class Audio:
    samples: np.ndarray  # float32 mono in [-1, 1] at RATE
    source_rate: int
    channels: int
    channel: int | None  # the caller channel used (None: mono source)
    path: str = ""
    cut_short: str | None = None  # the file broke off here (what the decoder said); the audio before it

    @property
    def seconds(self) -> float:
        return len(self.samples) / RATE


def resample(samples: np.ndarray, rate: int, to: int = RATE) -> np.ndarray:
    import soxr

    return samples if rate == to else soxr.resample(samples, rate, to, quality="HQ").astype(np.float32)


def pick_channel(planar: np.ndarray, channel: int | str) -> int:
    """The caller's channel of a multichannel file: given, or the loudest one ("auto")."""
    if channel == "auto":
        return int(np.argmax(np.sqrt(np.mean(planar.astype(np.float64) ** 2, axis=1))))
    if not 0 <= int(channel) < len(planar):
        raise AudioError(f"channel {channel} asked for, but the file has {len(planar)} channel(s)")
    return int(channel)


@contextlib.contextmanager
def _audio_stream(path: Path) -> Iterator[tuple[object, object]]:
    """(container, its first audio stream), open; whatever FFmpeg (through PyAV) raises on a hostile file,
    there or in the `with` body, becomes an AudioError naming the file."""
    import av

    if not path.is_file():
        raise AudioError(f"{path}: {'not a file' if path.exists() else 'no such file'}")
    try:
        with av.open(str(path)) as container:
            if not container.streams.audio:
                raise AudioError(f"{path}: no audio stream in this file")
            yield container, container.streams.audio[0]
    except AudioError:
        raise
    except (av.error.FFmpegError, *DECODE_ERRORS) as e:
        raise AudioError(f"{path}: cannot decode ({type(e).__name__}: {e}); corrupt or not audio") from e


def probe_audio(path: str | Path) -> None:
    """Raise AudioError for a file `load_audio` would refuse at once: missing, not a file, no audio
    stream, or a first frame that does not decode. Milliseconds a file: a run checks every input before
    it loads anything (a file that breaks off later still gives the audio before the break)."""
    with _audio_stream(Path(path)) as (container, stream):
        if next(container.decode(stream), None) is None:
            raise AudioError(f"{path}: the file holds no audio samples")


def load_audio(path: str | Path, channel: int | str = "auto") -> Audio:
    """Decode a file into 16 kHz mono float32. Raises AudioError for a missing, unreadable, corrupt or
    empty file. A file that breaks off (truncated, garbage after its frames) gives the audio decoded up to
    the break, with `cut_short` saying so."""
    path = Path(path)
    with _audio_stream(path) as (container, stream):
        rate = stream.rate or stream.codec_context.sample_rate
        frames, cut_short = _decode(container, stream)
        planar_format = frames[0].ndim == 2 and stream.format.is_planar if frames else True
        declared = _declared_seconds(container, stream, path)
    if not rate or rate < 1:
        raise AudioError(f"{path}: the file gives no sample rate; corrupt or not audio")
    if not frames or sum(f.shape[-1] for f in frames) == 0:
        raise AudioError(f"{path}: the file holds no audio samples")
    channels = stream.codec_context.channels or 1
    data = np.concatenate(frames, axis=-1)
    decoded = data.shape[-1] / (1 if planar_format else channels) / rate
    if cut_short is None and declared is not None and declared - decoded > 0.25:
        cut_short = f"its header says {declared:.1f} s, {decoded:.1f} s of it could be decoded"
    if cut_short is None and _ogg_unended(path):
        cut_short = "the Ogg stream stops before its last page"
    if not planar_format:  # packed: one row of interleaved samples
        data = data.reshape(-1, channels).T
    data = to_float(data)
    picked = pick_channel(data, channel) if channels > 1 else None
    mono = data[picked if picked is not None else 0]
    if not np.all(np.isfinite(mono)):
        raise AudioError(f"{path}: the audio holds NaN or infinite samples")
    return Audio(resample(mono, rate), rate, channels, picked, str(path), cut_short)


def _declared_seconds(container, stream, path: Path) -> float | None:
    """How long the file says it is, when its header says (FFmpeg measures a WAV by its size, so a WAV's
    own data chunk is read)."""
    if path.suffix.lower() == ".wav":
        return _wav_seconds(path)
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    return container.duration / 1e6 if container.duration else None


def _wav_seconds(path: Path) -> float | None:
    """The length a RIFF/WAVE header declares (its fmt and data chunks), or None."""
    import struct

    with path.open("rb") as f:
        head = f.read(1 << 16)
    if head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, rate_bytes = 12, None
    while pos + 8 <= len(head):
        kind, size = head[pos : pos + 4], struct.unpack("<I", head[pos + 4 : pos + 8])[0]
        if kind == b"fmt " and pos + 16 <= len(head):
            rate_bytes = struct.unpack("<I", head[pos + 16 : pos + 20])[0]  # bytes per second
        if kind == b"data":
            return size / rate_bytes if rate_bytes and size != 0xFFFFFFFF else None
        pos += 8 + size + (size & 1)
    return None


def _ogg_unended(path: Path) -> bool:
    """An Ogg file whose last page is incomplete or not marked end-of-stream: it was cut off. (Ogg
    declares no length, and FFmpeg decodes a cut Ogg to its last whole page without a word.)"""
    import struct

    with path.open("rb") as f:
        if f.read(4) != b"OggS":
            return False
        f.seek(max(0, path.stat().st_size - (1 << 17)))
        tail = f.read()
    at = tail.rfind(b"OggS")
    if at < 0 or at + 27 > len(tail):
        return True
    flags, segments = tail[at + 5], tail[at + 26]
    table = tail[at + 27 : at + 27 + segments]
    size = 27 + segments + sum(struct.unpack(f"{segments}B", table)) if len(table) == segments else None
    whole = size is not None and at + size <= len(tail)
    return not (whole and flags & 4)  # 4: the end-of-stream page


def _decode(container, stream) -> tuple[list[np.ndarray], str | None]:
    """Every frame up to the end, or up to where the stream breaks once some audio was decoded."""
    import av

    frames: list[np.ndarray] = []
    try:
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray())
    except (av.error.FFmpegError, ValueError) as e:
        if not frames:
            raise
        return frames, f"{type(e).__name__}: {e}"
    return frames, None


def to_float(data: np.ndarray) -> np.ndarray:
    """Samples as float32 in -1..1, from any PCM integer type or float."""
    if data.dtype.kind == "f":
        return data.astype(np.float32)
    scale = float(np.iinfo(data.dtype).max) + 1
    if data.dtype.kind == "u":  # 8-bit PCM is unsigned around 128
        return ((data.astype(np.float32) - scale / 2) / (scale / 2)).astype(np.float32)
    return (data.astype(np.float32) / scale).astype(np.float32)


def to_pcm16(samples: np.ndarray) -> bytes:
    """16-bit little-endian PCM, what webrtcvad takes."""
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


class RecordingSource:
    """A recording's frames as they would arrive from a line. Fast mode skips the waits (on the call's
    clock) whenever `busy()` says no turn is in flight; realtime mode waits for each frame."""

    def __init__(self, samples: np.ndarray, frame_len: int, clock, fast: bool = False, busy=lambda: True):
        self.samples, self.frame_len, self.clock, self.fast, self.busy = samples, frame_len, clock, fast, busy
        self.origin_ns = 0

    async def frames(self):
        n = self.frame_len
        self.origin_ns = self.clock()
        for i in range(len(self.samples) // n):
            wait = self.origin_ns + (i + 1) * n * 1_000_000_000 // RATE - self.clock()
            if wait > 0 and self.fast and not self.busy():
                self.clock.skip(wait)
            elif wait > 0:
                await asyncio.sleep(wait / 1e9)
            yield self.samples[i * n : (i + 1) * n]


class SimulatedSpeaker:
    """Replay's playback device: it plays each piece of audio when it arrives (plus the output latency)
    or when the previous piece ends, at real-time rate, and says when each piece is heard, on the call's
    clock. `lived` (realtime replay) behaves like a device: `play` returns when the audio starts being
    heard and `drain` when it has been, so anchors are emitted when they happen and a caller who speaks
    meanwhile cuts the answer (barge-in), as in a live call. Otherwise (fast replay) it never waits: the
    heard times are computed when the audio is queued."""

    def __init__(self, latency_ms: float = 0.0, clock=time.monotonic_ns, lived: bool = False):
        self.latency_ns = ns(latency_ms)
        self.busy_until_ns = 0
        self.clock, self.lived = clock, lived

    @property
    def playing(self) -> bool:
        return self.busy_until_ns > self.clock()

    async def play(self, speech, ready_ns: int) -> tuple[int, int]:
        start = max(ready_ns + self.latency_ns, self.busy_until_ns)
        self.busy_until_ns = start + int(speech.seconds * 1e9)
        await self._until(start)
        return start, start + int(speech.seconds * 1e9)

    async def drain(self, end_ns: int) -> None:
        await self._until(end_ns)

    async def stop(self) -> int:
        self.busy_until_ns = min(self.busy_until_ns, self.clock())
        return self.clock()

    async def _until(self, t_ns: int) -> None:
        if self.lived and (wait := t_ns - self.clock()) > 0:
            await asyncio.sleep(wait / 1e9)
