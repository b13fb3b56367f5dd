"""The run directory: `events.jsonl` (every timeline event), `turns.jsonl` (one record per finished
turn), `summary.json` (percentiles, success rate, quality, environment). The log is an observer of the
timeline: it writes each event as it is emitted and each turn record when its `turn_done` arrives.
A mirror (the MQTT publisher, `voice/mqtt.py`) sees the same events, records and summary."""

from __future__ import annotations

import json
from pathlib import Path

from voice.timeline import Event, Timeline


class RunDirError(FileNotFoundError):
    """A path that is not a run directory."""


class RunLog:
    def __init__(self, out: str | Path, mirror=None):
        self.dir, self.mirror = Path(out), mirror
        self.dir.mkdir(parents=True, exist_ok=True)
        self.events = open(self.dir / "events.jsonl", "w")  # noqa: SIM115 (open for the whole run)
        self.turns = open(self.dir / "turns.jsonl", "w")  # noqa: SIM115
        self.records: list[dict] = []

    def watch(self, timeline: Timeline) -> None:
        timeline.observers.append(lambda event: self.on_event(timeline, event))
        if self.mirror:
            self.mirror.observe(timeline)

    def on_event(self, timeline: Timeline, event: Event) -> None:
        self.write_event(event.to_dict())
        if event.name == "turn_done":
            self.write_turn(timeline.turns[event.turn].to_dict())

    def write_event(self, event: dict) -> None:
        self.events.write(json.dumps(event, default=str) + "\n")
        self.events.flush()

    def write_turn(self, record: dict) -> None:
        self.records.append(record)
        self.turns.write(json.dumps(record, default=str) + "\n")
        self.turns.flush()

    def write_records(self, records: list[dict]) -> None:
        """Records of turns that never ran through a timeline (an unreadable file, a missed turn)."""
        if self.mirror:
            self.mirror.publish_records(records)
        for record in records:
            self.write_turn(record)

    def close(self, summary: dict) -> None:
        self.events.close()
        self.turns.close()
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
        if self.mirror:
            self.mirror.end(summary)


def read_run(path: str | Path) -> tuple[list[dict], dict]:
    """(turn records, summary) of a run directory; a clear error when it is not one."""
    path = Path(path)
    turns_file = path / "turns.jsonl"
    if not turns_file.is_file():
        raise RunDirError(f"{path} is not a run directory (no turns.jsonl)")
    turns = [json.loads(line) for line in turns_file.read_text().splitlines() if line.strip()]
    summary_file = path / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    return turns, summary
