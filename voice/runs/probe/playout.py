"""The agent's audio as a phone plays it (docs/timing.md, measured from outside).

Each chunk starts at its arrival or at the end of the audio before it, whichever is later, plus the
playout delay (a jitter buffer's). A `clear` drops what would be heard after the clear arrived (plus the
delay): audio already in the handset's buffer plays, the rest never does. What was heard is a track on
the probe's clock, sample 0 at `origin_ns`, at the wire's rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Chunk:
    start_ns: int  # heard from
    samples: np.ndarray
    end_ns: int  # heard until (a clear may cut it)


@dataclass
class Playout:
    rate: int
    delay_ns: int = 0
    chunks: list[Chunk] = field(default_factory=list)
    busy_until_ns: int = 0
    clears: list[int] = field(default_factory=list)  # when each clear took effect
    cut_short: list[int] = field(default_factory=list)  # ... those that dropped audio not yet heard

    def arrive(self, t_ns: int, samples: np.ndarray) -> int:
        """A chunk arrived at `t_ns`; returns when its last sample will be heard."""
        start = max(t_ns + self.delay_ns, self.busy_until_ns)
        end = start + len(samples) * 1_000_000_000 // self.rate
        self.chunks.append(Chunk(start, samples, end))
        self.busy_until_ns = end
        return end

    def clear(self, t_ns: int) -> None:
        """Audio not heard by `t_ns` plus the delay is dropped."""
        cut = t_ns + self.delay_ns
        if any(chunk.end_ns > cut for chunk in self.chunks):
            self.cut_short.append(cut)
        for chunk in self.chunks:
            chunk.end_ns = min(chunk.end_ns, max(chunk.start_ns, cut))
        self.busy_until_ns = min(self.busy_until_ns, cut)
        self.clears.append(cut)

    def track(self, origin_ns: int, until_ns: int) -> np.ndarray:
        """What was heard from `origin_ns` to `until_ns`, at `rate`, silence where nothing played."""
        at = lambda t: (t - origin_ns) * self.rate // 1_000_000_000  # noqa: E731
        out = np.zeros(max(0, at(until_ns)), dtype=np.float32)
        for chunk in self.chunks:
            heard = chunk.samples[: max(0, at(chunk.end_ns) - at(chunk.start_ns))]
            begin = at(chunk.start_ns)
            if begin < 0 or begin >= len(out):
                continue
            piece = heard[: len(out) - begin]
            out[begin : begin + len(piece)] = piece
        return out
