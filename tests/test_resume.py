"""`ttfat replay --out DIR --resume` after a crash: a replay killed with SIGKILL at random points and
resumed ends with exactly the (call, turn) records of an uninterrupted run: none missing, none twice."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CALLS = [
    str(ROOT / "recordings" / name) for name in ("call02.flac", "call03.wav", "call07.ogg", "call08.mp3")
]


def replay(out: Path, *more: str) -> list[str]:
    return [sys.executable, "-m", "ttfat", "replay", *CALLS, "--mode", "fast", "--out", str(out), *more]


def keys(out: Path) -> Counter:
    lines = (out / "turns.jsonl").read_text().splitlines()
    return Counter((r["call"], r["turn"]) for r in map(json.loads, lines))


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Counter:
    out = tmp_path_factory.mktemp("whole")
    subprocess.run(replay(out), cwd=ROOT, check=True, capture_output=True, timeout=300)
    return keys(out)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_killed_replay_resumed_has_every_record_once(tmp_path, whole, seed):
    out = tmp_path / "run"
    proc = subprocess.Popen(replay(out), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(random.Random(seed).uniform(4.0, 14.0))  # server start, warm-up, or mid-call
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = keys(out) if (out / "turns.jsonl").exists() else Counter()
    done = subprocess.run(replay(out, "--resume"), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    after = keys(out)
    assert after == whole and max(after.values()) == 1, (before, after)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["turns"] == sum(whole.values())  # the report is made from all records
    (resumed,) = summary["environment"]["resumed"]
    assert resumed["calls_kept"] + resumed["calls_to_replay"] == len(CALLS)
    print(
        f"seed {seed}: killed with {sum(before.values())} records written, kept {resumed['calls_kept']} calls"
    )


def test_resume_needs_the_run_directory(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "ttfat", "replay", CALLS[0], "--resume"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "--resume needs --out" in done.stderr
