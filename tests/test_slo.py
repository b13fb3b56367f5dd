"""Objectives as a CI gate (`--slo`, `--junit`): read, judged as the report counts, exit code 3."""

from __future__ import annotations

import re
from xml.etree import ElementTree as ET

import pytest

from tests.test_report import turn
from ttfat.cli import main
from voice.record.runlog import RunLog
from voice.reports.slo import ObjectiveError, judge, judge_run, knee, parse
from voice.reports.summary import summarize


def test_objectives_are_read_with_their_units():
    o = parse("first_useful_audio_heard p95<800")
    assert (o.metric, o.percentile, o.op, o.bound) == ("first_useful_audio_ms", 95.0, "<", 800.0)
    assert parse("ttfat_ms max <= 1.5 s").bound == 1500.0 and parse("ttfat_ms max<=1s").percentile == 100
    assert parse("ttfat p99.9<2000").percentile == 99.9  # TTFAT by its own name
    assert parse("answered>=0.98").bound == parse("answered >= 98%").bound == 0.98
    for wrong, said in [
        ("first_useful_audio_heard<800", "say which percentile"),
        ("answered p95>=0.9", "no percentile"),
        ("answered>=98", "a share is 0 to 1"),
        ("first_useful p95<800", "no metric 'first_useful'; known: answered"),
        ("ttfat_ms p95=800", "METRIC [pNN|max] OP BOUND"),
        ("ttfat_ms p95<80%", "in ms"),
    ]:
        with pytest.raises(ObjectiveError, match=re.escape(said)):
            parse(wrong)


def test_objectives_are_judged_as_the_report_counts_a_failed_turn_is_never():
    turns = [turn(i, 100.0 + i) for i in range(9)] + [turn(9, None, "timeout")]
    summary = summarize(turns)
    verdicts = judge(
        [parse(t) for t in ("ttfat p50<=104", "ttfat p95<1000", "ttfat p90<1000", "answered>=0.9")],
        turns,
        summary,
    )
    assert [v.met for v in verdicts] == [True, False, True, True]  # p95 is the failed turn: never
    assert [v.value for v in verdicts] == [104.0, float("inf"), 108.0, 0.9]
    assert verdicts[1].line() == "BROKEN  ttfat p95<1000: never (a failed turn counts as never)"
    # seen from outside there is no TTFAT, and no WER without references: not measured is not met
    outside = [{**t, "measured_from": "outside"} for t in turns]
    (ttfat, wer) = judge([parse("ttfat p50<1000"), parse("wer<=0.1")], outside, summarize(outside))
    assert (ttfat.value, ttfat.met, wer.value, wer.met) == (None, False, None, False)
    assert ttfat.line().endswith("not measured in this run")


def test_a_broken_objective_exits_3_and_junit_shows_each_objective_and_call(tmp_path, capsys):
    log = RunLog(tmp_path / "run")
    calm = [{**turn(i, 100.0 + i), "call": "calm"} for i in range(3)]
    log.write_records([*calm, {**turn(0, None, "error"), "call": "rough"}])
    log.close(summarize(log.records))
    run, junit = str(tmp_path / "run"), tmp_path / "junit.xml"
    assert main(["report", run, "--slo", "ttfat p50<200", "--junit", str(junit)]) == 0
    assert (
        main(["report", run, "--slo", "ttfat p50<200", "--slo", "answered>=0.9", "--junit", str(junit)]) == 3
    )
    out = capsys.readouterr().out
    assert "objectives (--slo): 1 of 2 met" in out and "BROKEN  answered>=0.9: 0.75" in out
    suites = {s.get("name"): s for s in ET.parse(junit).getroot()}
    assert (suites["objectives"].get("tests"), suites["objectives"].get("failures")) == ("2", "1")
    calls = {c.get("name"): c for c in suites["calls"]}
    assert calls["calm"].find("failure") is None and "turn 2: ok" in calls["calm"].find("system-out").text
    assert "1 of 1 turns failed: turn 0: error: boom" in calls["rough"].find("failure").get("message")
    with pytest.raises(SystemExit) as mistake:
        main(["report", run, "--slo", "ttfat p95"])
    assert mistake.value.code == 2  # a mistake on the command line, not a broken objective


def test_a_load_curve_is_judged_level_by_level_and_its_knee_is_the_most_calls_that_hold():
    turns = [
        {**turn(i, ttfat), "call": f"c{i}@{n}", "concurrency": n}
        for n, ttfat in ((1, 50.0), (2, 100.0), (4, 400.0))
        for i in range(4)
    ]
    summary = summarize(turns)
    assert [
        (r["concurrency"], r["first_useful_audio_ms"]["p95"], r["answered"]) for r in summary["load_curve"]
    ] == [
        (1, 350.0, 1.0),
        (2, 400.0, 1.0),
        (4, 700.0, 1.0),
    ]
    verdicts = judge_run([parse("first_useful_audio_heard p95<500"), parse("answered>=1")], turns, summary)
    assert [(v.level, v.met) for v in verdicts] == [
        (1, True),
        (1, True),
        (2, True),
        (2, True),
        (4, False),
        (4, True),
    ]
    assert knee(verdicts) == 2 and verdicts[4].line().startswith(
        "BROKEN  first_useful_audio_heard p95<500 (4 at once)"
    )
    assert summarize(turns[:4])["load_curve"] == []  # one level: no curve
