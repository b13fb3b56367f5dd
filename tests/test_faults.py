"""Faults a long run meets (issue 22): the LLM server killed mid-run (started again by its supervisor;
the turns it missed are recorded as failed, later ones answered), `ttfat serve` stopped with SIGTERM
(requests under way finish within the drain time), a replay killed with SIGKILL (the server it started
ends with it), and a run directory that cannot be written (one clear line; what was written stays
whole)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from llm.serving.process import free_port
from llm.support.models import BUNDLED
from llm.support.policy import SYSTEM_PROMPT

ROOT = Path(__file__).resolve().parents[1]
CALLS = [
    str(ROOT / "recordings" / n)
    for n in ("call02.flac", "call03.wav", "call07.ogg", "call08.mp3", "call04.flac")
]


def test_a_killed_server_is_started_again_and_the_replay_goes_on(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "ttfat", "replay", *CALLS, "--mode", "fast", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "turns.jsonl").exists() or len((out / "turns.jsonl").read_text().splitlines()) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the replay did not get going"
        time.sleep(0.1)
    subprocess.run(["kill", "-9", str(server_of(proc))], check=True)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert "the LLM server exited" in err and "starting it again" in err
    records = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    statuses = [r["status"] for r in records]
    assert "error" in statuses or "timeout" in statuses, statuses  # the turns it missed: recorded
    first_failed = next(i for i, s in enumerate(statuses) if s != "ok")
    assert "ok" in statuses[first_failed:], statuses  # and answered again once it was back


def server_of(proc: subprocess.Popen, deadline_s: float = 120) -> int:
    """The pid of the LLM server a replay started, once it is running."""
    deadline = time.monotonic() + deadline_s
    while True:
        found = subprocess.run(
            ["pgrep", "-P", str(proc.pid), "-f", "llm.serving.server"], capture_output=True, text=True
        ).stdout.split()
        if found:
            return int(found[0])
        assert time.monotonic() < deadline and proc.poll() is None, "the replay started no server"
        time.sleep(0.1)


def alive(pid: int) -> bool:
    state = Path(f"/proc/{pid}/stat")
    try:  # a zombie (ended, not yet reaped by init) is not running
        return state.read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_replay_killed_with_sigkill_takes_its_server_with_it(tmp_path):
    out = str(tmp_path / "r")
    cmd = [sys.executable, "-m", "ttfat", "replay", CALLS[0], "--mode", "fast", "--out", out]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = server_of(proc)
    proc.kill()  # no handler runs: only the kernel closing our end of the pipe tells the server
    proc.wait()
    deadline = time.monotonic() + 10
    while alive(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(server), "the server outlived the replay that started it"


def test_sigterm_lets_requests_under_way_finish(tmp_path):
    port = free_port()
    model = str(BUNDLED["bundled"])
    cmd = [
        sys.executable,
        "-m",
        "llm.serving.server",
        "--model",
        model,
        "--port",
        str(port),
        "--drain-s",
        "8",
    ]
    server = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(url + "/health", timeout=1)
            break
        except httpx.HTTPError:
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.1)
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "hi"}]
    body = {
        "model": "bundled",
        "stream": True,
        "max_tokens": 256,
        "steps": 256,
        "ignore_eos": True,
        "messages": messages,
    }
    lines, started = [], threading.Event()

    def stream() -> None:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=60) as r:
            for line in r.iter_lines():
                if line:  # events are separated by blank lines
                    lines.append(line)
                    started.set()

    reader = threading.Thread(target=stream)
    reader.start()
    assert started.wait(30)
    stopped = time.monotonic()
    server.send_signal(signal.SIGTERM)
    reader.join(timeout=30)
    assert server.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once drained
    assert time.monotonic() - stopped < 8 + 5  # within the drain time (and the process's own exit)
    assert lines[-1] == "data: [DONE]"  # the request under way finished
    finish = [json.loads(x[6:]) for x in lines if x.startswith("data: {")][-1]["choices"][0]["finish_reason"]
    assert finish == "length"


def test_a_run_directory_that_cannot_be_written_is_one_line_and_the_rest_stays_whole(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "turns.jsonl").symlink_to("/dev/full")  # every write: no space left on the device
    cmd = [sys.executable, "-m", "ttfat", "replay", *CALLS[:2], "--mode", "fast", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ttfat: ") and "turns.jsonl: cannot write (No space left on device)" in last
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]  # all whole
    assert events and not (out / "summary.json").exists()
