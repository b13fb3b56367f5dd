"""Reports over turn records: percentiles with failures counted, where the wait went (stages, and the
LLM's share of it), quality beside latency, and the side-by-side comparison of two runs.

Failures are never dropped (docs/timing.md): a turn whose status is not ok and that never reached an
anchor counts as +inf for every latency measured from t0, so p95 shows the tail a caller really
lives through; the success rate is printed beside the percentiles. Durations (stages, tool calls,
the LLM's wait) are measured where they happened.
"""

from __future__ import annotations

import json
import math
import textwrap

from voice.reports.talkover import talked_over
from voice.timing.anchors import ANCHORS, HEADLINE, METRICS, OUTSIDE, STAGES
from voice.timing.facts import fact_stated, normalize
from voice.timing.timeline import STATUSES, stage_durations, tool_ms

INF = float("inf")
# Rows of the latency table: every reported anchor, measured from t0.
LATENCY = [(a.metric, a.label) for a in ANCHORS if a.reported]
# Rows of the stage table: the waterfall of the wait, then the LLM's own figures.
DURATIONS = [(s.key, s.label, f"{s.start or 't0'} -> {s.end}") for s in STAGES] + [
    ("tool_ms", "tool time", "tool calls, per turn with tools"),
    ("llm_wait_ms", "LLM wait", "on the LLM before the first useful token"),
    ("llm_ttfat_ms", "LLM TTFAT", "request -> first answer token"),
]
FROM_T0 = {metric for metric, _ in LATENCY} | {"endpoint_ms"}
FIRST_FACT = METRICS["first_fact_heard"]
LEGEND = (
    "TTFAT counts from t0, the end of the caller's speech. LLM TTFAT counts from the LLM request of the "
    "call that answered, as Pipecat's TTFAT does; LLM wait is how long the caller waited on the LLM "
    "(tool runs excluded), and its share is that wait over first useful audio heard."
)
OUTSIDE_LEGEND = (
    "Measured from outside (ttfat probe): the caller's audio sent and the agent's audio as a phone plays it. "
    "The endpoint, ASR, the LLM (TTFAT), tools and TTS happen inside the agent and are not seen: their rows "
    "are left out, as are the caller's words as the agent heard them (WER) and its tool calls."
)


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: always a value that was observed (inf included), never interpolated."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def value(turn: dict, key: str) -> float | None:
    """A turn's figure; stages and tool time are derived from the anchors and tool calls, so that runs
    recorded before a stage was named report it too."""
    stages = stage_durations(turn)
    if key in stages:
        return stages[key]
    return tool_ms(turn.get("tool_calls") or []) if key == "tool_ms" else turn.get(key)


def metric_values(turns: list[dict], key: str) -> list[float]:
    """Every turn's figure, a failed turn's missing one as never (inf). First fact heard is over the
    turns whose reference names facts, and one in which none was heard counts as never, answered or not."""
    if key == FIRST_FACT:
        turns = [t for t in turns if (t.get("reference") or {}).get("facts")]
    values = []
    for t in turns:
        v = value(t, key)
        if v is not None:
            values.append(v)
        elif key in FROM_T0 and (t["status"] != "ok" or key == FIRST_FACT):
            values.append(INF)  # never got there: it counts, as never
    return values


def stats(values: list[float], digits: int = 1) -> dict:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "max": None, "n": 0}
    pick = lambda p: round(percentile(values, p), digits)  # noqa: E731
    return {
        "p50": pick(50),
        "p95": pick(95),
        "p99": pick(99),
        "max": round(max(values), digits),
        "n": len(values),
    }


def measured_from(turns: list[dict]) -> str:
    """ "outside" for a probe's run (voice/runs/probe/): only what the audio shows was measured."""
    return "outside" if any(t.get("measured_from") == "outside" for t in turns) else "inside"


def summarize(turns: list[dict], environment: dict | None = None) -> dict:
    """Everything summary.json holds; `ttfat report` prints it. A probe's run has no figures for what
    cannot be seen from outside (`unseen`): absent, not zero, not inf."""
    statuses = {s: sum(t["status"] == s for t in turns) for s in STATUSES}
    keys = [k for k, _ in LATENCY] + [k for k, _, _ in DURATIONS]
    outside = measured_from(turns) == "outside"
    unseen = [k for k in dict.fromkeys(keys) if k not in OUTSIDE] if outside else []
    with_llm_calls = [t for t in turns if t.get("llm_calls")]
    return {
        "turns": len(turns),
        "calls": len({t["call"] for t in turns}),
        "success_rate": round(statuses["ok"] / len(turns), 4) if turns else None,
        "statuses": statuses,
        "measured_from": "outside" if outside else "inside",
        "unseen": unseen,
        "metrics": {k: stats([] if k in unseen else metric_values(turns, k)) for k in dict.fromkeys(keys)},
        "llm_share": stats([t["llm_share"] for t in turns if t.get("llm_share") is not None], 4),
        "answered_by_agent": sum(t.get("answered_by") == "agent" for t in turns),  # no LLM TTFAT
        "server_timings": {
            "turns": sum(bool(t.get("server_timings")) for t in with_llm_calls),
            "of": len(with_llm_calls),
        },
        "talked_over": talked_over(turns),
        "load_curve": load_curve(turns),
        "quality": quality(turns, outside),
        "order_violations": sum(bool(t.get("order_violations")) for t in turns),
        "errors": sorted({t["error"] for t in turns if t.get("error")})[:20],
        "environment": environment or {},
    }


# --- quality ----------------------------------------------------------------------------------------


def edit_distance(a: list[str], b: list[str]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def wer(pairs: list[tuple[str, str]]) -> float | None:
    """Corpus word error rate over (reference, hypothesis) pairs."""
    refs = [normalize(r) for r, _ in pairs]
    words = sum(len(r) for r in refs)
    if not words:
        return None
    return sum(edit_distance(r, normalize(h)) for r, (_, h) in zip(refs, pairs, strict=True)) / words


def _arguments(call: dict) -> dict | None:
    args = call.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    return args if isinstance(args, dict) else None


def _same_value(want: object, got: object) -> bool:
    if isinstance(want, str) and isinstance(got, str | int | float):
        return normalize(want) == normalize(str(got))
    return want == got


def tool_matches(made: dict, expected: dict) -> bool:
    """A tool call as the manifest expects it: the same name, and every argument the manifest names with
    the same value (strings compared as words: case and punctuation aside); other arguments are free."""
    args = _arguments(made)
    wanted = expected.get("arguments") or {}
    return (
        made.get("name") == expected.get("name")
        and args is not None
        and all(k in args and _same_value(v, args[k]) for k, v in wanted.items())
    )


def expected_tools(reference: dict) -> list[dict]:
    """The manifest's expected calls: ``expected_tools`` (a list), or ``expected_tool`` (one, or null)."""
    if "expected_tools" in reference:
        return list(reference["expected_tools"] or [])
    return [reference["expected_tool"]] if reference.get("expected_tool") else []


def tool_correct(turn: dict, expected: list[dict]) -> bool:
    made = turn.get("tool_calls") or []
    return len(made) == len(expected) and all(map(tool_matches, made, expected))


def facts_correct(turn: dict, facts: list[str | dict]) -> bool:
    answer = turn.get("answer") or ""
    return all(fact_stated(answer, f) for f in facts)


def quality(turns: list[dict], outside: bool = False) -> dict:
    """WER against reference transcripts, tool-call and fact accuracy against the manifest. From
    `outside` (a probe) the agent's transcript and tool calls are not seen: only the facts of the answer
    it was heard saying are checked."""
    ref = [t for t in turns if t.get("reference")]
    with_facts = [t for t in ref if t["reference"].get("facts")]
    t0_errors = [abs(t["t0_error_ms"]) for t in ref if t.get("t0_error_ms") is not None]
    rate = lambda ok, n: round(ok / n, 4) if n else None  # noqa: E731
    word_error = wer([(t["reference"]["text"], t.get("transcript") or "") for t in ref])
    tools_ok = sum(tool_correct(t, expected_tools(t["reference"])) for t in ref)
    facts_ok = sum(facts_correct(t, t["reference"]["facts"]) for t in with_facts)
    return {
        "turns_with_reference": len(ref),
        "wer": None if word_error is None or outside else round(word_error, 4),
        "tool_call_accuracy": None if outside else rate(tools_ok, len(ref)),
        "fact_accuracy": rate(facts_ok, len(with_facts)),
        "turns_with_facts": len(with_facts),
        "t0_error_ms": stats(t0_errors),
    }


# --- text output ------------------------------------------------------------------------------------


def fmt(v) -> str:
    if v is None:
        return "-"
    if v == INF:
        return "inf"
    return f"{v:.1f}" if abs(v) < 10 else f"{v:.0f}"  # tool calls take fractions of a millisecond


def pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _table(title: str, rows: list[tuple[str, str, str, dict]]) -> list[str]:
    lines = [f"{title:<28}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}{'n':>6}   measured"]
    for key, label, what, m in rows:
        star = "*" if key in HEADLINE else " "
        cells = "".join(f"{fmt(m[p]):>8}" for p in ("p50", "p95", "p99", "max"))
        lines.append(f"{star}{label:<27}{cells}{m['n']:>6}   {what}")
    return lines


def llm_share_line(summary: dict) -> str:
    share, timings = summary["llm_share"], summary["server_timings"]
    server = (
        f"server timings in {timings['turns']} of {timings['of']} turns"
        if timings["turns"]
        else "the endpoint reported no timings of its own"
    )
    by_agent = summary.get("answered_by_agent")  # older runs' summaries lack it
    plural = "s" if by_agent != 1 else ""
    agent = f"; {by_agent} turn{plural} answered by the agent itself, not the model" if by_agent else ""
    return (
        f"LLM share of first useful audio heard: p50 {pct(share['p50'])}, p95 {pct(share['p95'])} "
        f"(n {share['n']}; {server}{agent})"
    )


def metric(summary: dict, key: str) -> dict:
    """A summary's figures for `key` (none in a summary written before the metric was)."""
    return summary["metrics"].get(key) or stats([])


def load_curve(turns: list[dict]) -> list[dict]:
    """A probe's load curve (`--concurrency 1,2,4`): per level of calls at once, first useful audio heard
    (a failed turn counts as never), the share answered and the failures; none for one level."""
    levels = sorted({t["concurrency"] for t in turns if t.get("concurrency")})
    if len(levels) < 2:
        return []
    rows = []
    for n in levels:
        mine = [t for t in turns if t.get("concurrency") == n]
        ok = sum(t["status"] == "ok" for t in mine)
        heard = stats(metric_values(mine, "first_useful_audio_ms"))
        rows.append(
            {
                "concurrency": n,
                "calls": len({t["call"] for t in mine}),
                "turns": len(mine),
                "first_useful_audio_ms": {k: heard[k] for k in ("p50", "p95", "p99")},
                "answered": round(ok / len(mine), 4),
                "failures": len(mine) - ok,
            }
        )
    return rows


def load_curve_lines(summary: dict) -> list[str]:
    rows = summary.get("load_curve") or []  # older summaries lack it
    if not rows:
        return []
    lines = ["", "load curve: first useful audio heard (ms) by calls at once, failed turns as never"]
    heads = ("at once", "calls", "turns", "p50", "p95", "p99", "answered", "failures")
    lines.append("  " + "".join(f"{h:>9}" for h in heads))
    for r in rows:
        heard = [fmt(r["first_useful_audio_ms"][p]) for p in ("p50", "p95", "p99")]
        cells = (r["concurrency"], r["calls"], r["turns"], *heard, pct(r["answered"]), r["failures"])
        lines.append("  " + "".join(f"{c:>9}" for c in cells))
    return lines


LOOP_LAG = "event loop lag during the calls (ms)"  # voice/runs/probe/run.py


def loop_lag_lines(summary: dict) -> list[str]:
    """How late a probe's event loop ran while it made its calls: its stamps were as late."""
    lag = ((summary.get("environment") or {}).get("probe") or {}).get(LOOP_LAG)
    if not lag:
        return []
    levels = {"": lag} if "p50" in lag else {f" ({k})": v for k, v in lag.items()}
    return [
        f" the probe's event loop ran late{where} by p50 {v['p50']} / p99 {v['p99']} / max {v['max']} ms "
        "while it made the calls (its stamps of what it heard as late)"
        for where, v in levels.items()
    ]


def talked_over_lines(summary: dict) -> list[str]:
    """The caller's turns the agent talked over, beside the latency they bought (reports/talkover.py)."""
    over = summary.get("talked_over") or {}  # older summaries lack it
    if not over.get("of"):
        return []
    return [
        f" talked over: {over['turns']} of {over['of']} caller turns ({pct(over['rate'])}), "
        f"{over['split']} split into two or more ({over['how']})"
    ]


def text_report(summary: dict) -> str:
    unseen = set(summary.get("unseen", ()))  # older summaries lack it
    shown = lambda k: k not in unseen and metric(summary, k)["n"]  # noqa: E731  (no turn has it: no row)
    latency = [(k, label, "from t0", metric(summary, k)) for k, label in LATENCY if shown(k)]
    durations = [(k, label, what, metric(summary, k)) for k, label, what in DURATIONS if shown(k)]
    lines = [
        f"{summary['calls']} calls, {summary['turns']} turns, success {pct(summary['success_rate'])} "
        f"({', '.join(f'{k} {v}' for k, v in summary['statuses'].items() if v)})",
        "",
        *_table("metric (ms)", latency),
        *talked_over_lines(summary),
        *loop_lag_lines(summary),
        *load_curve_lines(summary),
        "",
        *_table("where the wait went (ms)", durations),
    ]
    if unseen:
        lines += textwrap.wrap(OUTSIDE_LEGEND, 110)
    else:
        lines += [llm_share_line(summary), *textwrap.wrap(LEGEND, 110)]
    q = summary["quality"]
    t0 = q["t0_error_ms"]
    seen = lambda v: "not seen" if unseen else pct(v)  # noqa: E731
    lines += [
        "",
        f"quality ({q['turns_with_reference']} turns with a reference): WER {seen(q['wer'])}, "
        f"tool calls {seen(q['tool_call_accuracy'])}, answer facts {pct(q['fact_accuracy'])} "
        f"(of {q['turns_with_facts']}), t0 error p50 {fmt(t0['p50'])} ms / max {fmt(t0['max'])} ms",
    ]
    if summary["order_violations"]:
        lines.append(
            f"ANCHOR ORDER VIOLATIONS in {summary['order_violations']} turns (a bug: see turns.jsonl)"
        )
    for error in summary["errors"]:
        lines.append(f"error: {error}")
    env = summary.get("environment") or {}
    if env:
        lines += ["", "environment:"]
        for key, v in env.items():
            flat = _flat(v) if isinstance(v, dict) else {"": v}
            text = "; ".join(f"{k} {x}".strip() for k, x in flat.items())
            lines += textwrap.wrap(f"{key}: {text}", 110, initial_indent="  ", subsequent_indent="    ")
    return "\n".join(lines)


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def compare_report(a: dict, b: dict, name_a: str, name_b: str) -> str:
    """Side by side, with B/A ratios (below 1: B is faster)."""
    lines = [
        f"A = {name_a}\nB = {name_b}",
        "",
        f"{'metric (ms)':<27}{'A p50':>8}{'B p50':>8}{'B/A':>7}{'A p95':>9}{'B p95':>8}{'B/A':>7}",
    ]
    rows = LATENCY + [(k, label) for k, label, _ in DURATIONS if k not in dict(LATENCY)]
    for key, label in rows:
        ma, mb = metric(a, key), metric(b, key)
        if not (ma["n"] or mb["n"]):
            continue  # neither run saw it (a probe's unseen rows, first fact heard without facts)
        cells = ""
        for p in ("p50", "p95"):
            va, vb = ma[p], mb[p]
            ratio = vb / va if va and vb is not None and va != INF and vb != INF else None
            cells += f"{fmt(va):>8}{fmt(vb):>8}{'-' if ratio is None else f'{ratio:.2f}':>7} "
        lines.append(f"{label:<27}{cells}")
    sa, sb = a["llm_share"], b["llm_share"]
    if sa["n"] or sb["n"]:
        lines.append(
            f"{'LLM share of the wait':<27}{pct(sa['p50']):>8}{pct(sb['p50']):>8}{'':>7} "
            f"{pct(sa['p95']):>8}{pct(sb['p95']):>8}"
        )
    qa, qb = a["quality"], b["quality"]
    lines.append("")
    for key, label in [
        ("wer", "WER"),
        ("tool_call_accuracy", "tool calls"),
        ("fact_accuracy", "answer facts"),
    ]:
        if qa[key] is not None or qb[key] is not None:
            lines.append(f"{label:<27}{pct(qa[key]):>8}{pct(qb[key]):>8}")
    lines.append(f"{'success rate':<27}{pct(a['success_rate']):>8}{pct(b['success_rate']):>8}")
    over = [s.get("talked_over") or {} for s in (a, b)]  # older summaries lack it
    if any(o.get("of") for o in over):
        lines.append(f"{'talked over':<27}" + "".join(f"{pct(o.get('rate')):>8}" for o in over))
    outside = [name for name, s in (("A", a), ("B", b)) if s.get("measured_from") == "outside"]
    if outside:
        side = " and ".join(outside)
        said = "what only an agent sees is left out"
        if len(outside) == 1:
            said = "its '-' rows cannot be seen there"
        lines.append(f"{side} measured from outside (ttfat probe): {said}")
    return "\n".join(lines)
