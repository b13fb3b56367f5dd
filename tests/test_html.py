"""The HTML report in a real headless browser (Debian's chromium, installed by `make test`): the page of a
real replay loads with no error, the figures in its head are summary.json's, the table has one row per
record, the charts (uPlot) have round ticks, show the values under the pointer and zoom, and
`#turn=CALL:TURN` opens that turn's timeline with its anchors. A screenshot is kept as an artifact
(tests/artifacts/report.png) to look at."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import math
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from tests.test_pipeline import models, server, stages  # noqa: F401 (fixtures)
from ttfat.cli import main
from ttfat.commands.report import write_html
from voice.pipeline.settings import Settings
from voice.record.runlog import read_audio, read_run
from voice.runs.replay import find_calls, run
from voice.timing.anchors import STAGES

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    """Headless chromium as a probe of this closed machine: no background networking, a fresh profile."""
    assert CHROMIUM, "chromium is not installed (make test installs Debian's chromium)"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
           "--virtual-time-budget=5000", *args, url]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


class Dom(HTMLParser):
    """The elements of a dumped DOM that the checks need: by id, by class (their own or a parent's), and
    table rows."""

    def __init__(self, text: str):
        super().__init__()
        self.stack: list[dict] = []
        self.by_id: dict[str, dict] = {}
        self.elements: list[dict] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        node = {"tag": tag, **dict(attrs), "text": "", "parents": [n.get("id") for n in self.stack]}
        node["within"] = {
            c for n in self.stack for c in (n.get("class") or "").split()
        }  # its parents' classes
        self.elements.append(node)
        if "id" in node:
            self.by_id[node["id"]] = node
        if tag not in ("meta", "br", "img", "input", "link"):
            self.stack.append(node)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for node in self.stack:
            node["text"] += data

    def with_class(self, name: str, under: str | None = None) -> list[dict]:
        return [e for e in self.elements if name in (e.get("class") or "").split()
                and (under is None or under in e["parents"])]  # fmt: skip


def js_round(v: float) -> str:
    return str(math.floor(v + 0.5))


# Run in the page after its own script: for each chart (report.js keeps them in `charts`), its ticks, its
# series and data, the legend with the pointer over each x of the data, and the x scale after a drag across
# the middle half and after a double-click. The answer is left in <pre id="probe"> for --dump-dom.
PROBE = """<script>
addEventListener("load", async () => {
  const tick = () => new Promise((done) => setTimeout(done));
  const out = {};
  for (const [id, u] of Object.entries(charts)) {
    const box = u.over.getBoundingClientRect();
    const mouse = (type, left, top, target = u.over) => target.dispatchEvent(new MouseEvent(type,
      { clientX: box.left + left, clientY: box.top + top, movementX: 1, button: 0, bubbles: true }));
    const legend = () => [...u.root.querySelectorAll(".u-legend .u-value")].map((e) => e.textContent);
    const hovers = [];
    for (let i = 0; i < u.data[0].length; i++) {
      const y = u.data.slice(1).map((s) => s[i]).find((v) => v !== null);
      mouse("mousemove", u.valToPos(u.data[0][i], "x"), u.valToPos(y, "y"));
      await tick();
      hovers.push({ idx: u.cursor.idx, legend: legend() });
    }
    const full = [u.scales.x.min, u.scales.x.max];
    mouse("mousedown", box.width / 4, box.height / 2);
    mouse("mousemove", (3 * box.width) / 4, box.height / 2);
    mouse("mouseup", (3 * box.width) / 4, box.height / 2, document);
    await tick();
    const zoomed = [u.scales.x.min, u.scales.x.max];
    mouse("dblclick", box.width / 2, box.height / 2);
    await tick();
    const axes = u.axes.map((a) => ({ splits: a._splits, values: a._values }));
    const labels = u.series.map((s) => s.label);
    out[id] = { full, zoomed, reset: [u.scales.x.min, u.scales.x.max], hovers, data: u.data, labels, axes };
  }
  const pre = Object.assign(document.createElement("pre"), { id: "probe", textContent: JSON.stringify(out) });
  document.body.append(pre);
});
</script>"""


def probe(tmp: Path, page: Path) -> dict:
    """PROBE's answer on a copy of the page."""
    probed = tmp / f"probed-{page.name}"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    result = chromium(tmp, probed.as_uri(), "--dump-dom")
    assert ":CONSOLE" not in result.stderr, result.stderr[-2000:]
    return json.loads(Dom(result.stdout).by_id["probe"]["text"])


def decimals(text: str) -> int:
    return len(text.partition(".")[2])


def assert_round(ticks: list[float], labels: list[str]):
    """Evenly spaced ticks, a step of 1, 2, 2.5 or 5 x 10^k apart, on multiples of it, each label its value
    with no more decimals than the step has."""
    assert len(ticks) >= 2 and len(labels) == len(ticks), (ticks, labels)
    step = ticks[1] - ticks[0]
    assert all(math.isclose(b - a, step) for a, b in zip(ticks, ticks[1:], strict=False)), ticks
    power = 10 ** math.floor(math.log10(step))
    assert any(math.isclose(step / power, m) for m in (1, 2, 2.5, 5)), ticks
    assert all(math.isclose(v / step, round(v / step), abs_tol=1e-9) for v in ticks), ticks
    for v, label in zip(ticks, labels, strict=True):
        assert math.isclose(float(label.replace(",", "")), v, abs_tol=1e-9), (v, label)
        assert decimals(label) <= decimals(f"{step:g}"), (step, label)


def assert_charts_round_and_zoom(charts: dict):
    for name, chart in charts.items():
        for axis in chart["axes"]:
            assert_round(axis["splits"], axis["values"])
        (lo, hi), (zlo, zhi) = chart["full"], chart["zoomed"]
        assert lo < zlo < zhi < hi and zhi - zlo < (hi - lo) * 0.6, (name, chart["full"], chart["zoomed"])
        assert chart["reset"] == chart["full"], name


def assert_cdfs(cdf: dict, runs: list[list[dict]]):
    """Under the pointer, at each x: of each run's turns, the % arrived by then (TTFAT, then first useful
    audio heard); a failed turn never arrives."""
    metrics = ("ttfat_ms", "first_useful_audio_ms")
    for hover in cdf["hovers"]:
        x = cdf["data"][0][hover["idx"]]
        arrived = [
            sum(t["status"] == "ok" and t[key] <= x for t in turns) / len(turns)
            for turns in runs
            for key in metrics
        ]
        assert hover["legend"] == [f"{js_round(x)} ms", *(f"{js_round(100 * v)} %" for v in arrived)]
    ok = [sum(t["status"] == "ok" for t in turns) / len(turns) for turns in runs for _ in metrics]
    assert [curve[-1] for curve in cdf["data"][1:]] == [100 * v for v in ok]


@pytest.fixture(scope="module")
def page(tmp_path_factory, models, server):  # noqa: F811
    """The report of a real replay: a call of recordings/ and a file that cannot be read (a failed turn)."""
    tmp = tmp_path_factory.mktemp("html")
    (tmp / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEjunk")
    calls = find_calls([str(ROOT / "recordings" / "call03.wav"), str(tmp / "broken.wav")])
    asyncio.run(run(calls, stages(models, server), Settings("fast"), tmp / "run", 1, {"mode": "fast"}))
    serial = Settings("fast").serial()  # the B of the compare page
    asyncio.run(
        run(calls, stages(models, server), serial, tmp / "serial", 1, {"mode": "fast", "serial": True})
    )
    records, summary = read_run(tmp / "run")
    write_html(tmp / "run", str(tmp / "report.html"), summary)
    return tmp, records, summary


def test_the_page_loads_with_no_error_and_its_head_is_the_summary(page):
    tmp, records, summary = page
    result = chromium(tmp, (tmp / "report.html").as_uri(), "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Uncaught" not in result.stderr and ":CONSOLE" not in result.stderr, result.stderr[-2000:]
    dom = Dom(result.stdout)
    assert "hidden" in dom.by_id["errors"], dom.by_id["errors"]["text"]  # the page's own error box
    for key in ("first_useful_audio_ms", "ttfat_ms"):
        card = [e for e in dom.elements if f"head-{key}" in e["parents"]]
        p50 = next(e for e in card if e.get("class") == "p50")["text"]
        p95 = next(e for e in card if e.get("class") == "p95")["text"]
        m = summary["metrics"][key]
        assert p50 == js_round(m["p50"])
        assert p95 == ("∞" if m["p95"] == math.inf else js_round(m["p95"]))  # the failed turn is never
    share = next(e for e in dom.elements if "head-llm_share" in e["parents"] and e.get("class") == "p50")
    assert share["text"] == f"{100 * summary['llm_share']['p50']:.1f}"
    success = next(e for e in dom.elements if "head-success_rate" in e["parents"] and e.get("class") == "p50")
    assert success["text"] == f"{100 * summary['success_rate']:.1f}"
    rows = dom.with_class("turn", under="turns")
    assert len(rows) == len(records) == 4  # three turns and the file that could not be read
    assert "failed" in rows[0]["class"] and "error" in rows[0]["text"]  # failures first
    assert {r["data-turn"] for r in rows} == {f"{t['call']}:{t['turn']}" for t in records}
    for plot in ("cdf", "stages", "scatter"):
        assert dom.with_class("uplot", under=plot)  # drawn by uPlot


def test_the_charts_have_round_ticks_show_the_values_under_the_pointer_and_zoom(page):
    tmp, records, _ = page
    charts = probe(tmp, tmp / "report.html")
    assert set(charts) == {"cdf", "stages", "scatter"}
    assert_charts_round_and_zoom(charts)
    ok = {f"{t['call']}:{t['turn']}": t for t in records if t["status"] == "ok"}
    assert charts["cdf"]["labels"][1:] == ["TTFAT (1 of 4 never)", "first useful audio heard (1 of 4 never)"]
    assert_cdfs(charts["cdf"], [records])
    # the stages: a bar per turn that was answered, sorted, its stages under the pointer
    stages = [s for s in STAGES if s.key != "playing_stage_ms"]
    shown = []
    for hover in charts["stages"]["hovers"]:
        turn, _, heard = hover["legend"][0].partition(", heard at ")
        shown.append(ok[turn]["first_useful_audio_ms"])
        assert heard == f"{js_round(ok[turn]['first_useful_audio_ms'])} ms"
        assert hover["legend"][1:] == [f"{js_round(ok[turn][s.key] or 0)} ms" for s in stages]
    assert len(shown) == len(ok) and shown == sorted(shown)
    # the scatter: each turn's words and wait, in the series of turns with or without a tool call
    shown = set()
    for hover in charts["scatter"]["hovers"]:
        turn, _, words = hover["legend"][0].partition(", ")
        t = ok[turn]
        shown.add(turn)
        assert words == f"{len(t['transcript'].split())} words"
        wait = f"{js_round(t['first_useful_audio_ms'])} ms"
        assert hover["legend"][1:] == (["–", wait] if t["tool_calls"] else [wait, "–"])
    assert shown == set(ok)


def test_a_turn_opens_to_its_timeline_and_a_screenshot_is_kept(page):
    tmp, records, _ = page
    first = next(t for t in records if t["status"] == "ok" and t["tool_calls"])
    url = f"{(tmp / 'report.html').as_uri()}#turn={first['call']}:{first['turn']}"
    dom = Dom(chromium(tmp, url, "--dump-dom").stdout)
    (detail,) = [e for e in dom.elements if "turn-detail" in (e.get("class") or "")]
    assert detail["data-turn"] == f"{first['call']}:{first['turn']}"
    anchors = {e["data-name"] for e in dom.elements if "anchor" in (e.get("class") or "").split()}
    assert {"t0", "endpoint", "first_answer_token", "first_useful_audio_heard"} <= anchors
    assert len([e for e in dom.elements if "llm-call" in (e.get("class") or "")]) == len(first["llm_calls"])
    tools = dom.with_class("tool")  # each tool call where it ran, its call in the tooltip
    assert [e["text"].split("(")[0] for e in tools] == [c["name"] for c in first["tool_calls"]]
    heard = dom.with_class("clause-heard")  # each clause spoken, its words in the tooltip
    assert len(heard) == len(dom.with_class("clause-synth")) == len(first["clauses"]) > 0
    assert all(c["text"] in e["text"] for c, e in zip(first["clauses"], heard, strict=True))
    (player,) = [e for e in dom.elements if e["tag"] == "audio"]  # the turn's audio, playable
    assert player["src"].startswith("data:audio/ogg;base64,") and "turn-audio" in player["class"]
    marks = {e["data-name"] for e in dom.elements if "mark" in (e.get("class") or "").split()}
    assert {"t0", "first_useful_audio_heard"} <= marks  # the anchors on the audio's axis
    assert len(dom.with_class("wave")) == 2  # caller and agent
    for axis in ("timeline", "audio-strip"):  # the hand-drawn axes: round ticks too
        labels = [e["text"].removesuffix(" ms") for e in dom.with_class("tick") if axis in e["within"]]
        assert_round([float(v) for v in labels], labels)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    result = chromium(tmp, url, f"--screenshot={shot}", "--window-size=1400,2200", "--hide-scrollbars")
    assert result.returncode == 0 and shot.stat().st_size > 20_000, result.stderr[-2000:]


def since(t_ns: float, t0: int) -> float:
    return round((t_ns - t0) / 1e6, 3)


def test_records_say_when_each_tool_ran_and_each_clause_was_synthesized_and_heard(page):
    """The record's tool calls and clauses are the events' times as ms from t0: the timeline draws them."""
    tmp, records, _ = page
    events = [json.loads(line) for line in (tmp / "run" / "events.jsonl").read_text().splitlines()]
    answered = [t for t in records if t["status"] == "ok"]
    assert any(t["tool_calls"] for t in answered)
    for t in answered:
        mine = [e for e in events if (e["call"], e["turn"]) == (t["call"], t["turn"])]
        # a turn the caller went on with after a pause starts again there (a new t0; the answer dropped
        # then is in no record): whether that happens is up to timing, what follows it is not
        resumed = [i for i, e in enumerate(mine) if e["event"] == "turn_resumed"]
        mine = mine[resumed[-1] + 1 :] if resumed else mine
        (t0,) = [e["t_ns"] for e in mine if e["event"] == "t0"]
        starts = [since(e["t_ns"], t0) for e in mine if e["event"] == "tool_start"]
        assert [c["start_ms"] for c in t["tool_calls"]] == starts
        for call, before, after in zip(t["tool_calls"], t["llm_calls"], t["llm_calls"][1:], strict=False):
            assert before["request_ms"] + before["done_ms"] <= call["start_ms"] + 0.01  # after its call
            assert call["start_ms"] + call["ms"] <= after["request_ms"] + 0.01  # before the next
        clauses = [e for e in mine if e["event"] == "clause"]
        assert [c["text"] for c in t["clauses"]] == [e["text"] for e in clauses]
        for c, e in zip(t["clauses"], clauses, strict=True):
            assert (c["synth_ms"], c["ready_ms"], c["heard_ms"], c["end_ms"]) == tuple(
                since(e[k], t0) for k in ("synth_ns", "t_ns", "heard_ns", "end_ns")
            )
            assert c["synth_ms"] <= c["ready_ms"] <= c["heard_ms"] < c["end_ms"]
        assert t["clauses"][0]["heard_ms"] == since(t0 + t["first_audio_ms"] * 1e6, t0)
        useful = next(
            c for c in t["clauses"] if c["heard_ms"] == since(t0 + t["first_useful_audio_ms"] * 1e6, t0)
        )
        assert not useful["filler"]


def test_each_turn_keeps_its_audio_as_heard_and_the_page_can_leave_it_out(page):
    """One clip per answered turn: the caller's speech before t0 on the left; on the right the agent,
    silent before the call's first answer is heard and after a barge-in cut one, speaking once its
    first audio is heard. --no-audio leaves the clips out of the page."""
    tmp, records, summary = page
    clips = read_audio(tmp / "run")
    answered = [t for t in records if t["first_audio_ms"] is not None]
    assert answered and {(t["call"], t["turn"]) for t in answered} <= set(clips)
    events = [json.loads(line) for line in (tmp / "run" / "events.jsonl").read_text().splitlines()]
    t0 = {(e["call"], e["turn"]): e["t_ns"] for e in events if e["event"] == "t0"}  # the last one counts
    for t in answered:
        key = (t["call"], t["turn"])
        clip = clips[key]
        samples, rate = sf.read(io.BytesIO(clip["data"]), dtype="float32")
        assert samples.shape[1] == 2 and abs(len(samples) / rate - clip["seconds"]) < 0.05

        def loud(channel, from_ms, to_ms, samples=samples, rate=rate, start=clip["start_ms"]):
            lo, hi = (int((v - start) * rate / 1000) for v in (from_ms, to_ms))
            return float(np.sqrt(np.mean(samples[max(0, lo) : hi, channel] ** 2)))

        speech_ms = (t["speech_start_s"] - t["speech_end_s"]) * 1000  # the turn's speech, before t0
        assert loud(0, speech_ms, 0) > 0.02  # the caller, speaking up to t0
        heard = t["first_audio_ms"]
        assert loud(1, heard + 30, heard + 300) > 0.02  # the answer, from when it is first heard
        if t["turn"] == 0:
            assert loud(1, clip["start_ms"], heard - 30) < 1e-3  # nothing played before it
        for e in events:
            if e["event"] == "barge_in" and (e["call"], e["turn"]) == key:
                stopped = (e["stopped_ns"] - t0[key]) / 1e6
                assert loud(1, stopped + 30, stopped + 300) < 1e-3  # a cut answer is not heard on
        # a point per whole 1/50 s of the clip's samples (its `seconds` is rounded to the ms)
        assert len(clip["outline"][0]) == len(clip["outline"][1]) == len(samples) // (rate // 50)
    assert main(["report", str(tmp / "run"), "--html", str(tmp / "quiet.html"), "--no-audio"]) == 0
    assert "data:audio/ogg" not in (tmp / "quiet.html").read_text()
    embedded = re.findall(r"data:audio/ogg;base64,([A-Za-z0-9+/=]+)", (tmp / "report.html").read_text())
    assert len(embedded) == len(clips)  # each clip once, as Opus
    for data in embedded:
        info = sf.info(io.BytesIO(base64.b64decode(data)))
        assert info.subtype == "OPUS" and info.channels == 2


def test_the_compare_page_shows_both_runs_and_the_turns_that_changed(page):
    tmp, records, summary = page
    assert main(["compare", str(tmp / "run"), str(tmp / "serial"), "--html", str(tmp / "compare.html")]) == 0
    b_records, b_summary = read_run(tmp / "serial")
    result = chromium(tmp, (tmp / "compare.html").as_uri(), "--dump-dom")
    assert ":CONSOLE" not in result.stderr, result.stderr[-2000:]
    dom = Dom(result.stdout)
    assert "hidden" in dom.by_id["errors"], dom.by_id["errors"]["text"]
    for key in ("first_useful_audio_ms", "ttfat_ms"):
        (cell,) = [
            e for e in dom.elements if f"ratio-{key}" in e["parents"] and "p50" in (e.get("class") or "")
        ]
        a, b = summary["metrics"][key]["p50"], b_summary["metrics"][key]["p50"]
        assert cell["text"] == f"{b / a:.2f}"
    (cdf,) = probe(tmp, tmp / "compare.html").values()  # both runs' CDFs on one chart
    assert_charts_round_and_zoom({"cdf": cdf})
    labels = [f"{run} {m} (1 of 4 never)" for run in "AB" for m in ("TTFAT", "first useful audio heard")]
    assert cdf["labels"][1:] == labels
    assert_cdfs(cdf, [records, b_records])
    changed = dom.with_class("changed", under="changed")
    assert len(changed) == len(records)  # the same calls, turn by turn
