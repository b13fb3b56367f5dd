"""Piper synthesis with and without onnxruntime's memory plans (issue 22): ms per clause and the
process's resident memory as it synthesizes clauses of every length, each setting in its own process,
side by side in one run. The plans are kept per input shape, and a clause's length is its shape, so with
them the memory grows with every new length; `tts.piper.Synthesizer` turns them off.

    python bench/piper_memory.py [--clauses 400] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from voice.record.environment import cpu_name

ANSWERS = [  # clauses are drawn from their words
    "your order shipped with ups on monday and should arrive by friday the twelfth of december",
    "sorry i can't help with that",
    "we have eleven yoga mats in stock at twenty nine dollars each",
]


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def worker(plans: bool, clauses: int, threads: int) -> dict:
    """One setting, in this process: times and memory over ``clauses`` clauses of 2-30 words."""
    import onnxruntime

    from tts.piper import Synthesizer, split_voice

    synth = Synthesizer()
    options = onnxruntime.SessionOptions()
    options.enable_mem_pattern = plans
    options.intra_op_num_threads = threads
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # as the Synthesizer's
    synth.sessions = [
        onnxruntime.InferenceSession(part, sess_options=options) for part in split_voice(synth.path)[:2]
    ]
    rng, words = random.Random(0), " ".join(ANSWERS).split()  # the same clauses for both settings
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 30))) + "." for _ in range(clauses)]
    synth.speak("Warming up.")
    times, memory = [], []
    for i, text in enumerate(texts):
        start = time.perf_counter()
        synth.speak(text)
        times.append(1000 * (time.perf_counter() - start))
        if (i + 1) % 50 == 0:
            memory.append(round(rss_mib()))
    return {"ms": statistics.median(times), "total_s": sum(times) / 1000, "memory": memory}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clauses", type=int, default=400)
    p.add_argument("--threads", type=int, default=1, help="onnxruntime threads (the pipeline's voice: 1)")
    p.add_argument("--worker", choices=["plans", "no-plans"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker == "plans", args.clauses, args.threads)))
        return
    print(
        f"{cpu_name()}, {args.clauses} clauses of 2-30 words, "
        f"{args.threads} onnxruntime thread(s); resident memory every 50 clauses"
    )
    results = {}
    for name in ("plans", "no-plans"):
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            name,
            "--clauses",
            str(args.clauses),
            "--threads",
            str(args.threads),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        results[name] = r = json.loads(out.strip().splitlines()[-1])
        grown = r["memory"][-1] - r["memory"][0]
        print(
            f"{name:<9} {r['ms']:6.1f} ms/clause (median), {r['total_s']:6.1f} s in all; MiB {r['memory']} "
            f"(+{grown} after the first 50)"
        )
    ratio = results["no-plans"]["total_s"] / results["plans"]["total_s"]
    print(f"time without plans / with: {ratio:.2f}x")


if __name__ == "__main__":
    main()
