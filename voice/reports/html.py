"""`ttfat report --html`: one self-contained page that works offline (no CDN): the figures
that matter in large numbers, CDFs of TTFAT and first useful audio heard (a failed turn never
arrives), the stages of the wait per turn, latency against transcript length, and a table of
every turn, sortable and filterable, each opening to its timeline (anchors, LLM calls, tools, clauses) and its
audio (the caller and the answer as heard, on the timeline's axis). The page is
drawn in the browser from the run's records, embedded as JSON; `#turn=CALL:TURN` opens one turn.
The page itself lives in `voice/reports/page/` (HTML, CSS, JavaScript), with uPlot (MIT), which draws the
charts, inlined from there too."""

from __future__ import annotations

import base64
import html
import json
import math
import re
from importlib import resources

from voice.record.turnaudio import for_page
from voice.reports.summary import compare_report, expected_tools, facts_correct, text_report, tool_correct
from voice.timing.anchors import ANCHORS, HEADLINE, METRICS, OUTSIDE_HEADLINE, STAGES


def _page(name: str) -> str:
    return resources.files("voice.reports").joinpath("page", name).read_text()


def _finite(value):
    """JSON has no Infinity (a percentile that falls on a failed turn): it travels as a string."""
    if isinstance(value, float) and math.isinf(value):
        return "Infinity"
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _json_for_script(value) -> str:
    """JSON that JSON.parse reads and that cannot end the <script> it sits in."""
    return json.dumps(_finite(value), default=str, allow_nan=False).replace("</", "<\\/")


def correct(turn: dict) -> bool | None:
    """Right tool calls and every fact, against the manifest (None: no reference)."""
    ref = turn.get("reference")
    if not ref:
        return None
    return tool_correct(turn, expected_tools(ref)) and facts_correct(turn, ref.get("facts") or [])


def _page_with(data: dict, title: str, environment: dict, text: str, outside: bool) -> str:
    """`outside`: a probe's run (or two), which leads with what a caller hears (anchors.OUTSIDE_HEADLINE)."""
    headline = OUTSIDE_HEADLINE if outside else HEADLINE
    data = {
        **data,
        "anchors": [{"name": a.name, "metric": a.metric, "label": a.label} for a in ANCHORS],
        "stages": [{"key": s.key, "label": s.label} for s in STAGES],
        "headline": list(headline),
        # the CDFs: the moments a caller waits on (an answer's end is as late as it is long)
        "cdf": [k for k in headline if k != METRICS["last_audio_heard"]],
    }
    values = {  # the files of page/ go in as they are: none holds a "</" that would end its element
        "title": html.escape(title),
        "css": _page("report.css"),
        "js": _page("report.js"),
        "uplot": _page("uPlot.iife.min.js"),
        "uplot_css": _page("uPlot.min.css"),
        "uplot_license": _page("uPlot.LICENSE"),
        "environment": html.escape(json.dumps(environment, indent=2, default=str)),
        "text": html.escape(text),
        "data": _json_for_script(data),
    }
    # one pass, so nothing inserted is read as a placeholder
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], _page("report.html"))


def _without_environment(summary: dict) -> dict:
    return {k: v for k, v in summary.items() if k != "environment"}


def _with_audio(turn: dict, clip: dict | None) -> dict:
    """A record with its clip (voice/record/turnaudio.py) as a data URL the page plays, and its outline."""
    if not clip:
        return turn
    src = "data:audio/ogg;base64," + base64.b64encode(for_page(clip["data"])).decode()
    return {**turn, "audio": {"src": src, **{k: clip[k] for k in ("start_ms", "seconds", "outline")}}}


def html_report(turns: list[dict], summary: dict, title: str = "", audio: dict | None = None) -> str:
    """The page of one run; `audio`: the turns' clips by (call, turn), from voice.record.runlog.read_audio."""
    audio = audio or {}
    turns = [_with_audio(t, audio.get((t.get("call"), t.get("turn")))) for t in turns]
    data = {"turns": turns, "summary": _without_environment(summary)}
    title = title or f"{summary.get('turns', len(turns))} turns"
    outside = summary.get("measured_from") == "outside"
    return _page_with(data, title, summary.get("environment", {}), text_report(summary), outside)


def compare_page(runs: list[tuple[str, list[dict], dict]]) -> str:
    """The page of two runs (name, records, summary): ratios, both CDFs, the turns that changed most."""
    (name_a, _, a), (name_b, _, b) = runs
    data = {"compare": [{"name": name, "summary": _without_environment(summary),
                         "turns": [{**t, "correct": correct(t)} for t in turns]}
                        for name, turns, summary in runs]}  # fmt: skip
    environment = {name: summary.get("environment", {}) for name, _, summary in runs}
    outside = all(s.get("measured_from") == "outside" for s in (a, b))
    text = compare_report(a, b, name_a, name_b)
    return _page_with(data, f"{name_a} against {name_b}", environment, text, outside)
