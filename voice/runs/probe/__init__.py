"""`ttfat probe`: any voice agent measured from outside, the way a caller hears it (docs/timing.md,
measured from outside). `session.py` calls the agent over its media-stream WebSocket and keeps what came
back; `playout.py` plays it as a phone would; `listening.py` finds each turn's anchors in what was heard;
`run.py` runs the calls into a run directory; `agreement.py` sets a probe's figures beside an agent's own
records of the same turns (bench/probe.py).
"""
