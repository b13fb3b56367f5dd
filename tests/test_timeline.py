"""The timing contract: metrics from t0, first occurrence wins, order violations reported."""

from __future__ import annotations

import pytest

from voice.timing.timeline import CallClock, Timeline, TurnLog, TurnRecord, waiting_on

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


def llm_call_event(
    tl: Timeline,
    round_: int,
    request_ms: int,
    first_content_ms: float,
    done_ms: float,
    tools: list[str],
    server: dict | None,
) -> None:
    """What the pipeline emits when an LLM call ends (voice/pipeline/answer.py), from the agent's record."""
    from llm.agent import LLMCall

    at = lambda ms: int(ms * MS)  # noqa: E731
    call = LLMCall(
        round_,
        at(request_ms),
        at(request_ms + 5),
        at(request_ms + first_content_ms),
        at(request_ms + done_ms),
        tools,
        server,
    )
    tl.emit(0, "llm_call", t_ns=call.done_ns, request_ns=call.request_ns, **call.to_dict())


def test_the_llms_share_of_the_wait():
    tl = Timeline("c", lambda: 0)
    for name, ms in [("t0", 0), ("endpoint", 300), ("asr_final", 600), ("llm_request", 601)]:
        tl.emit(0, name, t_ns=ms * MS)
    server = {"queue_ms": 0.1, "prefill_ms": 3.0, "first_content_ms": 9.0, "done_ms": 30.0, "forwards": 4}
    llm_call_event(tl, 0, 601, 10, 40, ["lookup_order"], server)  # the filler and a tool call
    llm_call_event(tl, 1, 650, 20, 35, [], {**server, "first_content_ms": 18.5})  # the answer
    for name, ms in [
        ("first_token", 606),
        ("first_answer_token", 670),
        ("first_useful_token", 670),
        ("first_useful_audio_heard", 800),
    ]:
        tl.emit(0, name, t_ns=ms * MS)
    out = tl.turns[0].to_dict()
    assert out["llm_ttfat_ms"] == 20  # the answering request -> its first answer token
    assert out["llm_wait_ms"] == 40 + (670 - 650)  # the tool-calling request, then to the useful words
    assert out["llm_share"] == round(60 / 800, 4) and out["server_timings"] is True
    assert [c["http_overhead_ms"] for c in out["llm_calls"]] == [1.0, 1.5]  # client minus server
    assert out["llm_calls"][1]["request_ms"] == 650 and out["llm_stage_ms"] == 70
    assert out["order_violations"] == []


def test_an_endpoint_that_reports_no_timings_is_said_so():
    from voice.reports.summary import llm_share_line, summarize

    tl = Timeline("c", lambda: 0)
    for name, ms in [("t0", 0), ("llm_request", 500)]:
        tl.emit(0, name, t_ns=ms * MS)
    llm_call_event(tl, 0, 500, 15, 30, [], None)
    for name, ms in [
        ("first_answer_token", 515),
        ("first_useful_token", 515),
        ("first_useful_audio_heard", 700),
    ]:
        tl.emit(0, name, t_ns=ms * MS)
    out = tl.turns[0].to_dict()
    assert out["server_timings"] is False and out["llm_calls"][0]["server"] is None
    assert out["llm_calls"][0]["http_overhead_ms"] is None  # nothing to subtract: no number is made up
    assert out["llm_wait_ms"] == 15 and out["llm_share"] == round(15 / 700, 4)
    assert "reported no timings" in llm_share_line(summarize([out]))


def test_tools_and_clauses_are_placed_on_the_turn_from_their_events():
    tl = Timeline("c", clock=lambda: 0)
    tl.emit(0, "t0", t_ns=1_000_000_000)
    tl.emit(0, "tool_start", t_ns=1_200_000_000, tool="lookup_order", arguments="{}")
    tl.emit(0, "tool_end", t_ns=1_203_000_000, tool="lookup_order", arguments="{}", result={})
    tl.emit(
        0,
        "clause",
        t_ns=1_400_000_000,
        text="Your order ships.",
        filler=False,
        synth_ns=1_300_000_000,
        heard_ns=1_500_000_000,
        end_ns=2_500_000_000,
    )
    record = tl.turns[0]
    record.tool_calls = [{"name": "lookup_order", "ms": 3.0}, {"name": "check_stock", "ms": 1.0}]
    out = record.to_dict()
    # the second call never started (no event): its start is unknown, not made up
    assert [c["start_ms"] for c in out["tool_calls"]] == [200.0, None]
    assert out["clauses"] == [
        {
            "text": "Your order ships.",
            "filler": False,
            "synth_ms": 300.0,
            "ready_ms": 400.0,
            "heard_ms": 500.0,
            "end_ms": 1500.0,
        }
    ]


def test_what_the_caller_waited_on_at_the_endpoint_is_the_first_work_still_to_end():
    ready = {
        "endpoint_ms": 300.0,
        "asr_ms": 120.0,
        "ttfat_ms": 180.0,
        "first_useful_token_ms": 180.0,
        "tts_first_audio_ms": 290.0,
        "first_useful_audio_ms": 310.0,
    }
    assert waiting_on(ready) == ("playback", 10.0)  # everything was ready: only the speaker to start
    slow_tts = {**ready, "tts_first_audio_ms": 420.0, "first_useful_audio_ms": 430.0}
    assert waiting_on(slow_tts) == ("TTS", 120.0)
    second_pass = {
        **ready,
        "asr_ms": 900.0,
        "ttfat_ms": 950.0,
        "first_useful_token_ms": 950.0,
        "tts_first_audio_ms": 1100.0,
        "first_useful_audio_ms": 1110.0,
    }
    assert waiting_on(second_pass) == ("ASR", 600.0)
    confirming = {**second_pass, "asr_ms": 200.0, "words_final_ms": 1000.0}  # speech waited for the digits
    assert waiting_on(confirming) == ("ASR second pass", 700.0)
    assert waiting_on({**ready, "ttfat_ms": 350.0, "first_useful_token_ms": 350.0}) == ("LLM and tools", 50.0)
    assert waiting_on({**ready, "first_useful_audio_ms": None}) is None  # never heard: nothing to place


def test_the_first_fact_heard_is_where_the_clause_that_says_one_was_heard():
    """From the clauses heard and the reference's facts: whatever came first (a filler), a fact said
    across two clauses counts where it is complete, a regex fact too; no facts, no anchor."""

    def heard(facts: list | None, *clauses: str) -> float | None:
        tl = Timeline("c", clock=lambda: 0)
        tl.emit(0, "t0", t_ns=1_000_000_000)
        log = TurnLog(tl, 0)
        log.note(reference=None if facts is None else {"text": "", "facts": facts})
        tl.emit(0, "first_audio_heard", t_ns=1_400_000_000)
        heard = [(text, 1_000_000_000 + (i + 1) * 400_000_000) for i, text in enumerate(clauses)]
        for i in range(len(heard)):  # as each clause starts to be heard
            log.fact_heard(heard[: i + 1])
        assert sum(e.name == "first_fact_heard" for e in tl.events) <= 1  # once
        return tl.turns[0].to_dict()["first_fact_ms"]

    said = ("One moment.", "Your order shipped with", "DHL, on Monday.")
    assert heard(["Monday", "DHL"], *said) == 1200.0  # the first of them heard, not the first listed
    assert heard(["shipped with DHL"], *said) == 1200.0  # across two clauses: complete in the third
    assert heard(["shipped"], *said) == 800.0
    assert heard([{"regex": r"ship+ed"}], *said) == 800.0
    assert heard(["FedEx"], *said) is None  # never said
    assert heard([], *said) is None and heard(None, *said) is None  # nothing to hear
