"""A mistake in what a run is given is found before anything slow starts (issue 45): one line naming
it, exit 2, in well under the seconds a model takes to load, and nothing left behind. Each kind of
mistake is tried through the real command, as a user types it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from voice.pipeline.settings import Settings, SettingsError, VadConfig
from voice.record.runlog import RunDirError, check_run_dir

ROOT = Path(__file__).resolve().parents[1]
CALL = str(ROOT / "recordings" / "call01.flac")
SLOW = ("starting the LLM server", "warm-up", "call/s")  # what a run prints once it has started


def ttfat(tmp: Path, *argv: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "ttfat", *argv], cwd=tmp, capture_output=True, text=True, timeout=120
    )
    return done, time.monotonic() - started


def inputs(tmp: Path) -> None:
    """The files the cases below point at."""
    (tmp / "notes.txt").write_text("this is not audio\n" * 20)
    (tmp / "corrupt.flac").write_bytes(b"fLaC" + bytes(range(256)) * 16)
    sf.write(tmp / "empty.wav", np.zeros(0, np.float32), 16000)
    (tmp / "held").mkdir()
    (tmp / "held" / "turns.jsonl").write_text("")
    (tmp / "a_file").write_text("")
    (tmp / "ab" / "bundled").mkdir(parents=True)
    (tmp / "ab" / "bundled" / "summary.json").write_text("{}")
    (tmp / "bad.toml").write_text("system_prompt = [1, 2\n")
    (tmp / "manifest.jsonl").write_text('{"call": "x", "file": "gone.wav"}\n')
    spanless = {"call": "y", "file": "call01.flac", "turns": [{"turn": 0, "text": "hi", "speech_end_s": 2.0}]}
    (tmp / "spanless.jsonl").write_text(json.dumps(spanless) + "\n")
    (tmp / "lost").mkdir()
    (tmp / "lost" / "gone.flac").symlink_to(tmp / "nowhere.flac")  # listed by the folder, not there


CASES = {
    "a mistyped file": (["replay", CALL.replace(".flac", ".wav")], "call01.wav: no such file"),
    "a file that is not audio": (["replay", "notes.txt"], "notes.txt: cannot decode"),
    "a corrupt file": (["replay", "corrupt.flac"], "corrupt.flac: cannot decode"),
    "an empty file": (["replay", "empty.wav"], "empty.wav: the file holds no audio samples"),
    "a manifest's missing file": (["replay", "manifest.jsonl"], "gone.wav: no such file"),
    "a manifest turn without its span": (["replay", "spanless.jsonl"], "turn 0 has no speech span"),
    "a folder's file that went away": (["replay", "lost"], "gone.flac: no such file"),
    "a VAD frame webrtcvad refuses": (["replay", CALL, "--vad-frame-ms", "25"], "frames of (10, 20, 30) ms"),
    "a VAD mode out of range": (["replay", CALL, "--vad-aggressiveness", "5"], "aggressiveness must be 0..3"),
    "a turn timeout of zero": (["replay", CALL, "--turn-timeout", "0"], "turn timeout must be positive"),
    "no calls at once": (["replay", CALL, "--concurrency", "0"], "--concurrency must be at least 1"),
    "no tokens": (["replay", CALL, "--max-tokens", "0"], "--max-tokens: must be at least 1"),
    "a threshold above 1": (["replay", CALL, "--threshold", "2"], "--threshold: must be at most 1"),
    "a channel by name": (["replay", CALL, "--channel", "left"], "auto or a channel number"),
    "an agent file that is not there": (["replay", CALL, "--agent", "nope.toml"], "nope.toml: no such agent"),
    "an agent file that is not TOML": (["replay", CALL, "--agent", "bad.toml"], "not a readable TOML file"),
    "a model that is no checkpoint": (["replay", CALL, "--llm-model", "."], "not a checkpoint directory"),
    "negative ASR readings": (["replay", CALL, "--asr-readings", "-1"], "--asr-readings must be 0 or more"),
    "an ASR model that is not there": (["replay", CALL, "--asr-model", "tiny"], "neither tiny.en, base nor"),
    "a voice that is not there": (["replay", CALL, "--tts-voice", "x.onnx"], "no piper voice at x.onnx"),
    "a run directory holding a run": (["replay", CALL, "--out", "held"], "held holds a run already"),
    "an A/B run directory holding one": (["replay", CALL, "--out", "ab"], "ab holds a run already"),
    "a run directory under a file": (["replay", CALL, "--out", "a_file/run"], "a_file is not a directory"),
    "a run directory that cannot be made": (["replay", CALL, "--out", "/proc/run"], "cannot write into"),
    "resume without a directory": (["replay", CALL, "--resume"], "--resume needs --out"),
    "force without a directory": (["replay", CALL, "--force"], "--force needs --out"),
    "talk into a directory holding a run": (["talk", "--out", "held"], "held holds a run already"),
    "talk with a VAD frame webrtcvad refuses": (["talk", "--vad-frame-ms", "15"], "frames of (10, 20, 30)"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_mistake_is_one_line_and_exit_2_before_anything_starts(tmp_path, case):
    inputs(tmp_path)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    argv, says = CASES[case]
    bare = {"--out", "--resume", "--force"} & set(argv)  # the cases about --out set it or leave it out
    done, seconds = ttfat(tmp_path, *argv, *([] if bare else ["--out", "r"]))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert says in lines[0], lines[0]
    assert not any(s in done.stderr for s in SLOW)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing left behind
    assert seconds < 10, f"{seconds:.1f} s: a model load (Whisper and our server take 10 to 25 s) ran first"


def test_the_settings_check_the_vad_they_carry():
    """The VAD's own check runs with the rest (it sat after a `return`, unreached, so a bad frame length
    surfaced only when the detector was built)."""
    with pytest.raises(SettingsError, match="frames of"):
        Settings(vad=VadConfig(frame_ms=25)).validate()
    with pytest.raises(SettingsError, match="start and end windows"):
        Settings(vad=VadConfig(end_ms=10)).validate()
    Settings(vad=VadConfig(frame_ms=20)).validate()


def test_resume_and_force_are_the_ways_past_a_run_directory_that_holds_a_run(tmp_path):
    (tmp_path / "turns.jsonl").write_text("")
    with pytest.raises(RunDirError, match="holds a run already"):
        check_run_dir(tmp_path)
    check_run_dir(tmp_path, resume=True)
    check_run_dir(tmp_path, force=True)
    check_run_dir(tmp_path / "new" / "run")  # made later, by the run
    assert not (tmp_path / "new").exists()
