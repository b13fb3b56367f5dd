"""Reports over turn records: percentiles with failures counted, quality beside latency, HTML plots,
and the side-by-side comparison of two runs.

Failures are never dropped (DESIGN.md §2): a turn whose status is not ok and that never reached an
anchor counts as +inf for every latency measured from t0, so p95 shows the tail a caller really
lives through; the success rate is printed beside the percentiles.
"""

from __future__ import annotations

import json
import math
import re
import textwrap

from llm.spoken import ONES

INF = float("inf")
# (key, label, what it measures). "from t0" metrics count failed turns as +inf.
LATENCY = [
    ("endpoint_ms", "endpoint delay", "from t0"),
    ("asr_stage_ms", "ASR", "endpoint -> transcript"),
    ("first_token_ms", "first token", "from t0"),
    ("ttfat_ms", "TTFAT", "from t0"),
    ("first_useful_token_ms", "first useful token", "from t0"),
    ("tool_ms", "tool time", "tool calls, per turn with tools"),
    ("tts_first_audio_ms", "TTS first audio", "from t0"),
    ("first_audio_ms", "first audio heard", "from t0"),
    ("first_useful_audio_ms", "first useful audio heard", "from t0"),
    ("complete_ms", "complete answer heard", "from t0"),
]
HEADLINE = ("ttfat_ms", "first_useful_audio_ms")
# Stage durations, measured only where the stage ran; every other metric is from t0.
DURATIONS = {"asr_stage_ms", "tool_ms"}


def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile: always a value that was observed (inf included), never interpolated."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def metric_values(turns: list[dict], key: str) -> list[float]:
    values = []
    for t in turns:
        v = derived(t, key)
        if v is not None:
            values.append(v)
        elif t["status"] != "ok" and key not in DURATIONS:
            values.append(INF)  # a failed turn never got there: it counts, as never
    return values


def derived(turn: dict, key: str) -> float | None:
    if key == "asr_stage_ms":
        a, e = turn.get("asr_ms"), turn.get("endpoint_ms")
        return None if a is None or e is None else a - e
    if key == "tool_ms":
        return sum(c["ms"] for c in turn["tool_calls"]) if turn.get("tool_calls") else None
    return turn.get(key)


def stats(values: list[float]) -> dict:
    if not values:
        return {"p50": None, "p95": None, "p99": None, "max": None, "n": 0}
    pick = lambda p: round(percentile(values, p), 1)  # noqa: E731
    return {"p50": pick(50), "p95": pick(95), "p99": pick(99), "max": round(max(values), 1), "n": len(values)}


def summarize(turns: list[dict], environment: dict | None = None) -> dict:
    """Everything summary.json holds; `ttfat report` prints it."""
    statuses = {s: sum(t["status"] == s for t in turns) for s in ("ok", "timeout", "error", "no_answer")}
    return {
        "turns": len(turns),
        "calls": len({t["call"] for t in turns}),
        "success_rate": round(statuses["ok"] / len(turns), 4) if turns else None,
        "statuses": statuses,
        "metrics": {key: stats(metric_values(turns, key)) for key, _, _ in LATENCY},
        "quality": quality(turns),
        "order_violations": sum(bool(t.get("order_violations")) for t in turns),
        "errors": sorted({t["error"] for t in turns if t.get("error")})[:20],
        "environment": environment or {},
    }


# --- quality ----------------------------------------------------------------------------------------


def normalize(text: str) -> list[str]:
    """Words for WER: lowercase, no punctuation, each digit as its word ("4217" -> four two one seven)."""
    text = re.sub(r"\d", lambda m: f" {ONES[int(m.group())]} ", text.lower())
    return re.sub(r"[^a-z' ]+", " ", text.replace("-", " ")).split()


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


def _tool_key(call: dict) -> tuple[str, str]:
    args = call.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return call.get("name", ""), args
    value = next(iter(args.values()), "") if isinstance(args, dict) and args else ""
    return call.get("name", ""), " ".join(normalize(str(value)))


def tool_correct(turn: dict, expected: dict | None) -> bool:
    made = [_tool_key(c) for c in turn.get("tool_calls") or []]
    return made == ([_tool_key(expected)] if expected else [])


def facts_correct(turn: dict, facts: list[str]) -> bool:
    answer = " ".join(normalize(turn.get("answer") or ""))
    return all(" ".join(normalize(f)) in answer for f in facts)


def quality(turns: list[dict]) -> dict:
    """WER against reference transcripts, tool-call and fact accuracy against the manifest."""
    ref = [t for t in turns if t.get("reference")]
    with_facts = [t for t in ref if t["reference"].get("facts")]
    t0_errors = [abs(t["t0_error_ms"]) for t in ref if t.get("t0_error_ms") is not None]
    rate = lambda ok, n: round(ok / n, 4) if n else None  # noqa: E731
    word_error = wer([(t["reference"]["text"], t.get("transcript") or "") for t in ref])
    tools_ok = sum(tool_correct(t, t["reference"].get("expected_tool")) for t in ref)
    facts_ok = sum(facts_correct(t, t["reference"]["facts"]) for t in with_facts)
    return {
        "turns_with_reference": len(ref),
        "wer": None if word_error is None else round(word_error, 4),
        "tool_call_accuracy": rate(tools_ok, len(ref)),
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


def text_report(summary: dict) -> str:
    lines = [
        f"{summary['calls']} calls, {summary['turns']} turns, success {pct(summary['success_rate'])} "
        f"({', '.join(f'{k} {v}' for k, v in summary['statuses'].items() if v)})",
        "",
        f"{'metric (ms)':<28}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}{'n':>6}   measured",
    ]
    for key, label, what in LATENCY:
        m = summary["metrics"][key]
        star = "*" if key in HEADLINE else " "
        cells = "".join(f"{fmt(m[p]):>8}" for p in ("p50", "p95", "p99", "max"))
        lines.append(f"{star}{label:<27}{cells}{m['n']:>6}   {what}")
    q = summary["quality"]
    t0 = q["t0_error_ms"]
    lines += [
        "",
        f"quality ({q['turns_with_reference']} turns with a reference): WER {pct(q['wer'])}, "
        f"tool calls {pct(q['tool_call_accuracy'])}, answer facts {pct(q['fact_accuracy'])} "
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
        for key, value in env.items():
            flat = _flat(value) if isinstance(value, dict) else {"": value}
            text = "; ".join(f"{k} {v}".strip() for k, v in flat.items())
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
    for key, label, _ in LATENCY:
        ma, mb = a["metrics"][key], b["metrics"][key]
        cells = ""
        for p in ("p50", "p95"):
            va, vb = ma[p], mb[p]
            ratio = vb / va if va and vb is not None and va != INF and vb != INF else None
            cells += f"{fmt(va):>8}{fmt(vb):>8}{'-' if ratio is None else f'{ratio:.2f}':>7} "
        lines.append(f"{label:<27}{cells}")
    qa, qb = a["quality"], b["quality"]
    lines.append("")
    for key, label in [
        ("wer", "WER"),
        ("tool_call_accuracy", "tool calls"),
        ("fact_accuracy", "answer facts"),
    ]:
        lines.append(f"{label:<27}{pct(qa[key]):>8}{pct(qb[key]):>8}")
    lines.append(f"{'success rate':<27}{pct(a['success_rate']):>8}{pct(b['success_rate']):>8}")
    return "\n".join(lines)
