"""Media-stream peers for `ttfat probe`'s tests: real WebSocket servers on loopback, each misbehaving (or
behaving) the one way a test needs, in a thread of their own.

- `speaks`: after each caller turn (our turn detector on what it receives), says a filler and then an
  answer, in the bundled piper voice, as μ-law media messages sent at once (a provider buffers them),
  and `clear`s them when the caller starts speaking over it; it records when it sent each, so a test
  knows when the answer really started;
- `sounds`: answers each caller turn the same way with sound that holds no words: a noise burst, a
  click, a tone and a breath, half a second apart;
- `scripted`: answers each call once, `after_s` after it has received `answer_at_s` of the caller's
  audio, with a short answer sent at once, and records when (by the call's name): the truth a probe
  under load is held to (run it in a process of its own, `python -m tests.peers`, so that the probe
  keeps its cores);
- `silent`: listens, never speaks;
- `hangs_up`: closes its first call `after_s` into it; later calls it only listens to;
- `garbage` / `oversized`: sends a message that is not JSON / one larger than a probe accepts;
- `refuses`: fails the WebSocket handshake (HTTP 403).

And the calls to make to them: `clip` (the start of a bundled recording, with its manifest), `copies` (many
calls of one), `scripted` (the scripted peer in a process of its own) and `against_truth` (a probe of it,
against what it sent); bench/probe_truth.py uses them too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import soundfile as sf

from voice.pipeline.audio import RATE, load_audio, resample, to_float
from voice.pipeline.settings import VadConfig
from voice.pipeline.turns import Turn, TurnDetector
from voice.record.runlog import read_run
from voice.reports.summary import LOOP_LAG
from voice.runs.replay import find_calls
from voice.runs.telephony import Media, Pcm, Start, Twilio

ROOT = Path(__file__).resolve().parents[1]

FILLER = "Let me pull that up for you."  # a stall phrase no list of ours holds: judged by meaning
SHORT_ANSWER = "Your order shipped on Monday."  # the scripted peer's
ANSWER = "Your order shipped on Monday with DHL, and it should arrive on Friday, December fourth."
GAP_S = 0.5  # of silence between the filler and the answer


@dataclass
class Peer:
    behaviour: str
    after_s: float = 1.0
    answer_at_s: float = 0.0  # `scripted`: of the caller's audio received
    protocol: str = "twilio"  # or "pcm": 16-bit frames at 16 kHz
    voice: object = None  # tts.piper.Synthesizer, for `speaks`
    url: str = ""
    sent: list[tuple[int, str]] = field(default_factory=list)  # (monotonic ns, what) of each reply
    cleared: list[int] = field(default_factory=list)  # when it stopped for the caller (monotonic ns)
    calls: int = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _stop: asyncio.Event | None = None

    def __enter__(self) -> Peer:
        if self.behaviour == "speaks":  # made once, before any call: the reply is sent at once
            rate = self.voice.sample_rate
            self.clips = [
                (t, resample(to_float(self.voice.speak(t).audio), rate, self._wire().rate))
                for t in (FILLER, ANSWER)
            ]
        if self.behaviour == "sounds":
            self.clips = wordless(self._wire().rate)
        if self.behaviour == "scripted":
            rate = self.voice.sample_rate
            audio = resample(to_float(self.voice.speak(SHORT_ANSWER).audio), rate, self._wire().rate)
            self.clips = [(SHORT_ANSWER, audio[np.argmax(np.abs(audio) > 0.01) :])]  # loud from its start
        ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._serve(ready)), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the peer did not start")
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _serve(self, ready: threading.Event) -> None:
        from websockets.asyncio.server import serve

        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()

        def refuse(connection, request):
            return connection.respond(403, "no calls here\n") if self.behaviour == "refuses" else None

        async with serve(self._call, "127.0.0.1", 0, process_request=refuse, max_size=None) as server:
            self.url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
            ready.set()
            await self._stop.wait()

    def _wire(self) -> Twilio | Pcm:
        return Twilio() if self.protocol == "twilio" else Pcm(RATE)

    async def _call(self, ws) -> None:
        start = time.monotonic()
        self.calls += 1
        first = self.calls == 1
        wire = self._wire()
        detector = TurnDetector(RATE, VadConfig(end_ms=600))  # a caller's short pause does not end a turn
        buffer = np.zeros(0, np.float32)
        speaking_until = 0  # monotonic ns: when what it sent ends playing
        name, received, answer = "", 0, None
        with contextlib.suppress(Exception):
            async for message in ws:
                if self.behaviour == "scripted":
                    parsed = wire.parse(message)
                    name = parsed.parameters.get("call", "") if isinstance(parsed, Start) else name
                    received += len(parsed.samples) if isinstance(parsed, Media) else 0
                    if answer is None and received >= self.answer_at_s * wire.rate:
                        answer = asyncio.create_task(self._scripted(ws, wire, name))
                    continue
                elapsed = time.monotonic() - start
                if self.behaviour == "hangs_up" and first and elapsed > self.after_s:
                    await ws.close(1011, "scripted hang-up")
                    return
                if self.behaviour == "garbage" and elapsed > self.after_s:
                    await ws.send("this is not JSON")
                if self.behaviour == "oversized" and elapsed > self.after_s:
                    await ws.send("x" * (2 << 20))
                if self.behaviour not in ("speaks", "sounds"):
                    continue
                parsed = wire.parse(message)
                if not isinstance(parsed, Media):
                    continue
                buffer = np.concatenate([buffer, resample(parsed.samples, wire.rate, RATE)])
                while len(buffer) >= detector.frame_len:
                    was_in_turn = detector.in_turn
                    event = detector.push(buffer[: detector.frame_len])
                    buffer = buffer[detector.frame_len :]
                    if isinstance(event, Turn):
                        speaking_until = await self._reply(ws, wire)
                    elif detector.in_turn and not was_in_turn and time.monotonic_ns() < speaking_until:
                        if (clear := wire.clear()) is not None:  # the caller barged in
                            await ws.send(clear)
                        self.cleared.append(time.monotonic_ns())
                        speaking_until = 0

    async def _reply(self, ws, wire: Twilio | Pcm) -> int:
        """Send its clips (the filler and the answer, or the sounds), each followed by a gap, at once;
        returns when they end playing."""
        silence = np.zeros(int(wire.rate * GAP_S), np.float32)
        start = time.monotonic_ns()
        for text, line in self.clips:
            self.sent.append((time.monotonic_ns(), text))
            step = wire.rate // 50
            for audio in (line, silence):
                for i in range(0, len(audio), step):
                    await ws.send(wire.agent_media(audio[i : i + step]))
        return start + sum(len(line) + len(silence) for _, line in self.clips) * 1_000_000_000 // wire.rate

    async def _scripted(self, ws, wire: Twilio, name: str) -> None:
        await asyncio.sleep(self.after_s)
        (_, line), step = self.clips[0], wire.rate // 50
        for i in range(0, len(line), step):
            await ws.send(wire.agent_media(line[i : i + step]))
            if i == 0:  # on its way: its first sample is heard from now
                self.sent.append((time.monotonic_ns(), name))


def wordless(rate: int) -> list[tuple[str, np.ndarray]]:
    """Sounds an agent may make that hold no words (tiny.en hears none in any of them), at `rate`."""
    noise = np.random.default_rng(0).normal
    n = lambda s: int(rate * s)  # noqa: E731
    click = np.zeros(n(0.01), np.float32)
    click[: n(0.0025)] = 0.8
    tone = 0.3 * np.sin(2 * np.pi * 440 * np.arange(n(0.4)) / rate)
    return [
        ("burst", noise(0, 0.3, n(0.15)).clip(-1, 1).astype(np.float32)),
        ("click", click),
        ("tone", tone.astype(np.float32)),
        ("breath", (noise(0, 0.05, n(0.3)) * np.hanning(n(0.3))).astype(np.float32)),
    ]


def clip(folder: Path, call: str, seconds: float, name: str | None = None) -> Path:
    """The first `seconds` of a bundled recording, with a manifest of the turns it holds."""
    (c,) = [c for c in find_calls([str(ROOT / "recordings")]) if c.name == call]
    name = name or f"{call}-{seconds:g}s"
    folder.mkdir(parents=True, exist_ok=True)
    sf.write(folder / f"{name}.wav", load_audio(c.path, c.channel).samples[: int(seconds * 16000)], 16000)
    turns = [t for t in c.reference if t["speech_end_s"] < seconds]
    with open(folder / "manifest.jsonl", "a") as f:
        f.write(json.dumps({"call": name, "file": f"{name}.wav", "turns": turns}) + "\n")
    return folder


def copies(tmp_path: Path, n: int) -> tuple[Path, float]:
    """`n` calls, each call01's first 4 s (one turn), with their manifest; and where that turn ends (s)."""
    folder = clip(tmp_path / "one", "call01", 4.0)
    (manifest,) = [json.loads(line) for line in (folder / "manifest.jsonl").read_text().splitlines()]
    calls = tmp_path / "calls"
    calls.mkdir()
    with open(calls / "manifest.jsonl", "w") as f:
        for i in range(n):
            (calls / f"c{i:03}.wav").symlink_to(folder / manifest["file"])
            f.write(json.dumps({**manifest, "call": f"c{i:03}", "file": f"c{i:03}.wav"}) + "\n")
    return calls, manifest["turns"][0]["speech_end_s"]


@contextlib.contextmanager
def scripted(answer_at_s: float):
    """The scripted agent (tests/peers.py) in a process of its own: yields its URL and a dict that holds,
    once the block ends, when it sent each call's answer (monotonic ns, by call)."""
    peer = subprocess.Popen(
        [sys.executable, "-m", "tests.peers", "scripted", str(answer_at_s), "0.3"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    truth = {}
    try:
        yield peer.stdout.readline().strip(), truth
    finally:
        sent, _ = peer.communicate("", timeout=60)
        truth.update({call: t for t, call in json.loads(sent)})


def against_truth(run: Path, truth: dict[str, int]) -> tuple[list[float], dict]:
    """A probe run of the scripted agent: each call's first audio heard minus when the agent sent it (ms,
    signed; the same monotonic clock), and how late the probe's event loop ran."""
    records, summary = read_run(run)
    events = [json.loads(line) for line in (run / "events.jsonl").read_text().splitlines()]
    t0 = {e["call"]: e["t_ns"] for e in events if e["event"] == "t0"}
    off = [(t0[r["call"]] + r["first_audio_ms"] * 1e6 - truth[r["call"]]) / 1e6 for r in records]
    return off, summary["environment"]["probe"][LOOP_LAG]


if __name__ == "__main__":  # python -m tests.peers scripted ANSWER_AT_S AFTER_S: prints its URL, then,
    # when its stdin closes, the (monotonic ns, call) of each answer sent, as JSON
    from tts.piper import Synthesizer

    behaviour, answer_at_s, after_s = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
    with Peer(behaviour, after_s=after_s, answer_at_s=answer_at_s, voice=Synthesizer()) as peer:
        print(peer.url, flush=True)
        sys.stdin.read()
    print(json.dumps(peer.sent))
