"""The probe checked against truth (issue 48): `ttfat serve-agent` on loopback, `ttfat probe` calling it with
recordings/, and each turn's first useful audio heard as the probe measured it from outside beside the
agent's own record of the same turn. The target: within 30 ms at p50 and 80 ms at p95 (of |probe - agent|).
Also prints both runs' headline figures. `--pipecat`: a Pipecat 1.14 agent (tests/pipecat_agent.py, the
same models) probed on the same calls, and `compare`'s table of it against ours, both from outside.

    python bench/probe.py [--calls 14] [--concurrency 1|1,2,4] [--pipecat] [--keep DIR]

With a list of levels (`--concurrency 1,2,4`), the load curve of each agent too (issue 58).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from llm.agentfile import BUNDLED_AGENT, load_agent_file
from llm.serving.models import model_dir, served_name
from llm.serving.process import ServerProcess
from llm.support.models import register_bundled
from voice.record.environment import cpu_name
from voice.record.runlog import read_run
from voice.reports.summary import compare_report, load_curve_lines, percentile
from voice.runs.probe.agreement import joined
from voice.runs.replay import find_calls

ROOT = Path(__file__).resolve().parents[1]
TTFAT = [sys.executable, "-m", "ttfat"]


def manifest(out: Path, n: int) -> Path:
    """The first `n` calls of recordings/ as a manifest of their own (references kept)."""
    lines = (ROOT / "recordings" / "manifest.jsonl").read_text().splitlines()[:n]
    rows = [{**row, "file": str(ROOT / "recordings" / row["file"])} for row in map(json.loads, lines)]
    path = out / "manifest.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=len(find_calls(["recordings"])))
    ap.add_argument(
        "--concurrency", default="1", help="calls at once: a level, or a list (1,2,4): a load curve"
    )
    ap.add_argument("--pipecat", action="store_true", help="also probe a Pipecat agent, and compare")
    ap.add_argument("--keep", help="keep the run directories here")
    args = ap.parse_args()
    register_bundled()
    work = Path(args.keep or tempfile.mkdtemp(prefix="ttfat-probe-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    agent_dir, probe_dir = work / "agent", work / "probe"
    calls = manifest(work, args.calls)
    # the bundled agent's own fillers, for both agents: they carry no answer
    fillers = [arg for f in load_agent_file(BUNDLED_AGENT).fillers for arg in ("--filler", f)]
    serve_agent = [*TTFAT, "serve-agent", "--port", "0", "--out", str(agent_dir)]
    probe_agent(serve_agent, calls, probe_dir, args, *fillers)
    probe, summary = read_run(probe_dir)
    ours, agent_summary = read_run(agent_dir)
    rows = joined(probe, ours)
    gaps = [abs(r["difference_ms"]) for r in rows]
    cores = summary["environment"]["hardware"]["cores"]
    print(
        f"\n# probe vs the agent's own records: {cpu_name()}, {cores} cores; {args.calls} calls of "
        f"recordings/, concurrency {args.concurrency}, Twilio media streams"
    )
    ok = summary["statuses"]["ok"]
    print(f"turns: probe {len(probe)} (ok {ok}), agent {len(ours)}, joined {len(rows)}")
    if gaps:
        signed = sorted(r["difference_ms"] for r in rows)
        print(
            f"|probe - agent| first useful audio heard: p50 {percentile(gaps, 50):.0f} ms, "
            f"p95 {percentile(gaps, 95):.0f} ms, max {max(gaps):.0f} ms (targets 30 / 80); "
            f"signed p50 {percentile(signed, 50):+.0f} ms"
        )
    for name, s in (("probe (outside)", summary), ("agent (its own records)", agent_summary)):
        m = s["metrics"]["first_useful_audio_ms"]
        print(
            f"{name:<24} first useful audio heard p50 {m['p50']} / p95 {m['p95']} ms, "
            f"success {s['success_rate']}"
        )
    worst = sorted(rows, key=lambda r: -abs(r["difference_ms"]))[:5]
    print("largest:", ", ".join(f"{r['call']} {r['turn']} {r['difference_ms']:+.0f} ms" for r in worst))
    print("\n".join(load_curve_lines(summary)))
    print(f"run directories: {probe_dir} {agent_dir}")
    if args.pipecat:
        pipecat_dir = work / "pipecat"
        with ServerProcess(model_dir("bundled"), served_name("bundled")) as llm_url:
            command = [sys.executable, str(ROOT / "tests" / "pipecat_agent.py"), "--llm-url", llm_url]
            probe_agent(command, calls, pipecat_dir, args, *fillers)
        print("\n# Pipecat 1.14 (A) against ours (B), both probed from outside on the same calls\n")
        pipecat = read_run(pipecat_dir)[1]
        print(compare_report(pipecat, summary, str(pipecat_dir), str(probe_dir)))
        print("\n".join(["", "# Pipecat 1.14", *load_curve_lines(pipecat)]))


def probe_agent(command: list[str], calls: Path, out: Path, args, *more: str) -> None:
    """Start an agent that prints its ws:// URL first, probe it with `calls` into `out`, stop it."""
    agent = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        url = agent.stdout.readline().strip()
        if not url.startswith("ws://"):
            sys.exit(f"{command[1]} did not start (it printed {url!r})")
        subprocess.run(
            [
                *TTFAT,
                "probe",
                url,
                str(calls),
                "--out",
                str(out),
                "--force",
                "--concurrency",
                str(args.concurrency),
                *more,
            ],
            cwd=ROOT,
            check=True,
        )
    finally:
        agent.send_signal(signal.SIGINT)
        agent.wait(120)


if __name__ == "__main__":
    main()
