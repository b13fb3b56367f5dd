"""Turn detection against the true speech boundaries of the bundled recordings."""

from __future__ import annotations

import numpy as np
import pytest

from voice.pipeline.audio import RATE, load_audio
from voice.pipeline.turns import Pause, Resume, Turn, TurnDetector, VadConfig
from voice.runs.replay import find_calls


def detect(samples: np.ndarray, config: VadConfig | None = None) -> list:
    """Turns as the pipeline sees them when the agent never speaks first: a pause shorter than
    merge_ms continues the turn."""
    detector = TurnDetector(RATE, config)
    n, turns = detector.frame_len, []
    for i in range(len(samples) // n):
        turn = detector.push(samples[i * n : (i + 1) * n])
        if detector.resuming:
            detector.resume()
        if isinstance(turn, Turn):
            turns = turns[:-1] + [turn] if turn.continues else [*turns, turn]
    if last := detector.flush():
        turns = turns[:-1] + [last] if last.continues else [*turns, last]
    return turns


def test_t0_against_the_true_speech_end_of_every_recorded_turn():
    """The manifest's speech end is exact (the clean track, where it is audible over the noise). Most
    turns land within 30 ms; the misses are faint releases ("...in stoc-k") after a closure and tails
    at 15 dB SNR, which the energy refinement cuts short."""
    errors = []
    for call in find_calls(["recordings"]):
        turns = detect(load_audio(call.path, call.channel).samples)
        assert len(turns) == len(call.reference), call.name
        for found, ref in zip(turns, call.reference, strict=True):
            errors.append(found.end / RATE - ref["speech_end_s"])
            assert abs(found.start / RATE - ref["speech_start_s"]) <= 0.05, (call.name, ref["turn"])
            assert found.end < found.decided  # t0 comes before the endpoint that declared it
    errors = np.abs(errors)
    within = np.mean(errors <= 0.030)
    print(
        f"t0 error over {len(errors)} turns: {100 * within:.0f}% within 30 ms, median "
        f"{1e3 * np.median(errors):.0f} ms, max {1e3 * errors.max():.0f} ms"
    )
    assert within >= 0.8 and np.median(errors) <= 0.015 and errors.max() <= 0.2


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


def events_of(samples: np.ndarray, detector: TurnDetector, to_s: float, from_s: float = 0.0) -> list:
    """(position, event) of each frame from `from_s` to `to_s` that made one."""
    n, out = detector.frame_len, []
    for i in range(int(from_s * RATE) // n, int(to_s * RATE) // n):
        event = detector.push(samples[i * n : (i + 1) * n])
        if event is not None:
            out.append((detector.pos, event))
    return out


def test_a_pause_within_a_turn_and_speech_coming_back():
    """call01 starts "hello [300 ms] is this northwind": with a long end window the detector reports
    the pauses and the resumptions inside the one turn; each pause carries the audio so far."""
    (call,) = [c for c in find_calls(["recordings"]) if c.name == "call01"]
    samples, ref = load_audio(call.path).samples, call.reference[0]
    events = events_of(samples, TurnDetector(RATE, VadConfig(end_ms=1500)), 5.0)
    kinds = [type(e).__name__ for _, e in events]
    assert kinds[0] == "Pause" and "Resume" in kinds and kinds[-1] == "Turn", kinds
    for pos, event in events:
        if isinstance(event, Pause):
            assert (
                event.end < pos and abs(len(event.audio) - (pos - ref["speech_start_s"] * RATE)) < 0.5 * RATE
            )
    turn = events[-1][1]
    assert abs(turn.start / RATE - ref["speech_start_s"]) <= 0.05
    assert abs(turn.end / RATE - ref["speech_end_s"]) <= 0.05


def test_a_judged_turn_ends_at_once_or_waits_longer():
    (call,) = [c for c in find_calls(["recordings"]) if c.name == "call01"]
    samples, ref = load_audio(call.path).samples, call.reference[0]
    detector = TurnDetector(RATE)
    _, pause = events_of(samples, detector, 1.8)[0]
    assert isinstance(pause, Pause) and detector.in_turn
    pos = detector.pos
    ended = detector.end_now()  # "complete": the turn ends here, its t0 refined as at any endpoint
    assert (
        ended.decided == pos and ended.end <= pos and abs(ended.start / RATE - ref["speech_start_s"]) <= 0.05
    )
    # "goes on": a longer end window keeps "hello" and "is this northwind" one turn
    detector = TurnDetector(RATE)
    events_of(samples, detector, 1.8)
    detector.wait_longer(800)
    turns = [e for _, e in events_of(samples, detector, 5.0, from_s=1.8) if isinstance(e, Turn)]
    assert turns and abs(turns[0].end / RATE - ref["speech_end_s"]) <= 0.05, turns


def test_no_endpoint_falls_on_speech_coming_back():
    """The end window tolerates a voiced frame in ten, but the frame that ends a turn is never voiced:
    a turn does not end just as the caller goes on, with its t0 on the new words."""
    for call in find_calls(["recordings"]):
        samples = load_audio(call.path, call.channel).samples
        for _, event in events_of(samples, TurnDetector(RATE), len(samples) / RATE):
            if isinstance(event, Turn):
                assert event.end <= event.decided - TurnDetector(RATE).frame_len, (
                    call.name,
                    event.end / RATE,
                )


def test_a_pause_on_the_energy_comes_sooner_than_webrtcvads_and_never_before_t0():
    """webrtcvad lags the end of speech; frames far below the turn's voiced level say it sooner. On the
    turns of recordings/ that end on a pause, the pause comes sooner than with webrtcvad's pauses alone,
    and after t0 (the attempt heard every word) but in one turn either way: call13's last word, "six",
    ends in a faint "s" that neither rule takes for speech and t0's refinement does."""
    after_t0, pauses = {}, {}
    for quiet in (False, True):
        after_t0[quiet], pauses[quiet] = [], 0
        for call in find_calls(["recordings"]):
            samples = load_audio(call.path, call.channel).samples
            detector, last = TurnDetector(RATE, VadConfig(quiet_pause=quiet)), None
            for _, event in events_of(samples, detector, len(samples) / RATE):
                if detector.resuming:
                    detector.resume()
                if isinstance(event, Pause):
                    last, pauses[quiet] = event, pauses[quiet] + 1
                elif isinstance(event, Resume):
                    last = None
                elif isinstance(event, Turn) and last is not None:
                    after_t0[quiet].append((last.at - event.end) / RATE * 1e3)
                    last = None
    vad, energy = (np.array(after_t0[q]) for q in (False, True))
    assert len(energy) == len(vad) >= 45
    assert (vad < 0).sum() <= 1 and (energy < 0).sum() <= 1
    assert pauses[True] <= 1.25 * pauses[False]  # 136 against 117: few more attempts made and dropped
    print(
        f"pause after t0, p50 / p90 ms: webrtcvad {np.median(vad):.0f} / {np.percentile(vad, 90):.0f}, "
        f"with the energy {np.median(energy):.0f} / {np.percentile(energy, 90):.0f}"
    )
    assert np.median(energy) <= np.median(vad) - 10
    assert np.percentile(energy, 90) <= np.percentile(vad, 90) - 20
