"""A short soak (bench/soak.py: 4 callers, one minute, fast replay against one server): no turn lost,
no request left open on the server, memory within bound (the ten-minute run's 5% check is the bench's;
a one-minute run is still warming up: its first half-minute, while the first calls fill the caches and
the worker threads start, is left out, and it gets 20%)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_short_soak_loses_nothing_and_leaks_nothing(tmp_path):
    out = tmp_path / "soak.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "bench/soak.py",
        "--callers",
        "4",
        "--minutes",
        "1",
        "--warmup-s",
        "30",
        "--json",
        str(out),
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    result = json.loads(out.read_text())
    print(done.stdout)
    assert result["turns"] > 20 and result["lost"] == [], result["lost"]
    assert result["open_requests_at_end"] == 0
    assert set(result["by_status"]) <= {"ok", "timeout", "no_answer", "error"}
    assert result["by_status"].get("ok", 0) >= 0.9 * result["turns"]
    for who in ("voice", "server"):
        assert result[f"{who}_leak"]["growth"] <= 0.20, result["memory"]
    assert result["end"]["server_fds"] <= result["start"]["server_fds"] + 4  # no sockets left behind
    assert len(result["memory"]) >= 6
