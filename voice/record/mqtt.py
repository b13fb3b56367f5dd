"""Timeline events and turn records over MQTT, so one collector can gather the runs of
many workers (`ttfat collect`, in voice/record/collect.py) while each worker keeps its own run log.

Topics are `ttfat/<run>/<call>/<event>`, `ttfat/<run>/<call>/turn` for turn records and
`ttfat/<run>/_run/start|end` for the worker's environment and summary. Payloads are the run log's
JSON plus `worker` and a per-call `seq` (1, 2, 3 ... over a call's events and turn records), so the
collector can tell a lost message from one that was never sent.

The broker is never allowed to stop or slow the pipeline: the observer only puts the message on a
bounded queue (the oldest is dropped, and counted, when it is full); a background task publishes
with QoS 1 and, when the broker is absent or goes away, warns once, reconnects with backoff and
resends what was not acknowledged. The run log is a separate observer and stays complete.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import socket
import ssl
import sys
import threading
from collections import defaultdict
from typing import Any

from voice.timing.timeline import Event, Timeline

PREFIX = "ttfat"


def topic_part(name: str) -> str:
    """A call or run name as one topic level: '/', '+' and '#' would split it or act as wildcards."""
    return re.sub(r"[/+#\x00]", "_", str(name)) or "_"


def parse_host(value: str, tls: bool = False) -> tuple[str, int]:
    """HOST, HOST:PORT or [IPv6]:PORT; the port defaults to 1883 (8883 with TLS)."""
    default = 8883 if tls else 1883
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        host, port = value.split(":")
    else:
        host, port = value, ""
    if not host or (port and not port.isdigit()):
        raise ValueError(f"--mqtt {value!r}: expected HOST or HOST:PORT")
    return host, int(port) if port else default


def client_options(
    username: str | None = None, password: str | None = None, tls: bool = False, ca: str | None = None
) -> dict[str, Any]:
    """Keyword arguments of aiomqtt.Client for the auth and TLS options (TLS is implied by --mqtt-ca)."""
    options: dict[str, Any] = {"username": username, "password": password}
    if tls or ca:
        options["tls_context"] = ssl.create_default_context(cafile=ca)
    return options


class MqttPublisher:
    """Publishes a worker's timeline events and turn records; see the module docstring for why.

    `async with MqttPublisher(host, port, run_id) as pub:` then `pub.observe(timeline)` per call,
    `pub.publish_records(records)` for records written without a timeline, `pub.end(summary)`."""

    def __init__(
        self,
        host: str,
        port: int = 1883,
        run_id: str = "run",
        *,
        environment: dict | None = None,
        worker: str | None = None,
        max_queue: int = 10_000,
        backoff: tuple[float, float] = (0.5, 10.0),
        flush_timeout: float = 5.0,
        **options: Any,  # username, password, tls_context: see client_options
    ):
        self.host, self.port, self.run = host, port, run_id
        self.environment = environment or {}
        self.worker = worker or f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"
        self.max_queue, self.backoff, self.flush_timeout = max_queue, backoff, flush_timeout
        self.options = options
        self.seq: dict[str, int] = defaultdict(int)  # last sequence number per call
        self.dropped = 0  # messages dropped from the full queue
        self.connected = False
        self.warned = False
        self.ended = False

    async def __aenter__(self) -> MqttPublisher:
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue(self.max_queue)
        self.batch: list[tuple[str, str]] = []  # taken from the queue, not yet acknowledged
        self.task = asyncio.create_task(self._pump())
        self._put("_run", "start", {"environment": self.environment})
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        if not self.ended:  # an aborted run still tells the collector this worker is done
            self.end({"aborted": repr(exc)} if exc else None)
        # Without a broker, do not hold up the end of the run for long.
        await self.flush(self.flush_timeout if self.connected else min(1.0, self.flush_timeout))
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        left = self.queue.qsize() + len(self.batch)
        if left or self.dropped:
            print(
                f"ttfat: MQTT: {left} messages not delivered, {self.dropped} dropped from the full queue "
                "(the local run log is complete)",
                file=sys.stderr,
            )

    async def flush(self, timeout: float) -> bool:
        """Wait until every queued message is acknowledged (True), or give up after `timeout` s."""
        deadline = self.loop.time() + timeout
        while self.queue.qsize() or self.batch:
            if self.loop.time() >= deadline:
                return False
            await asyncio.sleep(0.01)
        return True

    def observe(self, timeline: Timeline) -> None:
        """Publish each event of this call and, on `turn_done`, its turn record (like RunLog.watch)."""

        def on_event(event: Event) -> None:
            self._put(event.call, event.name, event.to_dict())
            if event.name == "turn_done":
                self._put(event.call, "turn", timeline.turns[event.turn].to_dict())

        timeline.observers.append(on_event)

    def publish_records(self, records: list[dict]) -> None:
        """Turn records written without a timeline (an unreadable file, a missed turn)."""
        for record in records:
            self._put(record["call"], "turn", record)

    def end(self, summary: dict | None) -> None:
        """The worker's last message: its summary and how many messages each call had, so the
        collector can also count the ones lost at the very end."""
        self.ended = True
        self._put("_run", "end", {"summary": summary, "sent": dict(self.seq), "dropped": self.dropped})

    def _put(self, call: str, name: str, data: dict) -> None:
        """Never blocks and never raises into the pipeline; safe to call from another thread."""
        if threading.get_ident() != self.thread:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the run is over
                self.loop.call_soon_threadsafe(self._put, call, name, data)
            return
        payload = {**data, "worker": self.worker}
        if call != "_run":
            self.seq[call] += 1
            payload["seq"] = self.seq[call]
        topic = f"{PREFIX}/{topic_part(self.run)}/{topic_part(call)}/{topic_part(name)}"
        message = (topic, json.dumps(payload, default=str))
        if self.queue.full():
            self.queue.get_nowait()
            self.dropped += 1
        self.queue.put_nowait(message)

    async def _pump(self) -> None:
        """Connect, publish batches until the connection fails, warn once per outage, back off, retry."""
        import aiomqtt  # here, so that `ttfat --help` does not pay for it

        delay = self.backoff[0]
        while True:
            try:
                async with aiomqtt.Client(self.host, self.port, timeout=5, **self.options) as client:
                    if self.warned:
                        print(f"ttfat: MQTT: connected to {self.host}:{self.port} again", file=sys.stderr)
                    self.connected, self.warned, delay = True, False, self.backoff[0]
                    while True:
                        if not self.batch:
                            self.batch.append(await self.queue.get())
                            while len(self.batch) < 100 and not self.queue.empty():
                                self.batch.append(self.queue.get_nowait())
                        sent = [client.publish(t, p, qos=1) for t, p in self.batch]
                        for result in await asyncio.gather(*sent, return_exceptions=True):
                            if isinstance(result, Exception):
                                raise result  # resend the whole batch: the collector drops duplicates
                        self.batch = []
            except aiomqtt.MqttError as e:
                self.connected = False
                if not self.warned:
                    self.warned = True
                    print(
                        f"ttfat: warning: MQTT broker {self.host}:{self.port} not available ({e}); the run "
                        f"goes on, messages wait in a queue of {self.max_queue} (oldest dropped when full) "
                        "and are sent when it comes back; the local run log is complete",
                        file=sys.stderr,
                    )
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff[1])


def add_auth_args(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--mqtt-username", help="broker user name")
    g.add_argument(
        "--mqtt-password",
        default=os.environ.get("TTFAT_MQTT_PASSWORD"),
        help="broker password (default: $TTFAT_MQTT_PASSWORD, which keeps it out of the process list)",
    )
    g.add_argument("--mqtt-tls", action="store_true", help="connect with TLS (default port 8883)")
    g.add_argument("--mqtt-ca", metavar="FILE", help="CA certificate of the broker (implies --mqtt-tls)")


def add_mqtt_args(parser: argparse.ArgumentParser) -> None:
    """--mqtt and friends for `talk` and `replay`."""
    g = parser.add_argument_group("MQTT (publish live events to a broker; collect them with `ttfat collect`)")
    g.add_argument(
        "--mqtt",
        metavar="HOST[:PORT]",
        help="publish every event and turn record on ttfat/RUN/CALL/EVENT (QoS 1); a missing broker "
        "only warns, the run and its run directory go on",
    )
    g.add_argument(
        "--mqtt-run",
        metavar="RUN",
        help="run id shared by the workers of one collected run (default: the run directory's name)",
    )
    add_auth_args(g)


def auth_from_args(args: argparse.Namespace) -> dict[str, Any]:
    return client_options(args.mqtt_username, args.mqtt_password, args.mqtt_tls, args.mqtt_ca)


def broker_from_args(args: argparse.Namespace) -> tuple[str, int]:
    return parse_host(args.mqtt, args.mqtt_tls or bool(args.mqtt_ca))


def publisher_from_args(
    args: argparse.Namespace, run_id: str, environment: dict | None = None
) -> MqttPublisher | None:
    """The publisher the options ask for, or None without --mqtt."""
    if not args.mqtt:
        return None
    host, port = broker_from_args(args)
    return MqttPublisher(host, port, args.mqtt_run or run_id, environment=environment, **auth_from_args(args))
