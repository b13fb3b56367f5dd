"""How far a probe's figures are from what an agent recorded of the same turns (its own run directory, on
its own clock: `ttfat serve-agent`'s). No clock is shared: each side places a moment in the call's audio,
as its end of speech (`speech_end_s`, from the start of the caller's audio) plus its figure from t0, so
a probe that takes its t0 from a manifest and an agent that detects its own are compared on the moment
heard, not on two t0s. Turns are joined by call and by end of speech, within `JOIN_S`."""

from __future__ import annotations

JOIN_S = 0.3


def same_turn(probed: dict, agent: list[dict]) -> dict | None:
    """The agent's record of the turn a probe heard: the same call, the nearest end of speech within
    `JOIN_S` (None when there is none)."""
    same = [a for a in agent if a["call"] == probed["call"] and a.get("speech_end_s") is not None]
    near = min(same, key=lambda a: abs(a["speech_end_s"] - probed["speech_end_s"]), default=None)
    return near if near and abs(near["speech_end_s"] - probed["speech_end_s"]) <= JOIN_S else None


def joined(probe: list[dict], agent: list[dict], metric: str = "first_useful_audio_ms") -> list[dict]:
    """One row per probe turn that the agent also recorded with `metric`: both figures from their own
    t0, and how much later the probe placed the moment (ms, probe - agent)."""
    at = lambda r: r["speech_end_s"] * 1000 + r[metric]  # noqa: E731
    with_metric = [a for a in agent if a.get(metric) is not None]
    rows = []
    for p in probe:
        if p.get(metric) is None or p.get("speech_end_s") is None:
            continue
        if (a := same_turn(p, with_metric)) is not None:
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
