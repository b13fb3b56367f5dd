"""Virtual audio devices for `ttfat talk` without hardware (PulseAudio null sinks), for its tests and its
benchmark: a PulseAudio daemon with a null sink as the caller's line (its monitor, remapped, is the
microphone) and a null sink as the speaker, which `Capture` records. sounddevice reaches them through
ALSA's pulse plugin; PULSE_SOURCE / PULSE_SINK in the environment pick them."""

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
from collections.abc import Iterator
from pathlib import Path

import numpy as np

OUT_RATE = 22050  # piper's rate: the speaker sink runs at it, so nothing resamples the agent's audio


class PulseError(RuntimeError):
    """PulseAudio is missing or did not start; the message says what to install or read."""


@contextlib.contextmanager
def virtual_devices(runtime: Path) -> Iterator[dict]:
    """A private PulseAudio daemon under `runtime`; yields the environment that reaches its devices."""
    if not shutil.which("pulseaudio") or not shutil.which("parec"):
        raise PulseError(
            "PulseAudio is not installed (apt-get install pulseaudio pulseaudio-utils libasound2-plugins)"
        )
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
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
        # a daemon on a busy machine: no realtime priority or CPU limiter that could kill it, and no
        # shared-memory transport (its memfd path logs pulseaudio bug 824 when clients come and go)
        "--disable-shm=yes",
        "--realtime=no",
        "--high-priority=no",
        "--no-cpu-limit",
        f"--log-target=file:{runtime / 'pulse.log'}",
    ]
    subprocess.run(args + [a for m in modules for a in ("-L", m)], env=env, check=True, capture_output=True)
    deadline = time.monotonic() + 10
    while subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode:
        if time.monotonic() > deadline:
            raise PulseError(f"PulseAudio did not start\n{pulse_log(env)}")
        time.sleep(0.1)
    try:
        yield {**env, "PULSE_SINK": "agent_out", "PULSE_SOURCE": "virtual_mic"}
    finally:
        subprocess.run(["pulseaudio", "--kill"], env=env)


def say(env: dict, path: Path) -> None:
    """Play a file into the caller's line (the microphone hears it), in real time."""
    subprocess.run(["paplay", "--device=caller_line", str(path)], env=env, check=True)


def pulse_log(env: dict) -> str:
    """The test daemon's last log lines, for a failure message."""
    log = Path(env["XDG_RUNTIME_DIR"]) / "pulse.log"
    alive = subprocess.run(["pactl", "info"], env=env, capture_output=True).returncode == 0
    tail = log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []
    return f"PulseAudio {'running' if alive else 'NOT running'}; its log ends:\n" + "\n".join(tail)


class Capture:
    """Records the speaker sink, stamping each chunk with the monotonic time it arrived."""

    def __init__(self, env: dict):
        cmd = [
            "parec",
            "--device=agent_out.monitor",
            f"--rate={OUT_RATE}",
            "--channels=1",
            "--format=s16le",
            "--latency-msec=5",
        ]
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


@contextlib.contextmanager
def session(env: dict, out: Path, *options: str):
    """`ttfat talk` listening on the virtual microphone while the speaker is recorded; ends with
    Ctrl-C (SIGINT), after which `proc.console` holds what it printed."""
    cmd = [sys.executable, "-m", "ttfat", "talk", "--out", str(out), *options]
    # as from a terminal: tests started in the background (`cmd &` without job control) hand SIGINT down
    # ignored, and a Python started that way never installs its Ctrl-C handler, so talk would not end
    foreground = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=foreground
    )
    if not any("listening" in line for line in proc.stderr):
        raise PulseError(f"ttfat talk did not start: {proc.communicate()}\n{pulse_log(env)}")
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
    raise TimeoutError(f"no {n} turn records in {out} within {timeout} s")
