"""`ttfat replay`: call recordings through the pipeline, N at a time, into a run directory.

Inputs are audio files, folders (their `manifest.jsonl` when there is one, else every audio file) or
manifests. With a manifest each detected turn is matched to its reference turn by overlap, so the
report can score quality and the turn detector's t0 error; a reference turn the detector missed is
recorded as a failed turn, and a file that cannot be read as a failed call: nothing is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from voice.pipeline.audio import AUDIO_SUFFIXES, RATE, AudioError, load_audio, probe_audio
from voice.pipeline.call import Call
from voice.pipeline.settings import Settings
from voice.pipeline.stages import Stages
from voice.pipeline.turns import Turn
from voice.record.runlog import RunDirError, RunLog
from voice.timing.timeline import TurnRecord


class ManifestError(ValueError):
    """A manifest.jsonl line that cannot be read; the message names the file and line."""


@dataclass
class CallInput:
    name: str
    path: Path
    channel: int | str = "auto"
    reference: list[dict] | None = None  # the manifest's turns
    named: bool = False  # given on the command line itself, not found in a folder or a manifest


SPAN = ("speech_start_s", "speech_end_s")  # seconds: every manifest turn says where its speech is


def read_manifest(path: Path) -> list[CallInput]:
    calls = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            channel = entry.get("caller_channel", "auto")
            calls.append(CallInput(entry["call"], path.parent / entry["file"], channel, entry.get("turns")))
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise ManifestError(f"{path}:{n}: not a manifest line ({e})") from e
        for k, turn in enumerate(calls[-1].reference or []):
            if not all(isinstance(turn.get(key), int | float) for key in SPAN):
                raise ManifestError(
                    f"{path}:{n}: turn {k} has no speech span (it needs {' and '.join(SPAN)})"
                )
    return calls


def find_calls(paths: list[str], channel: int | str = "auto") -> list[CallInput]:
    """Files, folders and manifests -> calls, in a stable order with unique names."""
    calls: list[CallInput] = []
    for p in map(Path, paths):
        if p.is_dir() and (p / "manifest.jsonl").is_file():
            calls += read_manifest(p / "manifest.jsonl")
        elif p.is_dir():
            found = sorted(f for f in p.rglob("*") if f.suffix.lower() in AUDIO_SUFFIXES)
            if not found:
                raise AudioError(f"{p}: no audio files ({', '.join(AUDIO_SUFFIXES)}) in this folder")
            calls += [CallInput(f.stem, f, channel) for f in found]
        elif p.suffix == ".jsonl":
            calls += read_manifest(p)
        else:  # a file (here a missing or unreadable one becomes a failed call; `ttfat replay`
            # refuses it first, check_calls)
            calls.append(CallInput(p.stem, p, channel, named=True))
    seen: dict[str, int] = {}
    for c in calls:
        seen[c.name] = seen.get(c.name, 0) + 1
        if seen[c.name] > 1:
            c.name = f"{c.name}-{seen[c.name]}"
    return calls


def check_calls(calls: list[CallInput]) -> None:
    """What `ttfat replay` refuses before a model loads: a file that is not there, and a file named on
    the command line that does not open as audio (`probe_audio`). A damaged recording found in a folder
    or a manifest is data, not a typo: it is replayed as a failed call, as `run` records it."""
    for call in calls:
        if call.named:
            probe_audio(call.path)
        elif not call.path.is_file():
            raise AudioError(f"{call.path}: no such file")


class References:
    """Matches detected turns to a call's reference turns by time overlap."""

    def __init__(self, turns: list[dict] | None):
        self.turns = turns or []
        self.used: set[int] = set()
        self.by_start: dict[int, int] = {}  # a continued turn keeps its start: it takes over the match

    def annotate(self, turn: Turn) -> dict:
        if turn.continues and turn.start in self.by_start:
            self.used.discard(self.by_start.pop(turn.start))
        start, end = turn.start / RATE, turn.end / RATE
        overlap = lambda r: min(end, r["speech_end_s"]) - max(start, r["speech_start_s"])  # noqa: E731
        best = max(
            (i for i in range(len(self.turns)) if i not in self.used),
            key=lambda i: overlap(self.turns[i]),
            default=None,
        )
        if best is None or overlap(self.turns[best]) <= 0:
            return {"reference": None}
        self.used.add(best)
        self.by_start[turn.start] = best
        ref = self.turns[best]
        return {"reference": ref, "t0_error_ms": round((end - ref["speech_end_s"]) * 1000, 1)}

    def take_all(self) -> list[dict]:
        """Every reference turn, each its own match: a probe with a manifest is the caller
        (voice/runs/probe/listening.py), its turns are the references."""
        self.used = set(range(len(self.turns)))
        return self.turns

    def missed(self) -> list[dict]:
        return [r for i, r in enumerate(self.turns) if i not in self.used]


def failed_records(call: str, error: str, status: str, references: list[dict], first: int = 0) -> list[dict]:
    """Records for turns that never ran (a missed turn, an unreadable file): they count as failures."""
    turns = references or [None]
    return [
        TurnRecord(call, first + i, status, error, info={"reference": ref}).to_dict()
        for i, ref in enumerate(turns)
    ]


async def replay_call(call: CallInput, stages: Stages, settings: Settings, log: RunLog) -> None:
    """One call into the log; when every record of it is written, the log marks it done."""
    await _replay_call(call, stages, settings, log)
    log.call_done(call.name)


async def _replay_call(call: CallInput, stages: Stages, settings: Settings, log: RunLog) -> None:
    try:
        audio = load_audio(call.path, call.channel)
    except AudioError as e:
        print(f"ttfat: {e}", file=sys.stderr)
        log.write_records(failed_records(call.name, str(e), "error", call.reference or []))
        return
    refs = References(call.reference)
    annotate = refs.annotate
    if audio.cut_short:
        print(
            f"ttfat: {call.path}: the file breaks off after {audio.seconds:.1f} s ({audio.cut_short}); "
            "replaying what comes before",
            file=sys.stderr,
        )
        annotate = lambda turn: {**refs.annotate(turn), "file_cut_short": audio.cut_short}  # noqa: E731
    runner = Call(call.name, audio.samples, stages, settings, annotate=annotate)
    log.watch(runner.timeline)
    await runner.run()
    if runner.audio:
        await asyncio.to_thread(log.write_audio, runner.timeline, runner.audio)
    n = len(runner.timeline.turns)
    missed = refs.missed()
    if call.reference and missed:
        after = [r for r in missed if audio.cut_short and r["speech_start_s"] >= audio.seconds]
        before = [r for r in missed if r not in after]
        records = []
        if before:
            records += failed_records(call.name, "the turn detector missed this turn", "no_answer", before, n)
        if after:
            gone = f"the file breaks off before this turn ({audio.cut_short})"
            records += failed_records(call.name, gone, "error", after, n + len(before))
        log.write_records(records)
    elif not n and not call.reference:
        message = f"{call.path}: no speech found in {audio.seconds:.1f} s of audio"
        print(f"ttfat: {message}", file=sys.stderr)
        log.write_records(failed_records(call.name, message, "no_answer", []))


async def replay_all(
    calls: list[CallInput],
    stages: Stages,
    settings: Settings,
    log: RunLog,
    concurrency: int = 1,
    on_done: Callable[[CallInput], None] | None = None,
) -> None:
    """Every call, at most `concurrency` at once against the same stages (and LLM server)."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    gate = asyncio.Semaphore(concurrency)

    async def one(call: CallInput) -> None:
        async with gate:
            if log.failed:  # the run directory cannot be written: stop, say why
                raise RunDirError(log.failed)
            await replay_call(call, stages, settings, log)
        if on_done:
            on_done(call)

    await asyncio.gather(*(one(c) for c in calls))


async def run(
    calls: list[CallInput],
    stages: Stages,
    settings: Settings,
    out: Path,
    concurrency: int,
    env: dict,
    mirrors: Sequence = (),
    resume: bool = False,
) -> dict:
    """The whole replay: warm-up (reported, excluded), every call with a progress bar, the summary.
    `mirrors` (async context managers) see every event and record too: the MQTT publisher (`--mqtt`),
    the trace exporter (`--otlp`). `resume`: only the calls `out` does not hold complete are replayed;
    the summary is made from all records."""
    async with opened(out, calls, env, mirrors, resume) as (log, calls, env):
        return await _run(calls, stages, settings, log, concurrency, env)


@contextlib.asynccontextmanager
async def opened(out: Path, calls: list[CallInput], env: dict, mirrors: Sequence = (), resume: bool = False):
    """(the run directory's log, the calls to run, the environment) with the mirrors entered; with
    `resume`, only the calls `out` does not hold complete, and the environment says so."""
    async with contextlib.AsyncExitStack() as stack:
        for mirror in mirrors:
            await stack.enter_async_context(mirror)
        log = RunLog(out, mirrors, resume=resume)
        if resume:
            env = {**env, "resumed": _resumes(out, log, calls)}
            calls = [c for c in calls if c.name not in log.done]
        yield log, calls, env


def _resumes(out: Path, log: RunLog, calls: list[CallInput]) -> list[dict]:
    """This resume and the ones before it (from the last summary, when there is one)."""
    import datetime as dt

    summary = out / "summary.json"
    try:
        earlier = json.loads(summary.read_text()).get("environment", {}).get("resumed", [])
    except (OSError, json.JSONDecodeError):
        earlier = []
    kept = sum(c.name in log.done for c in calls)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return [*earlier, {"at": now, "calls_kept": kept, "calls_to_replay": len(calls) - kept}]


async def _run(
    calls: list[CallInput], stages: Stages, settings: Settings, log: RunLog, concurrency: int, env: dict
) -> dict:
    from tqdm import tqdm

    from voice.reports.summary import summarize

    try:
        warmup = await stages.warm_up()
    except Exception as e:  # an unreachable server: every turn will record why; the run goes on
        from voice.pipeline.turntaking import describe

        warmup = {"failed": describe(e)}
        print(
            f"ttfat: warning: warm-up failed ({describe(e)}); turns will be recorded as failed",
            file=sys.stderr,
        )
    with tqdm(total=len(calls), unit="call", desc="replay", file=sys.stderr) as bar:
        await replay_all(calls, stages, settings, log, concurrency, on_done=lambda call: bar.update())
    summary = summarize(log.records, {**env, "warmup_ms (excluded)": warmup})
    log.close(summary)
    return summary


async def run_ab(
    calls: list[CallInput], arms: list[tuple[str, Stages, dict]], settings: Settings, out: Path
) -> list[dict]:
    """An A/B run: every call replayed against each arm (label, stages, environment) in turn, the order
    reversed from one call to the next (A B, B A, ...) so that drift of the machine hits every arm alike;
    each arm gets its own run directory ``out/<label>`` and summary. Returns the summaries."""
    from tqdm import tqdm

    from voice.reports.summary import summarize

    logs = [RunLog(out / label) for label, _, _ in arms]
    warmups = [await stages.warm_up() for _, stages, _ in arms]
    order: list[list[str]] = []
    with tqdm(total=len(calls) * len(arms), unit="call", desc="replay A/B", file=sys.stderr) as bar:
        for i, call in enumerate(calls):
            turn = list(range(len(arms)))[:: 1 if i % 2 == 0 else -1]
            order.append([arms[k][0] for k in turn])
            for k in turn:
                await replay_call(call, arms[k][1], settings, logs[k])
                bar.update()
    summaries = []
    for (label, _, env), log, warmup in zip(arms, logs, warmups, strict=True):
        ab = {"arms": [a[0] for a in arms], "this arm": label, "order per call": order}
        summary = summarize(log.records, {**env, "warmup_ms (excluded)": warmup, "ab": ab})
        log.close(summary)
        summaries.append(summary)
    return summaries
