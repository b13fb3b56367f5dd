"""The probe under load, checked against truth (issue 58, part 1): `ttfat probe` makes N calls at once to a
scripted agent in a process of its own (tests/peers.py), which answers each call 0.3 s after the caller's
turn with known audio and records when it sent it. Prints how far the probe's first audio heard is from
that (p50 / p95 / max, ms; the target: within 20 ms at p95 at 100 calls at once) and how late the probe's
event loop ran while it made the calls. Both sides stamp on the same monotonic clock.

    python bench/probe_truth.py [--calls 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from voice.record.environment import cpu_name
from voice.reports.summary import percentile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the scripted peer is the tests' helper
from tests.peers import ROOT, against_truth, copies, scripted  # noqa: E402


def once(calls: Path, end_s: float, n: int, out: Path) -> tuple[list[float], dict]:
    """One run, `ttfat probe` as a user runs it: probe - truth of each call's first audio heard (ms), and
    the loop lag."""
    with scripted(end_s) as (url, truth):
        command = [sys.executable, "-m", "ttfat", "probe", url, str(calls), "--concurrency", str(n)]
        subprocess.run([*command, "--linger", "1", "--out", str(out)], cwd=ROOT, check=True)
    return against_truth(out, truth)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=100, help="calls, all at once")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ttfat-probe-truth-"))
    calls, end_s = copies(work, args.calls)
    print(f"# probe against truth: {cpu_name()}; {args.calls} calls at once, Twilio media streams, loopback")
    for k in range(args.runs):
        off, lag = once(calls, end_s, args.calls, work / f"run{k}")
        size = sorted(abs(x) for x in off)
        print(
            f"run {k + 1}: |probe - truth| p50 {percentile(size, 50):.1f}, p95 {percentile(size, 95):.1f}, "
            f"max {size[-1]:.1f} ms (signed {min(off):+.1f} to {max(off):+.1f}); "
            f"loop lag p50 {lag['p50']}, p99 {lag['p99']}, max {lag['max']} ms"
        )


if __name__ == "__main__":
    main()
