"""What the rooms of a call (turn taking, speculation, the answer) are given of it: `CallContext`.

`Call` builds one and hands it to `TurnTaking`, which hands it on; no room is handed the `Call`
itself, so none can reach into the call's loop or its detector, and voice/pipeline/call.py imports the rooms
while nothing they import leads back to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from voice.pipeline.settings import Settings
from voice.pipeline.stages import Speaker, Stages
from voice.pipeline.turns import Turn
from voice.timing.timeline import Timeline


@dataclass(frozen=True)
class CallContext:
    timeline: Timeline  # the call's events; its turn records are written through a TurnLog
    stages: Stages
    settings: Settings
    speaker: Speaker
    history: list[dict]  # the conversation so far, as the agent sees it (grows as turns are answered)
    at: Callable[[int], int]  # when a caller sample was captured, on the call's clock
    annotate: Callable[[Turn], dict]  # what a turn's record keeps besides its measures (a reference)
