"""Turns the agent talked over (docs/timing.md, "talked over"): a fast agent that answers early must not
look good. A caller's turn is talked over when the agent starts to be heard before the caller has
finished it: an onset of the agent's audio (a clause heard from its start) inside the caller's speech.
With references (a manifest) that is exact: each reference turn's own span. Without them the turn
detector's spans cannot show it (they end where the agent cut in), so a stand-in is counted and labelled
so: the caller speaking again within `AGAIN_S` of the agent's first sound, as a barge-in.

Audio that was already playing when the caller began (the caller barging in) is no onset: that is the
barge-in's record, not talking over. A reference turn found as two or more turns is *split*."""

from __future__ import annotations

from collections import defaultdict

AGAIN_S = 1.0  # without references: the caller back within this of the agent's first sound
EXACT = "against the references"
ESTIMATED = f"estimated: the caller spoke again within {AGAIN_S:g} s of the agent's first sound"


def _onsets_s(record: dict) -> list[float]:
    """Where the turn's clauses (and its first audio) started to be heard, in s of the call's audio."""
    end = record.get("speech_end_s")
    if end is None:
        return []
    heard = [c.get("heard_ms") for c in record.get("clauses") or []] + [record.get("first_audio_ms")]
    return [end + ms / 1000 for ms in heard if ms is not None]


def _spans(records: list[dict]) -> list[tuple[float, float]]:
    return [(r["speech_start_s"], r["speech_end_s"]) for r in records if r.get("speech_start_s") is not None]


def _timed(record: dict) -> dict | None:
    """The record's reference turn, if it says when the caller spoke."""
    ref = record.get("reference") or {}
    return ref if "speech_start_s" in ref and "speech_end_s" in ref else None


def _exact(records: list[dict]) -> tuple[int, int, int]:
    """(reference turns, talked over, split) in one call with references."""
    refs = {(ref["speech_start_s"], ref["speech_end_s"]) for ref in map(_timed, records) if ref}
    onsets = [o for r in records for o in _onsets_s(r)]
    spans = _spans(records)
    over = sum(any(start < o < end for o in onsets) for start, end in refs)
    split = sum(sum(min(end, e) > max(start, s) for s, e in spans) > 1 for start, end in refs)
    return len(refs), over, split


def _estimated(records: list[dict]) -> tuple[int, int, int]:
    """(turns, talked over by the stand-in, 0) in one call without references."""
    turns = sorted(
        (r for r in records if r.get("speech_start_s") is not None), key=lambda r: r["speech_start_s"]
    )
    over = 0
    for turn, after in zip(turns, turns[1:], strict=False):
        first = turn.get("first_audio_ms")
        heard = None if first is None else turn["speech_end_s"] + first / 1000
        over += heard is not None and heard <= after["speech_start_s"] <= heard + AGAIN_S
    return len(turns), over, 0


def talked_over(records: list[dict]) -> dict:
    """The caller's turns talked over and split, over a run's records; `how` says whether against the
    references or by the stand-in."""
    calls: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        calls[r["call"]].append(r)
    hows, totals = set(), [0, 0, 0]
    for turns in calls.values():
        exact = any(map(_timed, turns))
        hows.add(EXACT if exact else ESTIMATED)
        for i, n in enumerate(_exact(turns) if exact else _estimated(turns)):
            totals[i] += n
    of, over, split = totals
    how = hows.pop() if len(hows) == 1 else f"{EXACT} where a call has them, else {ESTIMATED.split(': ')[1]}"
    return {"turns": over, "of": of, "rate": round(over / of, 4) if of else None, "split": split, "how": how}
