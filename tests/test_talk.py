"""`ttfat talk` end to end on virtual audio devices (tests/pulse.py: PulseAudio with a null sink as the
caller's line, whose monitor is the microphone, and a null sink as the speaker, which the test
records)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr.whisper import Transcriber
from tests.pulse import OUT_RATE, PulseError, pulse_log, say, session, virtual_devices, wait_for_turns
from voice.pipeline.audio import load_audio, resample
from voice.record.runlog import read_audio
from voice.reports.summary import normalize
from voice.runs.replay import find_calls

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def pulse(tmp_path_factory):
    try:
        with virtual_devices(tmp_path_factory.mktemp("pulse")) as env:
            yield env
    except PulseError as e:
        pytest.fail(str(e))


def question(tmp_path: Path, call: str, turn: int) -> tuple[Path, dict]:
    """One caller turn cut out of a bundled recording (with half a second around it)."""
    (c,) = [c for c in find_calls(["recordings"]) if c.name == call]
    ref = c.reference[turn]
    audio = load_audio(c.path, c.channel).samples
    a, b = int((ref["speech_start_s"] - 0.5) * 16000), int((ref["speech_end_s"] + 0.5) * 16000)
    path = tmp_path / f"{call}-{turn}.wav"
    sf.write(path, audio[a:b], 16000)
    return path, ref


def heard_share(said: str, heard: str) -> float:
    """The share of the words of `said` that are among the words of `heard`, digits as words (Whisper
    writes the piper voice's "eight" as "8")."""
    words, heard_words = normalize(said), set(normalize(heard))
    return sum(w in heard_words for w in words) / max(len(words), 1)


def events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


def test_a_spoken_question_is_answered_through_the_speaker(pulse, tmp_path):
    path, ref = question(tmp_path, "call04", 0)  # "what time do you open on saturday"
    out = tmp_path / "run"
    with session(pulse, out) as (proc, capture):
        say(pulse, path)
        (turn,) = wait_for_turns(out, 1)
        time.sleep(max(0.5, (turn["complete_ms"] - turn["first_audio_ms"]) / 1e3 + 0.5))  # let it play out
    assert proc.returncode == 0 and "first useful audio" in proc.console  # the live console
    assert turn["status"] == "ok" and turn["order_violations"] == []
    assert all(turn[k] is not None for k in ("endpoint_ms", "asr_ms", "ttfat_ms", "first_useful_audio_ms"))
    assert json.loads((out / "summary.json").read_text())["turns"] == 1
    heard = Transcriber().transcribe(resample(capture.audio(), OUT_RATE)).text.lower()
    # The whole answer reached the speaker: its first clause's "saturday", its last word, and most of its
    # words are heard again. Not all: piper's voice varies from one synthesis to the next, and Whisper
    # re-hearing it wrote "from eight" as "for may" in 3 captures of 8, and in 4 readings of 8 of the
    # run's record of what was played: the speaker got what was played, the words are Whisper's slip.
    assert "saturday" in heard and "night" in heard, (turn["answer"], heard)
    assert heard_share(turn["answer"], heard) >= 0.7, (turn["answer"], heard)
    # "heard" comes from the output stream's clock: the capture agrees within 50 ms
    (first_heard,) = [e["t_ns"] for e in events(out) if e["event"] == "first_audio_heard"]
    captured = capture.time_of(lambda x: x != 0)  # the sink is digital silence until the agent speaks
    print(f"first audio heard: recorded vs captured {(first_heard - captured) / 1e6:+.1f} ms")
    assert abs(first_heard - captured) <= 50e6
    # the turn's clip in the run directory: the caller as the microphone took it, the answer as played
    clip, _ = sf.read(io.BytesIO(read_audio(out)[("talk", 0)]["data"]), dtype="float32")
    said, answer = (Transcriber().transcribe(clip[:, c]).text.lower() for c in (0, 1))
    assert "saturday" in said and "saturday" in answer, (said, answer)


def test_barge_in_stops_playback_and_records_its_latency(pulse, tmp_path):
    long_answer, _ = question(tmp_path, "call04", 1)  # "how long do i have to return something"
    interruption, _ = question(tmp_path, "call13", 2)  # "bye bye"
    out = tmp_path / "run"
    with session(pulse, out) as (_, capture):
        say(pulse, long_answer)
        deadline = time.monotonic() + 60
        while not any(e["event"] == "first_audio_heard" for e in events(out)):
            assert time.monotonic() < deadline, "the agent never spoke"
            time.sleep(0.05)
        time.sleep(0.3)  # the agent is mid-sentence (its answer runs for seconds)
        say(pulse, interruption)
        wait_for_turns(out, 2)
    barges = [e for e in events(out) if e["event"] == "barge_in"]
    assert len(barges) == 1, [(e["turn"], e["event"], e.get("text")) for e in events(out)]
    barge = barges[0]
    print(f"barge-in: playback stopped {barge['stop_ms']} ms after the caller's speech was detected")
    assert barge["turn"] == 0 and 0 <= barge["stop_ms"] <= 150
    # the speaker really went quiet: no agent audio from 200 ms after the recorded stop until the next answer
    turns = wait_for_turns(out, 2)
    heard = [e["t_ns"] for e in events(out) if e["event"] == "first_audio_heard" and e["turn"] == 1]
    next_answer = min(heard, default=float("inf"))
    late = [
        c
        for t, c in capture.chunks
        if barge["stopped_ns"] + 200e6 < t < next_answer and np.abs(c).max() > 300
    ]
    assert not late
    assert turns[0]["barge_in_stop_ms"] == barge["stop_ms"] and turns[1]["transcript"]


def test_devices_are_listed_and_a_wrong_one_is_explained(pulse):
    def run(*a):
        return subprocess.run(
            [sys.executable, "-m", "ttfat", "talk", *a], env=pulse, capture_output=True, text=True, timeout=60
        )

    listed = run("--list-devices")
    assert listed.returncode == 0 and "pulse" in listed.stdout, pulse_log(pulse)
    wrong = run("--input-device", "no such microphone")
    assert wrong.returncode == 2 and "cannot open the microphone no such microphone" in wrong.stderr


def test_missing_portaudio_is_explained(monkeypatch):
    """Without PortAudio, `import sounddevice` raises OSError: injected here, since the library is
    installed on this machine."""
    from voice.runs.live import AudioDeviceError, sounddevice

    class NoPortAudio:
        def find_spec(self, name, path=None, target=None):
            if name == "sounddevice":
                raise OSError("PortAudio library not found")

    monkeypatch.setattr(sys, "meta_path", [NoPortAudio(), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    with pytest.raises(AudioDeviceError, match="apt-get install libportaudio2"):
        sounddevice()


def test_the_agent_files_greeting_opens_the_call(pulse, tmp_path):
    agent = tmp_path / "greets.toml"
    bundled = (ROOT / "llm" / "support" / "agent.toml").read_text()
    agent.write_text(
        bundled.replace(
            'name = "northwind"', 'name = "greets"\ngreeting = "Good morning, this is the rooms desk."'
        ).replace('"data/tools.json"', f'"{ROOT / "llm" / "support" / "data" / "tools.json"}"')
    )
    out = tmp_path / "run"
    with session(pulse, out, "--agent", str(agent)) as (_, capture):
        deadline = time.monotonic() + 30
        while not any(e["event"] == "greeting" for e in events(out)):
            assert time.monotonic() < deadline, "no greeting"
            time.sleep(0.05)
        time.sleep(3)
    (greeting,) = [e for e in events(out) if e["event"] == "greeting"]
    assert greeting["heard_until_ns"] > greeting["t_ns"]
    heard = Transcriber().transcribe(resample(capture.audio(), OUT_RATE)).text.lower()
    assert "good morning" in heard and "desk" in heard, heard
