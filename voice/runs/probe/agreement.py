"""How far a probe's figures are from what an agent recorded of the same turns (its own run directory, on
its own clock: `ttfat serve-agent`'s). No clock is shared: each side places a moment in the call's audio,
as its end of speech (`speech_end_s`, from the start of the caller's audio) plus its figure from t0, so
a probe that takes its t0 from a manifest and an agent that detects its own are compared on the moment
heard, not on two t0s. Turns are joined by call and by end of speech, within `JOIN_S`."""

from __future__ import annotations

JOIN_S = 0.3


def joined(probe: list[dict], agent: list[dict], metric: str = "first_useful_audio_ms") -> list[dict]:
    """One row per probe turn that the agent also recorded with `metric`: both figures from their own
    t0, and how much later the probe placed the moment (ms, probe - agent)."""
    at = lambda r: r["speech_end_s"] * 1000 + r[metric]  # noqa: E731
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
                    "difference_ms": round(at(p) - at(a), 1),
                }
            )
    return rows
