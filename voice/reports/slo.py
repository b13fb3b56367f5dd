"""Objectives a run must meet, for CI (docs/commands.md, "a gate for CI"; the anchor: k6's thresholds).

An objective is one line: a metric of the report, a percentile where the metric is a latency, a
comparison and a bound: `first_useful_audio_heard p95<800` (ms), `answered>=0.98` (a share; `98%` too).
A latency is any anchor of voice/timing/anchors.py by its name or its metric key, or a stage of the wait;
its percentile is the report's (nearest rank, a failed turn counts as never). A figure the run did not
measure (TTFAT seen from outside, WER without references) breaks its objective: a gate that cannot be
checked must not pass.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from xml.etree import ElementTree as ET

from voice.reports.summary import DURATIONS, LATENCY, metric_values, percentile, summarize
from voice.timing.anchors import METRICS

SHARES: dict[str, Callable[[dict], float | None]] = {  # name -> its value in a summary (0 to 1)
    "answered": lambda s: s["success_rate"],
    "talked_over": lambda s: s["talked_over"]["rate"],
    "wer": lambda s: s["quality"]["wer"],
    "tool_call_accuracy": lambda s: s["quality"]["tool_call_accuracy"],
    "fact_accuracy": lambda s: s["quality"]["fact_accuracy"],
}
LATENCIES = {
    **{key: key for key, _ in LATENCY},
    **{key: key for key, _, _ in DURATIONS},
    **{name: key for name, key in METRICS.items() if key in dict(LATENCY)},
    "ttfat": "ttfat_ms",
}
OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
}
FORM = re.compile(r"\s*([a-z_]+)(?:\s+(p\d+(?:\.\d+)?|max))?\s*(<=|>=|<|>)\s*(\d+(?:\.\d*)?)\s*(ms|s|%)?\s*")


class ObjectiveError(ValueError):
    """An objective that cannot be read; the message teaches the form."""


@dataclass(frozen=True)
class Objective:
    text: str  # as given
    metric: str  # a key of LATENCIES or SHARES
    percentile: float | None  # latencies only: 50, 95, 99.9; 100 for max
    op: str
    bound: float  # ms for a latency, 0 to 1 for a share

    @property
    def latency(self) -> bool:
        return self.percentile is not None


@dataclass
class Verdict:
    objective: Objective
    value: float | None  # None: not measured in this run
    met: bool
    level: int | None = None  # the calls at once it was judged at, in a load curve

    @property
    def name(self) -> str:
        return self.objective.text + ("" if self.level is None else f" ({self.level} at once)")

    def line(self) -> str:
        o = self.objective
        if self.value is None:
            seen = "not measured in this run"
        elif o.latency:
            seen = (
                "never (a failed turn counts as never)" if math.isinf(self.value) else f"{self.value:.1f} ms"
            )
        else:
            seen = f"{self.value:.4g}"
        return f"{'met' if self.met else 'BROKEN':<7} {self.name}: {seen}"


def parse(text: str) -> Objective:
    """`text` as an objective, or an ObjectiveError that says what is wrong and what is known."""
    m = FORM.fullmatch(text.lower())
    if m is None:
        raise ObjectiveError(
            f"{text!r}: an objective is METRIC [pNN|max] OP BOUND, e.g. "
            "'first_useful_audio_heard p95<800' (ms) or 'answered>=0.98'"
        )
    name, pick, op, number, unit = m.groups()
    bound = float(number)
    if name in LATENCIES:
        if pick is None:
            raise ObjectiveError(f"{text!r}: {name} is a latency: say which percentile (p50, p95, p99, max)")
        p = 100.0 if pick == "max" else float(pick[1:])
        if not 0 < p <= 100:
            raise ObjectiveError(f"{text!r}: a percentile is from p0 to p100, not {pick}")
        if unit == "%":
            raise ObjectiveError(f"{text!r}: a latency's bound is in ms (or s), not %")
        return Objective(text, LATENCIES[name], p, op, bound * 1000 if unit == "s" else bound)
    if name in SHARES:
        if pick is not None or unit in ("ms", "s"):
            raise ObjectiveError(
                f"{text!r}: {name} is a share of the turns (0.98 or 98%), with no percentile"
            )
        bound = bound / 100 if unit == "%" else bound
        if bound > 1:
            raise ObjectiveError(f"{text!r}: a share is 0 to 1 (or 0% to 100%)")
        return Objective(text, name, None, op, bound)
    known = ", ".join([*SHARES, *sorted(n for n in LATENCIES if not n.endswith("_ms"))])
    raise ObjectiveError(f"{text!r}: no metric {name!r}; known: {known} (and every metric key, *_ms)")


def judge(objectives: list[Objective], turns: list[dict], summary: dict) -> list[Verdict]:
    verdicts = []
    for o in objectives:
        if o.latency:
            unseen = o.metric in summary.get("unseen", ())
            values = [] if unseen else metric_values(turns, o.metric)
            value = percentile(values, o.percentile) if values else None
        else:
            value = SHARES[o.metric](summary)
        verdicts.append(Verdict(o, value, value is not None and OPS[o.op](value, o.bound)))
    return verdicts


def judge_run(objectives: list[Objective], turns: list[dict], summary: dict) -> list[Verdict]:
    """The run's verdicts; in a load curve, each objective at each level (its turns alone)."""
    levels = [row["concurrency"] for row in summary.get("load_curve") or []]
    if not levels:
        return judge(objectives, turns, summary)
    verdicts = []
    for n in levels:
        mine = [t for t in turns if t.get("concurrency") == n]
        verdicts += [replace(v, level=n) for v in judge(objectives, mine, summarize(mine))]
    return verdicts


def knee(verdicts: list[Verdict]) -> int | None:
    """The most calls at once at which every objective is met (None: not even the fewest)."""
    levels = sorted({v.level for v in verdicts if v.level is not None})
    return max((n for n in levels if all(v.met for v in verdicts if v.level == n)), default=None)


def write_junit(path: str | Path, verdicts: list[Verdict], turns: list[dict]) -> None:
    """JUnit XML as CI systems show it: a test case per objective, and one per call (failed when any of
    its turns failed, its turns' outcomes in its output)."""
    root = ET.Element("testsuites", name="ttfat")
    suite = ET.SubElement(root, "testsuite", name="objectives")
    for v in verdicts:
        case = ET.SubElement(suite, "testcase", classname="ttfat.objectives", name=v.name)
        if not v.met:
            ET.SubElement(case, "failure", message=v.line())
    suite = ET.SubElement(root, "testsuite", name="calls")
    for call in dict.fromkeys(t["call"] for t in turns):
        mine = [t for t in turns if t["call"] == call]
        case = ET.SubElement(suite, "testcase", classname="ttfat.calls", name=call)
        failed = [t for t in mine if t["status"] != "ok"]
        if failed:
            why = "; ".join(f"turn {t['turn']}: {t['status']}: {t.get('error') or ''}" for t in failed)
            ET.SubElement(case, "failure", message=f"{len(failed)} of {len(mine)} turns failed: {why}")
        ET.SubElement(case, "system-out").text = "\n".join(_outcome(t) for t in mine)
    for suite in root:
        suite.set("tests", str(len(suite)))
        suite.set("failures", str(sum(case.find("failure") is not None for case in suite)))
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)


def _outcome(turn: dict) -> str:
    heard = turn.get("first_useful_audio_ms")
    heard = "never" if heard is None else f"{heard:.0f} ms"
    return f"turn {turn['turn']}: {turn['status']}, first useful audio heard {heard}"
