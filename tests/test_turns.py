"""Turn detection against the true speech boundaries of the bundled recordings."""

from __future__ import annotations

import numpy as np
import pytest

from voice.audio import RATE, load_audio
from voice.replay import find_calls
from voice.turns import TurnDetector, VadConfig


def detect(samples: np.ndarray, config: VadConfig | None = None) -> list:
    detector = TurnDetector(RATE, config)
    n = detector.frame_len
    turns = [t for i in range(len(samples) // n) if (t := detector.push(samples[i * n : (i + 1) * n]))]
    return turns + ([last] if (last := detector.flush()) else [])


def test_t0_is_within_30_ms_of_the_true_speech_end_on_every_recorded_turn():
    errors = []
    for call in find_calls(["recordings"]):
        turns = detect(load_audio(call.path, call.channel).samples)
        assert len(turns) == len(call.reference), call.name
        for found, ref in zip(turns, call.reference, strict=True):
            errors.append(found.end / RATE - ref["speech_end_s"])
            assert abs(found.start / RATE - ref["speech_start_s"]) < 0.15, (call.name, ref["turn"])
            # the endpoint comes one end window (300 ms) after t0, give or take a frame
            assert 0.27 <= (found.decided - found.end) / RATE <= 0.36
    errors = np.abs(errors)
    print(f"t0 error over {len(errors)} turns: mean {errors.mean():.3f} s, max {errors.max():.3f} s")
    assert errors.max() <= 0.030


def test_config_is_validated_before_webrtcvad_sees_it():
    with pytest.raises(ValueError, match="sample rates"):
        TurnDetector(22050)
    with pytest.raises(ValueError, match="frames of"):
        TurnDetector(RATE, VadConfig(frame_ms=25))
    with pytest.raises(ValueError, match="0..3"):
        TurnDetector(RATE, VadConfig(aggressiveness=4))
    with pytest.raises(ValueError, match="must be 480 samples"):
        TurnDetector(RATE).push(np.zeros(100, np.float32))


def test_silence_has_no_turn_and_a_monologue_is_cut():
    assert detect(np.zeros(RATE * 5, np.float32)) == []
    rng = np.random.default_rng(0)
    t = np.arange(RATE * 4) / RATE
    buzz = 0.3 * np.sin(2 * np.pi * 180 * t) * (1 + np.sin(2 * np.pi * 3 * t)) + 0.05 * rng.standard_normal(
        len(t)
    )
    turns = detect(buzz.astype(np.float32), VadConfig(max_turn_s=1.0))
    assert turns and turns[0].cut and (turns[0].end - turns[0].start) / RATE <= 1.05
