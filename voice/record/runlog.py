"""The run directory: `events.jsonl` (every timeline event), `turns.jsonl` (one record per finished
turn), `summary.json` (percentiles, success rate, quality, environment), and each turn's audio
(`audio/`, listed in `audio.jsonl`; voice/record/turnaudio.py). The log is an observer of the
timeline: it writes each event as it is emitted and each turn record when its `turn_done` arrives.
Mirrors (the MQTT publisher, `voice/record/mqtt.py`; the trace exporter, `voice/record/otlp.py`) see the
same events, records and summary."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from voice.record.turnaudio import CallAudio, write_turns
from voice.timing.events import known
from voice.timing.timeline import Event, Timeline


class RunDirError(FileNotFoundError):
    """A path that is not a run directory."""


AUDIO_INDEX = "audio.jsonl"
CALL_DONE = known("call_replayed")  # the event that marks a call's records complete (what --resume keeps)


class RunLog:
    """``resume``: keep what a run directory holds of the calls it completed (their records and events),
    drop what it holds of any other (a call cut short by a crash is replayed whole), and append.

    A write that fails (the disk full) stops all writing; `failed` says why, the replay stops at the end
    of the call under way, and what was written before stays whole (every line is written at once;
    readers skip a torn last line)."""

    def __init__(self, out: str | Path, mirrors: Sequence = (), resume: bool = False):
        self.dir, self.mirrors = Path(out), list(mirrors)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.records: list[dict] = []
        self.done: set[str] = set()  # calls complete in the directory (resume)
        self.failed: str | None = None
        mode = "w"
        if resume:
            self.done, self.records = _kept(self.dir)
            mode = "a"
        else:
            (self.dir / AUDIO_INDEX).unlink(missing_ok=True)
        self.events = open(self.dir / "events.jsonl", mode)  # noqa: SIM115 (open for the whole run)
        self.turns = open(self.dir / "turns.jsonl", mode)  # noqa: SIM115

    def watch(self, timeline: Timeline) -> None:
        timeline.observers.append(lambda event: self.on_event(timeline, event))
        for mirror in self.mirrors:
            mirror.observe(timeline)

    def on_event(self, timeline: Timeline, event: Event) -> None:
        self.write_event(event.to_dict())
        if event.name == "turn_done":
            self.write_turn(timeline.turns[event.turn].to_dict())

    def _write(self, file, row: dict) -> None:
        if self.failed:
            return
        try:
            file.write(json.dumps(row, default=str) + "\n")
            file.flush()
        except OSError as e:
            self.failed = f"{file.name}: cannot write ({e.strerror or e}); the run stopped there"

    def write_event(self, event: dict) -> None:
        self._write(self.events, event)

    def write_turn(self, record: dict) -> None:
        self.records.append(record)
        self._write(self.turns, record)

    def write_records(self, records: list[dict]) -> None:
        """Records of turns that never ran through a timeline (an unreadable file, a missed turn)."""
        for mirror in self.mirrors:
            mirror.publish_records(records)
        for record in records:
            self.write_turn(record)

    def write_audio(self, timeline: Timeline, audio: CallAudio) -> None:
        """A finished call's turn clips (blocking: encoding takes CPU, run it in a worker thread)."""
        if self.failed:
            return
        try:
            rows = write_turns(self.dir / "audio", timeline, audio)
            with open(self.dir / AUDIO_INDEX, "a") as index:
                index.write("".join(json.dumps(row) + "\n" for row in rows))
        except OSError as e:
            self.failed = f"{self.dir / 'audio'}: cannot write ({e.strerror or e}); the run stopped there"

    def call_done(self, call: str) -> None:
        """Every record of `call` is written: a resumed run keeps them."""
        self.write_event({"call": call, "turn": -1, "event": CALL_DONE})

    def close(self, summary: dict) -> None:
        for file in (self.events, self.turns):
            try:
                file.close()
            except OSError as e:
                self.failed = self.failed or f"{file.name}: cannot write ({e.strerror or e})"
        if self.failed:
            raise RunDirError(self.failed)
        tmp = self.dir / "summary.json.tmp"
        try:
            tmp.write_text(json.dumps(summary, indent=2, default=str) + "\n")
            tmp.replace(self.dir / "summary.json")  # whole or not at all
        except OSError as e:
            raise RunDirError(f"{self.dir / 'summary.json'}: cannot write ({e.strerror or e})") from None
        for mirror in self.mirrors:
            mirror.end(summary)


RUN_FILES = ("events.jsonl", "turns.jsonl", "summary.json")


def holds_run(path: Path) -> bool:
    """A run's files are there (or, for an A/B run's directory, in a folder of it)."""
    folders = [path, *(p for p in path.iterdir() if p.is_dir())] if path.is_dir() else []
    return any((folder / name).is_file() for folder in folders for name in RUN_FILES)


def check_run_dir(out: Path, resume: bool = False, force: bool = False) -> None:
    """What a run would find out about its directory only after loading everything: a path that is
    not a folder, one it cannot create or write into, a finished run it would overwrite. Leaves
    nothing behind."""
    import tempfile

    if out.exists() and not out.is_dir():
        raise RunDirError(f"{out}: not a directory")
    if holds_run(out) and not (resume or force):
        raise RunDirError(
            f"{out} holds a run already: --resume to finish it, --force to replace it, or another --out"
        )
    existing = next(p for p in (out, *out.parents) if p.exists())  # "." at worst
    if not existing.is_dir():
        raise RunDirError(f"{out}: {existing} is not a directory")
    try:  # a real write: permission bits do not stop root, a read-only file system does
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        raise RunDirError(f"{out}: cannot write into {existing} ({e.strerror or e})") from None


def _lines(path: Path) -> list[dict]:
    """The complete lines of a JSONL file (a crash can leave the last one half written)."""
    out = []
    for line in path.read_text().splitlines() if path.is_file() else []:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _kept(run: Path) -> tuple[set[str], list[dict]]:
    """Rewrite a run directory's logs with only the calls it completed; (those calls, their records)."""
    events, turns, clips = (_lines(run / name) for name in ("events.jsonl", "turns.jsonl", AUDIO_INDEX))
    done = {e["call"] for e in events if e.get("event") == CALL_DONE}
    events = [e for e in events if e.get("call") in done]
    records = [t for t in turns if t.get("call") in done]
    clips = [c for c in clips if c.get("call") in done]
    for name, rows in (("events.jsonl", events), ("turns.jsonl", records), (AUDIO_INDEX, clips)):
        tmp = run / (name + ".tmp")
        tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in rows))
        tmp.replace(run / name)  # atomic: a second crash leaves the old or the new file, whole
    return done, records


def read_run(path: str | Path) -> tuple[list[dict], dict]:
    """(turn records, summary) of a run directory; a clear error when it is not one."""
    path = Path(path)
    turns_file = path / "turns.jsonl"
    if not turns_file.is_file():
        raise RunDirError(f"{path} is not a run directory (no turns.jsonl)")
    turns = _lines(turns_file)  # a torn last line (a crash, a full disk) is left out
    summary_file = path / "summary.json"
    summary = json.loads(summary_file.read_text()) if summary_file.is_file() else {}
    return turns, summary


def read_audio(path: str | Path) -> dict[tuple[str, int], dict]:
    """A run directory's turn clips by (call, turn), each row with its file's bytes (`data`); a file
    that is gone is left out."""
    path, out = Path(path), {}
    for row in _lines(path / AUDIO_INDEX):
        file = path / row["file"]
        if file.is_file():
            out[(row["call"], row["turn"])] = {**row, "data": file.read_bytes()}
    return out
