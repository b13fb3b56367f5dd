"""Events over MQTT against a real mosquitto: the collected run equals the local run log,
many workers make one run, and a broker that is absent or dies never stops the pipeline or its log."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from llm.serving.process import free_port
from voice.record.collect import collect, ranges
from voice.record.mqtt import MqttPublisher, parse_host
from voice.record.runlog import RunLog, read_run
from voice.reports.summary import summarize
from voice.timing.anchors import ANCHORS
from voice.timing.timeline import Timeline, TurnRecord

MOSQUITTO = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin")
HOST = "127.0.0.1"
# every anchor of a turn, in order (first fact heard needs a manifest's facts: these turns have none)
STEPS = [a.name for a in ANCHORS if a.name != "first_fact_heard"]


class Broker:
    """A mosquitto on loopback that a test can kill and restart on the same port."""

    def __init__(self, tmp_path: Path):
        self.port, self.dir = free_port(), tmp_path
        self.conf = tmp_path / "mosquitto.conf"
        self.conf.write_text(f"listener {self.port} {HOST}\nallow_anonymous true\npersistence false\n")
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        log = open(self.dir / "mosquitto.log", "a")  # noqa: SIM115 (the broker writes it while it runs)
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=log, stderr=log)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"mosquitto exited: {(self.dir / 'mosquitto.log').read_text()}")
            try:
                socket.create_connection((HOST, self.port), 0.1).close()
                return
            except OSError:
                time.sleep(0.02)
        pytest.fail("mosquitto did not open its port within 5 s")

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def broker(tmp_path):
    if not MOSQUITTO:
        pytest.fail(
            "the mosquitto broker is not installed (apt-get install mosquitto): the MQTT tests need it"
        )
    b = Broker(tmp_path)
    b.start()
    yield b
    b.kill()


def timeline(call: str) -> Timeline:
    ticks = iter(range(1_000_000_000, 10**12, 7_000_000))
    return Timeline(call, lambda: next(ticks))


def play_turn(tl: Timeline, turn: int, clauses: int = 0) -> None:
    """A turn's events in pipeline order, by hand (no ASR, LLM or TTS)."""
    for name in STEPS[:9]:
        tl.emit(turn, name)
    for i in range(clauses):
        tl.emit(turn, "clause", text=f"clause {i}", filler=False)
    for name in STEPS[9:]:
        tl.emit(turn, name)
    tl.turns[turn].transcript, tl.turns[turn].answer = "where is my order", "it shipped"
    tl.emit(turn, "turn_done", status="ok")


def collector(tmp_path: Path, port: int, **kwargs) -> tuple[asyncio.Task, list[float]]:
    """The collector as a task, and the times it (re)subscribed."""
    subscribed: list[float] = []
    kwargs = {"run": "r1", "idle_timeout": 10, "backoff": (0.02, 0.05), **kwargs}
    task = asyncio.create_task(
        collect(HOST, port, tmp_path / "collected", on_subscribed=lambda: subscribed.append(1), **kwargs)
    )
    return task, subscribed


async def until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.01)


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]


def test_collected_run_equals_the_local_run_log(broker, tmp_path):
    async def main():
        task, subscribed = collector(tmp_path, broker.port, workers=1)
        await until(lambda: subscribed)
        log = RunLog(tmp_path / "local")
        async with MqttPublisher(HOST, broker.port, "r1", environment={"mode": "fast"}) as pub:
            calls = [timeline("a"), timeline("b")]
            for tl in calls:
                log.watch(tl)
                pub.observe(tl)
            for turn in range(3):  # the two calls interleave, as with --concurrency 2
                for tl in calls:
                    play_turn(tl, turn, clauses=turn)
                    await asyncio.sleep(0)
            failed = [TurnRecord("c", 0, "error", "c.wav: unreadable").to_dict()]
            log.write_records(failed)
            pub.publish_records(failed)
            summary = summarize(log.records, {"mode": "fast"})
            log.close(summary)
            pub.end(summary)
        return await asyncio.wait_for(task, 5)

    out = asyncio.run(main())
    local_turns, local_summary = read_run(tmp_path / "local")
    turns, summary = read_run(out)
    assert turns == local_turns and len(turns) == 7
    got = events(out)
    for call in ("a", "b"):  # each call's events arrive in order (turn records take the seqs between)
        seqs = [e["seq"] for e in got if e["call"] == call]
        assert seqs == sorted(set(seqs)) and len(seqs) == 13 * 3 + 3
    assert [{k: v for k, v in e.items() if k not in ("seq", "worker")} for e in got] == events(
        tmp_path / "local"
    )
    assert summary["mqtt_gaps"] == {} and summary["mqtt"]["ended_by"] == "workers ended"
    assert {k: v for k, v in summary.items() if not k.startswith("mqtt")} == local_summary


def test_two_workers_make_one_run(broker, tmp_path):
    async def worker(name: str, started: list[str]) -> None:
        async with MqttPublisher(HOST, broker.port, "r1", environment={"worker": name}) as pub:
            assert await pub.flush(5)
            started.append(name)
            await until(lambda: len(started) == 2)  # both announced before either ends
            tl = timeline(f"{name}-call")
            pub.observe(tl)
            for turn in range(2):
                play_turn(tl, turn)
                await asyncio.sleep(0.01)
            pub.end(summarize([tl.turns[t].to_dict() for t in tl.turns]))

    async def main():
        task, subscribed = collector(tmp_path, broker.port)  # ends when every announced worker has
        await until(lambda: subscribed)
        started: list[str] = []
        await asyncio.gather(worker("w1", started), worker("w2", started))
        return await asyncio.wait_for(task, 5)

    turns, summary = read_run(asyncio.run(main()))
    assert summary["calls"] == 2 and summary["turns"] == 4 and summary["success_rate"] == 1.0
    assert sorted({t["call"] for t in turns}) == ["w1-call", "w2-call"]
    assert len(summary["mqtt"]["workers"]) == 2 and summary["mqtt_gaps"] == {}
    assert sorted(e["worker"] for e in summary["environment"]["workers"].values()) == ["w1", "w2"]


def test_broker_dies_mid_run_and_comes_back(broker, tmp_path, capsys):
    async def main():
        task, subscribed = collector(tmp_path, broker.port, workers=1)
        await until(lambda: subscribed)
        log = RunLog(tmp_path / "local")
        async with MqttPublisher(HOST, broker.port, "r1", max_queue=22, backoff=(0.2, 0.2)) as pub:
            tl = timeline("a")
            log.watch(tl)
            pub.observe(tl)
            play_turn(tl, 0)
            assert await pub.flush(5)
            await asyncio.sleep(0.1)  # the broker forwards turn 0 to the collector
            broker.kill()
            play_turn(tl, 1, clauses=30)  # 44 messages while the broker is gone: 22 dropped
            assert pub.dropped == 22
            await asyncio.sleep(0.3)  # the publisher notices, warns and backs off
            assert not pub.connected
            broker.start()
            await until(lambda: len(subscribed) == 2)
            assert await pub.flush(5)  # the publisher is back and sent what it kept
            play_turn(tl, 2)
            summary = summarize(log.records)
            log.close(summary)
            pub.end(summary)
        return await asyncio.wait_for(task, 5), tl

    out, tl = asyncio.run(main())
    err = capsys.readouterr().err
    assert err.count("warning: MQTT broker") == 1 and "again" in err  # one warning, not one per event
    assert len(events(tmp_path / "local")) == len(tl.events) == 13 + 43 + 13  # the local log is complete
    _, summary = read_run(out)
    # seq 1-14: turn 0; 15-58: turn 1, whose oldest 22 (15-36) were dropped from the full queue (the
    # 22 kept are lost too if the publisher is back before the collector); 59-72: turn 2
    [gap] = summary["mqtt_gaps"]["a"]["seqs"]
    assert gap in ([15, 36], [15, 58]) and "never arrived" in err
    collected = sorted(e["seq"] for e in events(out))  # events only: seq 14 and 72 are turn records
    assert collected[:13] == list(range(1, 14)) and collected[-13:] == list(range(59, 72))


def test_broker_absent_at_start(tmp_path, capsys):
    async def main():
        log = RunLog(tmp_path / "local")
        async with MqttPublisher(HOST, free_port(), "r1", backoff=(0.05, 0.1), flush_timeout=0.3) as pub:
            tl = timeline("a")
            log.watch(tl)
            pub.observe(tl)
            for turn in range(3):
                play_turn(tl, turn)
                await asyncio.sleep(0.05)
            log.close(summarize(log.records))
        return pub

    pub = asyncio.run(main())
    err = capsys.readouterr().err
    assert err.count("warning: MQTT broker") == 1 and "messages not delivered" in err
    assert not pub.connected
    assert len(events(tmp_path / "local")) == 3 * 13 and len(read_run(tmp_path / "local")[0]) == 3


def test_helpers():
    assert parse_host("broker") == ("broker", 1883) and parse_host("broker", tls=True) == ("broker", 8883)
    assert parse_host("10.0.0.2:1884") == ("10.0.0.2", 1884) and parse_host("[::1]:1") == ("::1", 1)
    with pytest.raises(ValueError):
        parse_host("host:port")
    assert ranges([9, 3, 4, 5]) == [[3, 5], [9, 9]]
    import argparse

    from ttfat.commands import collect as collect_command

    sub = argparse.ArgumentParser().add_subparsers()
    collect_command.add_parser(sub)
    args = sub.choices["collect"].parse_args(["--mqtt", "b:1", "--out", "d", "--workers", "2"])
    assert args.workers == 2 and args.idle_timeout == 300 and args.func is collect_command.run
