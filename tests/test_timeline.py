"""The timing contract: metrics from t0, first occurrence wins, order violations reported."""

from __future__ import annotations

import pytest

from voice.timeline import CallClock, Timeline, TurnRecord

MS = 1_000_000


def test_metrics_are_measured_from_t0_on_one_clock():
    now = [5_000 * MS]
    tl = Timeline("call-1", lambda: now[0])
    seen = []
    tl.observers.append(seen.append)
    tl.emit(0, "t0", t_ns=4_800 * MS)  # recovered from frame counts, before the endpoint decision
    for name, at in [
        ("endpoint", 5_000),
        ("asr_final", 5_300),
        ("llm_request", 5_301),
        ("first_token", 5_340),
        ("first_answer_token", 5_400),
        ("first_token", 5_999),
        ("first_useful_token", 5_450),
        ("llm_done", 5_500),
        ("tts_first_audio", 5_480),
        ("first_audio_heard", 5_520),
        ("first_useful_audio_heard", 5_600),
        ("last_audio_heard", 8_000),
    ]:
        now[0] = at * MS
        tl.emit(0, name)
    record = tl.turns[0]
    ms = record.ms()
    assert ms["endpoint_ms"] == 200 and ms["ttfat_ms"] == 600 and ms["first_useful_audio_ms"] == 800
    assert ms["first_token_ms"] == 540  # the first occurrence counts
    assert ms["complete_ms"] == 3_200
    assert record.order_violations() == []
    assert len(seen) == 13 and seen[0].name == "t0"


def test_failed_turns_keep_their_anchors_and_status():
    record = TurnRecord(
        "c",
        2,
        status="timeout",
        error="LLM did not answer in 10 s",
        anchors={"t0": 0, "endpoint": 300 * MS, "asr_final": 500 * MS},
    )
    out = record.to_dict()
    assert out["status"] == "timeout" and out["asr_ms"] == 500 and out["ttfat_ms"] is None
    with pytest.raises(ValueError):
        TurnRecord("c", 0, status="lost").to_dict()


def test_order_violations_are_reported():
    record = TurnRecord(
        "c",
        0,
        anchors={
            "t0": 0,
            "endpoint": 100,
            "asr_final": 50,
            "first_answer_token": 200,
            "first_useful_token": 300,
            "first_useful_audio_heard": 250,
        },
    )
    assert record.order_violations() == [
        "asr_final before endpoint",
        "first_useful_audio_heard before first_useful_token",
    ]


def test_call_clock_skips_only_forward_and_converts_monotonic_times():
    clock = CallClock()
    before = clock()
    clock.skip(2_000 * MS)
    clock.skip(-5 * MS)  # never backwards
    assert clock() - before >= 2_000 * MS and clock.skipped_ns == 2_000 * MS
    assert clock.from_monotonic(7) == 7 + 2_000 * MS
