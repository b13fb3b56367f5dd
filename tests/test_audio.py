"""Decoding caller audio: every container, any rate, the caller channel, and clear errors."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import soundfile as sf

from tts.piper import Speech
from voice.pipeline.audio import RATE, AudioError, SimulatedSpeaker, load_audio


def tone(rate: int, seconds: float = 1.0, freq: float = 440.0) -> np.ndarray:
    t = np.arange(int(rate * seconds)) / rate
    return (0.5 * np.sin(2 * np.pi * freq * t)).astype(np.float32)


@pytest.mark.parametrize(
    ("name", "rate", "fmt"),
    [("a.wav", 8000, "WAV"), ("b.flac", 44100, "FLAC"), ("c.ogg", 22050, "OGG"), ("d.mp3", 48000, "MP3")],
)
def test_formats_and_rates_decode_to_16k_mono(tmp_path, name, rate, fmt):
    path = tmp_path / name
    sf.write(path, tone(rate), rate, format=fmt)
    audio = load_audio(path)
    assert audio.source_rate == rate and audio.channels == 1 and audio.channel is None
    assert abs(audio.seconds - 1.0) < 0.06  # mp3 pads a frame
    # soxr keeps the tone's level and pitch: the spectrum peaks at 440 Hz
    spectrum = np.abs(np.fft.rfft(audio.samples[: RATE // 2]))
    assert abs(np.argmax(spectrum) * 2 - 440) <= 4
    assert 0.3 < np.abs(audio.samples).max() <= 0.55


def test_stereo_picks_the_loudest_or_the_asked_channel(tmp_path):
    path = tmp_path / "call.wav"
    quiet, loud = 0.05 * tone(16000), tone(16000, freq=300)
    sf.write(path, np.stack([quiet, loud], axis=1), 16000)
    assert load_audio(path).channel == 1
    picked = load_audio(path, channel=0)
    assert picked.channel == 0 and np.abs(picked.samples).max() < 0.05
    with pytest.raises(AudioError, match="has 2 channel"):
        load_audio(path, channel=2)


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(AudioError, match="no such file"):
        load_audio(tmp_path / "missing.wav")
    corrupt = tmp_path / "corrupt.flac"
    corrupt.write_bytes(b"fLaC" + bytes(range(256)) * 8)
    with pytest.raises(AudioError, match="corrupt|no audio"):
        load_audio(corrupt)
    text = tmp_path / "notes.wav"
    text.write_text("this is not audio\n" * 50)
    with pytest.raises(AudioError):
        load_audio(text)
    empty = tmp_path / "empty.wav"
    sf.write(empty, np.zeros(0, np.float32), 16000)
    with pytest.raises(AudioError, match="no audio samples"):
        load_audio(empty)


def test_simulated_speaker_plays_in_order_at_real_time_rate():
    speaker = SimulatedSpeaker(latency_ms=20)

    def play(seconds: float, ready: int) -> tuple[int, int]:
        return asyncio.run(speaker.play(Speech(np.zeros(int(seconds * 1000)), 1000), ready))

    assert play(1.5, 1_000_000_000) == (1_020_000_000, 2_520_000_000)
    # a clause ready before the last one ends waits for it; one ready later starts when written
    assert play(0.5, 2_000_000_000) == (2_520_000_000, 3_020_000_000)
    assert play(0.1, 5_000_000_000)[0] == 5_020_000_000


@pytest.mark.parametrize(("name", "fmt"), [("cut.flac", "FLAC"), ("cut.mp3", "MP3"), ("cut.wav", "WAV")])
@pytest.mark.parametrize("damage", ["truncated", "garbage after"])
def test_a_file_that_breaks_off_gives_the_audio_before_the_break(tmp_path, name, fmt, damage):
    path = tmp_path / name
    sf.write(path, tone(16000, seconds=4.0), 16000, format=fmt)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncated" else data + bytes(range(256)) * 64)
    audio = load_audio(path)
    if damage == "truncated":
        assert 1.5 < audio.seconds < 2.5  # the first half, decoded
    else:
        assert abs(audio.seconds - 4.0) < 0.1  # all of it
    assert 0.3 < np.abs(audio.samples[:RATE]).max() <= 0.55
    if damage == "truncated":
        assert audio.cut_short  # said, not silently taken as the whole file


@pytest.mark.parametrize(("name", "subtype"), [("cut.ogg", "VORBIS"), ("cut.opus", "OPUS")])
def test_a_cut_ogg_gives_its_whole_pages_and_says_it_was_cut(tmp_path, name, subtype):
    """Ogg declares no length and FFmpeg decodes a cut one without a word: its last page tells."""
    rng = np.random.default_rng(0)
    sound = tone(16000, seconds=20.0) + rng.normal(0, 0.05, 320_000).astype(np.float32)  # pages fill
    path = tmp_path / name
    sf.write(path, sound, 16000, format="OGG", subtype=subtype)
    whole = load_audio(path)
    assert whole.cut_short is None and abs(whole.seconds - 20) < 0.1
    data = path.read_bytes()
    path.write_bytes(data + bytes(range(256)) * 64)  # garbage after its last page: all of it, not cut
    assert load_audio(path).cut_short is None
    path.write_bytes(data[: len(data) // 2])
    cut = load_audio(path)
    assert 7 < cut.seconds < 10.5 and cut.cut_short == "the Ogg stream stops before its last page"
