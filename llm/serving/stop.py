"""Stop sequences (OpenAI's `stop`): the reply's content ends right before the first of them, which is
not sent. Text that could be the start of one is held back until the next piece shows it is not."""

from __future__ import annotations


class StopSequences:
    def __init__(self, stops: list[str]):
        self.stops = stops
        self.held = ""  # content that may be the start of a stop sequence
        self.hold = max((len(s) for s in stops), default=1) - 1

    def feed(self, text: str) -> tuple[str, bool]:
        """(content to send now, whether a stop sequence was reached)."""
        if not self.stops:
            return text, False
        self.held += text
        hits = [i for i in (self.held.find(s) for s in self.stops) if i >= 0]
        if hits:
            out, self.held = self.held[: min(hits)], ""
            return out, True
        cut = len(self.held) - self.hold
        out, self.held = (self.held[:cut], self.held[cut:]) if cut > 0 else ("", self.held)
        return out, False

    def flush(self) -> str:
        """What was held back, once the reply ends without reaching a stop sequence."""
        out, self.held = self.held, ""
        return out
