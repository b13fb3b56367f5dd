"""How far a probe's figures are from what an agent recorded of the same turns (its own run directory, on
its own clock: `ttfat serve-agent`'s). Both count from their own t0, so no clock is shared. Turns are
joined by call and by the caller's end of speech in the call's audio (`speech_end_s`), which both sides
find with the same turn detector: within `JOIN_S`."""

from __future__ import annotations

JOIN_S = 0.15


def joined(probe: list[dict], agent: list[dict], metric: str = "first_useful_audio_ms") -> list[dict]:
    """One row per probe turn that the agent also recorded with `metric`: both figures, probe - agent."""
    rows = []
    for p in probe:
        if p.get(metric) is None or p.get("speech_end_s") is None:
            continue
        same = [
            a
            for a in agent
            if a["call"] == p["call"]
            and a.get(metric) is not None
            and abs(a.get("speech_end_s", -1e9) - p["speech_end_s"]) <= JOIN_S
        ]
        if same:
            a = min(same, key=lambda a: abs(a["speech_end_s"] - p["speech_end_s"]))
            rows.append(
                {
                    "call": p["call"],
                    "turn": p["turn"],
                    "probe_ms": p[metric],
                    "agent_ms": a[metric],
                    "difference_ms": round(p[metric] - a[metric], 1),
                }
            )
    return rows
