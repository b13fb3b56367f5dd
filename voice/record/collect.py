"""Collecting one run directory from the MQTT messages of one or many workers (voice/record/mqtt.py), for
`ttfat collect` (ttfat/commands/collect.py).

The directory is written by a RunLog, so `ttfat report` reads it like any other. Messages are
at-least-once (QoS 1, and the publisher resends a batch after a reconnect), so duplicates are dropped
by (worker, call, seq); sequence numbers that never arrived are reported as gaps in summary.json
(`mqtt_gaps`) rather than silently giving a run that looks complete.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from voice.record.mqtt import PREFIX, topic_part


def ranges(numbers: list[int]) -> list[list[int]]:
    """[3, 4, 5, 9] -> [[3, 5], [9, 9]]: gaps stay readable when a whole outage is missing."""
    out: list[list[int]] = []
    for n in sorted(numbers):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


class Collection:
    """What has arrived so far, written to the run directory as it comes."""

    def __init__(self, out: Path, run: str | None):
        from voice.record.runlog import RunLog

        self.out, self.run, self.log = out, run, RunLog(out)
        self.seen: dict[tuple[str, str], set[int]] = defaultdict(set)  # (worker, call) -> seqs
        self.workers: dict[str, dict] = {}  # worker -> start/end information
        self.duplicates = 0
        self.other_runs: set[str] = set()

    def handle(self, topic: str, payload: bytes) -> None:
        parts = topic.split("/")
        if len(parts) != 4 or parts[0] != PREFIX:
            return
        if self.run is None:
            self.run = parts[1]
            print(f"ttfat: collecting run {self.run}", file=sys.stderr)
        if parts[1] != topic_part(self.run):
            if parts[1] not in self.other_runs:
                self.other_runs.add(parts[1])
                print(f"ttfat: ignoring run {parts[1]} (collecting {self.run})", file=sys.stderr)
            return
        try:
            data = json.loads(payload)
            worker = data.pop("worker")
            key = None if parts[2] == "_run" else (worker, data["call"], int(data["seq"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            print(f"ttfat: warning: ignoring a malformed message on {topic}", file=sys.stderr)
            return
        info = self.workers.setdefault(worker, {"ended": False})
        if key is None:
            if parts[3] == "start":
                info["environment"] = data.get("environment")
            elif parts[3] == "end":
                info.update(ended=True, **data)
            return
        seqs = self.seen[key[:2]]
        if key[2] in seqs:
            self.duplicates += 1
            return
        seqs.add(key[2])
        if parts[3] == "turn" and "event" not in data:
            del data["seq"]
            self.log.write_records([data])
        else:
            self.log.write_event({**data, "worker": worker})

    def finished(self, expected: int | None) -> bool:
        """Every worker announced has ended (or `expected` of them have)."""
        ended = sum(w["ended"] for w in self.workers.values())
        return ended >= expected if expected else bool(self.workers) and ended == len(self.workers)

    def gaps(self) -> dict[str, dict]:
        """Per call, the sequence numbers that never arrived, up to the last one sent (or seen)."""
        out = {}
        sent = {(w, c): n for w, i in self.workers.items() for c, n in (i.get("sent") or {}).items()}
        for key in set(sent) | set(self.seen):
            worker, call = key
            got = self.seen.get(key, set())
            missing = sorted(set(range(1, max(sent.get(key, 0), *got, 0) + 1)) - got)
            if missing:
                name = call if call not in out else f"{call} ({worker})"
                out[name] = {"worker": worker, "missing": len(missing), "seqs": ranges(missing)}
        return out

    def environment(self) -> dict:
        """The workers' environment: one when they agree, else each worker's."""
        envs = {}
        for worker, info in self.workers.items():
            summary = info.get("summary") or {}
            envs[worker] = summary.get("environment") or info.get("environment") or {}
        distinct = {json.dumps(e, sort_keys=True, default=str) for e in envs.values()}
        return next(iter(envs.values())) if len(distinct) == 1 else {"workers": envs}

    def close(self, ended_by: str) -> dict:
        from voice.reports.summary import summarize

        summary = summarize(self.log.records, self.environment())
        gaps = self.gaps()
        summary["mqtt_gaps"] = gaps
        summary["mqtt"] = {
            "run": self.run,
            "ended_by": ended_by,
            "duplicates": self.duplicates,
            "workers": {
                w: {"ended": i["ended"], "dropped": i.get("dropped"), "calls": len(i.get("sent") or {})}
                for w, i in self.workers.items()
            },
        }
        self.log.close(summary)
        unfinished = [w for w, i in self.workers.items() if not i["ended"]]
        if gaps:
            lost = sum(g["missing"] for g in gaps.values())
            print(
                f"ttfat: warning: {lost} MQTT messages of {len(gaps)} calls never arrived (mqtt_gaps in "
                f"{self.out / 'summary.json'}): this run is incomplete",
                file=sys.stderr,
            )
        if unfinished:
            print(
                f"ttfat: warning: workers that never sent their end: {', '.join(unfinished)}", file=sys.stderr
            )
        return summary


IDLE_TIMEOUT_S = 300.0


async def collect(
    host: str,
    port: int = 1883,
    out: str | Path = "runs/collected",
    run: str | None = None,
    idle_timeout: float | None = IDLE_TIMEOUT_S,
    workers: int | None = None,
    *,
    backoff: tuple[float, float] = (0.5, 5.0),
    on_subscribed: Callable[[], None] | None = None,
    **options: Any,  # username, password, tls_context: see voice.record.mqtt.client_options
) -> Path:
    """Subscribe to `ttfat/<run>/#` and write the run directory until every worker has ended, no
    message came for `idle_timeout` s (None or 0: wait forever), or the task is cancelled (Ctrl-C).
    The directory is complete in every case. `on_subscribed` is called after each (re)subscription."""
    import aiomqtt

    out = Path(out)
    collection = Collection(out, run)
    loop = asyncio.get_running_loop()
    last = loop.time()
    idle = lambda: idle_timeout and loop.time() - last >= idle_timeout  # noqa: E731
    delay, warned, ended_by = backoff[0], False, "interrupted"
    try:
        while True:
            try:
                async with aiomqtt.Client(host, port, timeout=5, **options) as client:
                    await client.subscribe(f"{PREFIX}/{topic_part(run) if run else '+'}/#", qos=1)
                    if warned:
                        print(f"ttfat: collect: connected to {host}:{port} again", file=sys.stderr)
                    delay, warned = backoff[0], False
                    if on_subscribed:
                        on_subscribed()
                    messages = client.messages.__aiter__()
                    while not collection.finished(workers):
                        if idle():
                            ended_by = "idle timeout"
                            return out
                        wait = idle_timeout - (loop.time() - last) if idle_timeout else None
                        try:  # asyncio.timeout, not wait_for: on Python 3.11 that can lose a Ctrl-C
                            async with asyncio.timeout(wait):
                                message = await messages.__anext__()
                        except TimeoutError:
                            continue
                        last = loop.time()
                        collection.handle(message.topic.value, message.payload)
                    ended_by = "workers ended"
                    return out
            except aiomqtt.MqttError as e:
                if not warned:
                    warned = True
                    print(
                        f"ttfat: warning: collect: MQTT broker {host}:{port} not available ({e}); retrying "
                        "(messages published meanwhile are lost and reported as gaps)",
                        file=sys.stderr,
                    )
                if idle():
                    ended_by = "idle timeout"
                    return out
                await asyncio.sleep(delay)
                delay = min(delay * 2, backoff[1])
    finally:
        collection.close(ended_by)
