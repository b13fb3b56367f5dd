"""Percentiles with failures counted, quality scoring, the text/HTML reports and compare."""

from __future__ import annotations

import json
import math
import re

from ttfat.cli import main
from voice.record.runlog import RunLog, read_run
from voice.reports.summary import (
    INF,
    compare_report,
    expected_tools,
    facts_correct,
    percentile,
    quality,
    summarize,
    text_report,
    tool_correct,
    wer,
)
from voice.reports.talkover import talked_over


def turn(i: int, ttfat: float | None, status: str = "ok", **extra) -> dict:
    audio = None if ttfat is None else ttfat + 300
    return {
        "call": "c",
        "turn": i,
        "status": status,
        "error": None if status == "ok" else "boom",
        "transcript": "",
        "answer": "",
        "tool_calls": [],
        "endpoint_ms": 300.0,
        "asr_ms": 600.0,
        "ttfat_ms": ttfat,
        "first_useful_audio_ms": audio,
        **extra,
    }


def test_nearest_rank_percentiles():
    values = list(range(1, 101))
    assert [percentile(values, p) for p in (50, 95, 99, 100)] == [50, 95, 99, 100]
    assert percentile([5.0], 95) == 5.0
    assert percentile([1.0, INF], 50) == 1.0 and percentile([1.0, INF], 95) == INF


def test_failed_turns_count_as_never_answered():
    turns = [turn(i, 100.0 + i) for i in range(18)] + [turn(18, None, "timeout"), turn(19, None, "error")]
    s = summarize(turns)
    m = s["metrics"]["ttfat_ms"]
    assert m["n"] == 20 and m["p50"] == 109.0 and m["p95"] == INF and m["max"] == INF
    assert s["success_rate"] == 0.9 and s["statuses"] == {"ok": 18, "timeout": 1, "error": 1, "no_answer": 0}
    # dropping the failures would have reported a p95 of 117 ms
    assert summarize(turns[:18])["metrics"]["ttfat_ms"]["p95"] == 117.0
    # stage durations are measured where the stage ran: ASR = asr_final - endpoint
    assert s["metrics"]["asr_stage_ms"] == {"p50": 300.0, "p95": 300.0, "p99": 300.0, "max": 300.0, "n": 20}
    assert s["metrics"]["tool_ms"]["n"] == 0


def test_quality_against_the_manifest():
    ref = lambda text, tool, facts: {"text": text, "expected_tool": tool, "facts": facts}  # noqa: E731
    lookup = {"name": "lookup_order", "arguments": {"order_id": "4217"}}
    turns = [
        turn(
            0,
            1.0,
            transcript="Where is my order 4217?",
            answer="It shipped, arriving Friday, May first.",
            tool_calls=[{"name": "lookup_order", "arguments": '{"order_id": "4217"}', "ms": 0.2}],
            reference=ref("where is my order four two one seven", lookup, ["shipped", "Friday, May first"]),
        ),
        turn(1, 1.0, transcript="thanks by", answer="Goodbye!", reference=ref("thanks bye", None, [])),
        turn(
            2,
            1.0,
            transcript="order 4271",
            answer="It was delivered.",
            tool_calls=[{"name": "lookup_order", "arguments": '{"order_id": "4271"}', "ms": 0.2}],
            reference=ref("order four two one seven", lookup, ["shipped"]),
        ),
    ]
    q = quality(turns)
    assert q["turns_with_reference"] == 3 and q["tool_call_accuracy"] == round(2 / 3, 4)
    assert q["fact_accuracy"] == 0.5 and q["turns_with_facts"] == 2
    # 0 + 1 (by/bye) + 2 (seven one / one seven) word errors over 8 + 2 + 5 reference words
    assert q["wer"] == round(3 / 15, 4)
    assert wer([("a b c", "a x c d")]) == 2 / 3
    assert facts_correct({"answer": "It's already canceled."}, ["already cancelled"])  # spelt either way


def test_manifests_fit_any_agent_argument_subsets_several_calls_and_regex_facts():
    booked = {"name": "book_room", "arguments": '{"room": "Blue Room", "hour": 14, "note": "x"}'}
    want = {"name": "book_room", "arguments": {"room": "blue room", "hour": 14}}
    assert tool_correct({"tool_calls": [booked]}, [want])  # arguments not named are free
    assert not tool_correct({"tool_calls": [booked]}, [{**want, "arguments": {"hour": 15}}])
    assert not tool_correct({"tool_calls": [booked]}, [{**want, "name": "cancel_room"}])
    assert not tool_correct({"tool_calls": [booked, booked]}, [want])  # one call too many
    assert tool_correct(
        {"tool_calls": [booked, {"name": "confirm", "arguments": "{}"}]}, [want, {"name": "confirm"}]
    )
    assert not tool_correct({"tool_calls": [{"name": "book_room", "arguments": "{broken"}]}, [want])
    assert expected_tools({"expected_tools": [want]}) == [want]
    assert expected_tools({"expected_tool": want}) == [want] and expected_tools({"expected_tool": None}) == []
    answer = {"answer": "The Blue Room is free at 2 PM, on floor 3."}
    assert facts_correct(answer, ["blue room", {"regex": r"\b(2|two) ?pm\b"}, {"regex": r"floor \d"}])
    assert not facts_correct(answer, [{"regex": r"floor [4-9]"}])


def test_run_directory_report_html_and_compare(tmp_path, capsys):
    for name, scale in [("a", 1.0), ("b", 2.0)]:
        log = RunLog(tmp_path / name)
        log.write_records([turn(i, scale * (100 + i)) for i in range(5)] + [turn(5, None, "no_answer")])
        log.close(summarize(log.records, {"mode": "fast"}))
    turns, summary = read_run(tmp_path / "a")
    assert len(turns) == 6 and summary["environment"] == {"mode": "fast"}
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["metrics"]["ttfat_ms"]["p95"] == INF
    assert main(["report", str(tmp_path / "a"), "--html", str(tmp_path / "r.html")]) == 0
    out = capsys.readouterr().out
    assert "*TTFAT" in out and "success 83.3%" in out and "inf" in out
    page = (tmp_path / "r.html").read_text()
    data = json.loads(page.split('<script id="data" type="application/json">')[1].split("</script>")[0])
    assert len(data["turns"]) == 6 and data["summary"]["metrics"]["ttfat_ms"]["p95"] == "Infinity"
    assert not re.search(r"(src|href)\s*=|<link|@import|fetch\(", page)  # works offline: nothing fetched
    assert main(["report", str(tmp_path / "a"), "--json"]) == 0
    assert math.isinf(json.loads(capsys.readouterr().out)["metrics"]["ttfat_ms"]["max"])
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("TTFAT"))
    assert line.split()[1:4] == ["102", "204", "2.00"]
    assert main(["report", str(tmp_path / "nothing")]) == 2


def test_only_the_projects_own_errors_print_as_one_line(tmp_path, monkeypatch, capsys):
    import pytest

    from ttfat.commands import report as report_command

    assert main(["report", str(tmp_path / "nothing")]) == 2  # a user's mistake: one line that says why
    assert (
        capsys.readouterr().err.strip()
        == f"ttfat: {tmp_path / 'nothing'} is not a run directory (no turns.jsonl)"
    )

    def bug(args):  # injected: no real input makes `report` fail this way
        raise ValueError("a bug in ttfat")

    monkeypatch.setattr(report_command, "run", bug)
    with pytest.raises(ValueError, match="a bug in ttfat"):  # a bug keeps its traceback
        main(["report", str(tmp_path)])


def test_first_fact_heard_is_over_the_turns_with_facts_and_a_fact_never_heard_counts():
    """A turn whose reference names no facts is not in it; one that names facts the caller never heard
    counts as never, answered or not. A row no turn has is left out of the report and of compare."""
    ref = lambda facts: {"text": "", "expected_tool": None, "facts": facts}  # noqa: E731
    turns = [
        turn(0, 100.0, first_fact_ms=500.0, reference=ref(["shipped"])),
        turn(1, 100.0, first_fact_ms=700.0, reference=ref(["DHL"])),
        turn(2, 100.0, reference=ref(["Friday"])),  # answered, the fact never said
        turn(3, 100.0, reference=ref([])),  # a greeting: nothing to hear
        turn(4, 100.0),
    ]
    s = summarize(turns)
    assert s["metrics"]["first_fact_ms"] == {"p50": 700.0, "p95": INF, "p99": INF, "max": INF, "n": 3}
    assert "first fact heard" in text_report(s)
    without = summarize([turn(0, 100.0)])
    assert without["metrics"]["first_fact_ms"]["n"] == 0 and "first fact heard" not in text_report(without)
    assert "first fact heard" in compare_report(s, without, "a", "b")
    assert "first fact heard" not in compare_report(without, without, "a", "b")


def test_a_caller_turn_is_talked_over_when_the_agent_starts_before_it_ends():
    """Against the references: an onset of the agent's audio inside the caller's own span talks over it
    (here the agent answered the first half of a turn it cut in two), audio still playing as the caller
    begins does not (a barge-in), a turn found in two parts is split. Without references, the stand-in:
    the caller back within a second of the agent's first sound."""
    ref = lambda start, end: {"text": "", "facts": [], "speech_start_s": start, "speech_end_s": end}  # noqa: E731
    bye = ref(20.0, 23.0)
    records = [
        turn(0, 1.0, speech_start_s=1.0, speech_end_s=3.0, reference=ref(1.0, 3.0), first_audio_ms=400.0,
             clauses=[{"heard_ms": 400.0}, {"heard_ms": 2900.0}]),  # still heard as the next turn begins
        turn(1, 1.0, speech_start_s=6.0, speech_end_s=8.0, reference=ref(6.0, 8.0), first_audio_ms=300.0,
             clauses=[{"heard_ms": 300.0}]),
        turn(2, 1.0, speech_start_s=20.0, speech_end_s=21.0, reference=bye, first_audio_ms=500.0,
             clauses=[{"heard_ms": 500.0}]),  # "okay thanks" answered at 21.5 s, before "bye" ended
        turn(3, 1.0, speech_start_s=22.0, speech_end_s=23.0, reference=None, first_audio_ms=300.0),
    ]  # fmt: skip
    assert talked_over(records) == {
        "turns": 1, "of": 3, "rate": 0.3333, "split": 1, "how": "against the references",
    }  # fmt: skip
    bare = [{**r, "reference": None} for r in records]
    over = talked_over(bare)  # turn 2's answer heard at 21.5 s, the caller back at 22.0 s
    assert (over["turns"], over["of"], over["split"]) == (1, 4, 0) and over["how"].startswith("estimated")
    assert "talked over: 1 of 3 caller turns (33.3%), 1 split" in text_report(summarize(records))
    assert "talked over" in compare_report(summarize(records), summarize(bare), "a", "b")
