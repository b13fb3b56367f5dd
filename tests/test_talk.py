"""`ttfat talk` end to end on virtual audio devices (DESIGN.md §8): PulseAudio with a null sink as the
caller's line (its monitor, remapped, is the microphone) and a null sink as the speaker, which the test
records. sounddevice reaches them through ALSA's pulse plugin; PULSE_SOURCE/PULSE_SINK pick them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from asr.whisper import Transcriber
from voice.audio import load_audio, resample
from voice.replay import find_calls

OUT_RATE = 22050  # piper's rate: the speaker sink runs at it, so nothing resamples the agent's audio


@pytest.fixture(scope="module")
def pulse(tmp_path_factory):
    if not shutil.which("pulseaudio") or not shutil.which("parec"):
        pytest.fail(
            "PulseAudio is not installed (apt-get install pulseaudio pulseaudio-utils libasound2-plugins)"
        )
    runtime = tmp_path_factory.mktemp("pulse")
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "PULSE_LATENCY_MSEC": "20"}
    modules = [
        "module-native-protocol-unix",
        f"module-null-sink sink_name=agent_out rate={OUT_RATE} channels=1",
        "module-null-sink sink_name=caller_line rate=16000 channels=1",
        "module-remap-source source_name=virtual_mic master=caller_line.monitor",
    ]
    args = [
        "pulseaudio",
        "-n",
        "--daemonize=yes",
        "--exit-idle-time=-1",
        "--disallow-exit",
        # a test daemon on a busy CI machine: no realtime priority or CPU limiter that could kill it, and
        # no shared-memory transport (its memfd path logs pulseaudio bug 824 when clients come and go)
        "--disable-shm=yes",
        "--realtime=no",
        "--high-priority=no",
        "--no-cpu-limit",
        f"--log-target=file:{runtime / 'pulse.log'}",
    ]
    subprocess.run(args + [a for m in modules for a in ("-L", m)], env=env, check=True, capture_output=True)
    deadline = time.monotonic() + 10
    while subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode:
        assert time.monotonic() < deadline, "PulseAudio did not start"
        time.sleep(0.1)
    yield {**env, "PULSE_SINK": "agent_out", "PULSE_SOURCE": "virtual_mic"}
    subprocess.run(["pulseaudio", "--kill"], env=env)


def pulse_log(env: dict) -> str:
    """The test daemon's last log lines, for a failure message."""
    log = Path(env["XDG_RUNTIME_DIR"]) / "pulse.log"
    alive = subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode == 0
    tail = log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []
    return f"PulseAudio {'running' if alive else 'NOT running'}; its log ends:\n" + "\n".join(tail)


class Capture:
    """Records the speaker sink, stamping each chunk with the monotonic time it arrived."""

    def __init__(self, env: dict):
        cmd = ["parec", "--device=agent_out.monitor", f"--rate={OUT_RATE}", "--channels=1", "--format=s16le",
               "--latency-msec=5"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
        self.chunks: list[tuple[int, np.ndarray]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while data := self.proc.stdout.read1(2048):
            self.chunks.append((time.monotonic_ns(), np.frombuffer(data[: len(data) // 2 * 2], "<i2")))

    def stop(self) -> None:
        self.proc.terminate()
        self.thread.join(5)

    def audio(self) -> np.ndarray:
        return np.concatenate([c for _, c in self.chunks]).astype(np.float32) / 32768

    def time_of(self, predicate) -> int | None:
        """Arrival time of the first (or, with a reversed predicate, any) sample for which predicate holds,
        from its chunk's arrival and its position in the chunk."""
        for arrived, chunk in self.chunks:
            hits = np.flatnonzero(predicate(chunk))
            if len(hits):
                return arrived - (len(chunk) - hits[0]) * 1_000_000_000 // OUT_RATE
        return None


def question(tmp_path: Path, call: str, turn: int) -> tuple[Path, dict]:
    """One caller turn cut out of a bundled recording (with half a second around it)."""
    (c,) = [c for c in find_calls(["recordings"]) if c.name == call]
    ref = c.reference[turn]
    audio = load_audio(c.path, c.channel).samples
    a, b = int((ref["speech_start_s"] - 0.5) * 16000), int((ref["speech_end_s"] + 0.5) * 16000)
    path = tmp_path / f"{call}-{turn}.wav"
    sf.write(path, audio[a:b], 16000)
    return path, ref


@contextlib.contextmanager
def session(env: dict, out: Path):
    """`ttfat talk` listening on the virtual microphone while the speaker is recorded; ends with
    Ctrl-C (SIGINT), after which `proc.console` holds what it printed."""
    cmd = [sys.executable, "-m", "voice.cli", "talk", "--out", str(out)]
    # as from a terminal: tests started in the background (`cmd &` without job control) hand SIGINT down
    # ignored, and a Python started that way never installs its Ctrl-C handler, so talk would not end
    foreground = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=foreground)  # fmt: skip
    if not any("listening" in line for line in proc.stderr):
        pytest.fail(f"ttfat talk did not start: {proc.communicate()}\n{pulse_log(env)}")
    capture = Capture(env)
    try:
        yield proc, capture
    finally:
        proc.send_signal(signal.SIGINT)
        proc.console = proc.communicate(timeout=30)[0]
        capture.stop()


def wait_for_turns(out: Path, n: int, timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = (out / "turns.jsonl").read_text().splitlines() if (out / "turns.jsonl").exists() else []
        if len(lines) >= n:
            return [json.loads(line) for line in lines]
        time.sleep(0.2)
    pytest.fail(f"no {n} turn records in {out} within {timeout} s")


def events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


def test_a_spoken_question_is_answered_through_the_speaker(pulse, tmp_path):
    path, ref = question(tmp_path, "call04", 0)  # "what time do you open on saturday"
    out = tmp_path / "run"
    with session(pulse, out) as (proc, capture):
        subprocess.run(["paplay", "--device=caller_line", str(path)], env=pulse, check=True)
        (turn,) = wait_for_turns(out, 1)
        time.sleep(max(0.5, (turn["complete_ms"] - turn["first_audio_ms"]) / 1e3 + 0.5))  # let it play out
    assert proc.returncode == 0 and "first useful audio" in proc.console  # the live console
    assert turn["status"] == "ok" and turn["order_violations"] == []
    assert all(turn[k] is not None for k in ("endpoint_ms", "asr_ms", "ttfat_ms", "first_useful_audio_ms"))
    assert json.loads((out / "summary.json").read_text())["turns"] == 1
    heard = Transcriber().transcribe(resample(capture.audio(), OUT_RATE)).text.lower()
    assert "saturday" in heard and ("eight" in heard or "8" in heard), heard
    # "heard" comes from the output stream's clock: the capture agrees within 50 ms
    (first_heard,) = [e["t_ns"] for e in events(out) if e["event"] == "first_audio_heard"]
    captured = capture.time_of(lambda x: x != 0)  # the sink is digital silence until the agent speaks
    print(f"first audio heard: recorded vs captured {(first_heard - captured) / 1e6:+.1f} ms")
    assert abs(first_heard - captured) <= 50e6


def test_barge_in_stops_playback_and_records_its_latency(pulse, tmp_path):
    long_answer, _ = question(tmp_path, "call04", 1)  # "how long do i have to return something"
    interruption, _ = question(tmp_path, "call13", 2)  # "bye bye"
    out = tmp_path / "run"
    with session(pulse, out) as (_, capture):
        subprocess.run(["paplay", "--device=caller_line", str(long_answer)], env=pulse, check=True)
        deadline = time.monotonic() + 60
        while not any(e["event"] == "first_audio_heard" for e in events(out)):
            assert time.monotonic() < deadline, "the agent never spoke"
            time.sleep(0.05)
        time.sleep(0.3)  # the agent is mid-sentence (its answer runs for seconds)
        subprocess.run(["paplay", "--device=caller_line", str(interruption)], env=pulse, check=True)
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
    run = lambda *a: subprocess.run([sys.executable, "-m", "voice.cli", "talk", *a], env=pulse,  # noqa: E731
                                    capture_output=True, text=True, timeout=60)  # fmt: skip
    listed = run("--list-devices")
    assert listed.returncode == 0 and "pulse" in listed.stdout, pulse_log(pulse)
    wrong = run("--input-device", "no such microphone")
    assert wrong.returncode == 2 and "cannot open the microphone no such microphone" in wrong.stderr


def test_missing_portaudio_is_explained(monkeypatch):
    """Without PortAudio, `import sounddevice` raises OSError: injected here, since the library is
    installed on this machine."""
    from voice.live import AudioDeviceError, sounddevice

    class NoPortAudio:
        def find_spec(self, name, path=None, target=None):
            if name == "sounddevice":
                raise OSError("PortAudio library not found")

    monkeypatch.setattr(sys, "meta_path", [NoPortAudio(), *sys.meta_path])
    monkeypatch.delitem(sys.modules, "sounddevice", raising=False)
    with pytest.raises(AudioDeviceError, match="apt-get install libportaudio2"):
        sounddevice()
