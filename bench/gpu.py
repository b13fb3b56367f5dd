"""The engine on a lent accelerator, one prepared run: for each checkpoint directory given (any family the
engine loads), time to the first answer token p50/p95, tokens/s and tokens per forward, one request at a
time and eight at once, on the held-out support-line prompts; with `--pipeline`, also bench/pipeline.py
with Whisper and the engine on the device. Everything goes into one JSON, and a table is printed.

    python bench/gpu.py DIR [DIR ...] [--device cuda] [--requests 32] [--gen-length 64] [--pipeline]
        [--out runs/gpu.json]

On a CPU it runs the same way (the suite runs it on a tiny checkpoint), so the script is known to work
before device time is spent on it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from llm.engine.engine import Engine
from llm.engine.params import GenerationParams
from llm.support.conversations import make_examples
from voice.record.environment import cpu_name
from voice.reports.summary import percentile

ROOT = Path(__file__).resolve().parents[1]


def device_name(device: str) -> str:
    return torch.cuda.get_device_name(0) if device.startswith("cuda") else cpu_name()


def run_wave(engine: Engine, prompts: list[list[int]], params: GenerationParams) -> list[dict]:
    """Decode prompts together to the end; per request its first token (ms from the wave's start), tokens
    and forwards. The clock waits for the device at every step, so times are the device's."""
    start = time.monotonic_ns()
    ids = [engine.add_request(p, params) for p in prompts]
    first: dict[str, float] = {}
    tokens = dict.fromkeys(ids, 0)
    forwards = dict.fromkeys(ids, 0)
    while engine.has_work():
        chunks = engine.step()
        if engine.model.device.type == "cuda":
            torch.cuda.synchronize()
        for c in chunks:
            if c.token_ids and c.request_id not in first:
                first[c.request_id] = (c.emit_ns - start) / 1e6
            tokens[c.request_id] += len(c.token_ids)
            forwards[c.request_id] = c.forwards
    total_s = (time.monotonic_ns() - start) / 1e9
    return [
        {"first_ms": first.get(i), "tokens": tokens[i], "forwards": forwards[i], "wave_s": total_s}
        for i in ids
    ]


def measure(engine: Engine, prompts: list[list[int]], concurrency: int, params: GenerationParams) -> dict:
    run_wave(engine, prompts[:concurrency], params)  # warm-up: first calls compile kernels and fill caches
    rows, seconds = [], 0.0
    for i in range(0, len(prompts), concurrency):
        wave = run_wave(engine, prompts[i : i + concurrency], params)
        rows += wave
        seconds += wave[0]["wave_s"]
    firsts = [r["first_ms"] for r in rows if r["first_ms"] is not None]
    tokens = sum(r["tokens"] for r in rows)
    return {
        "concurrency": concurrency,
        "requests": len(rows),
        "ttfat_p50_ms": round(statistics.median(firsts), 1) if firsts else None,
        "ttfat_p95_ms": round(percentile(firsts, 95), 1) if firsts else None,
        "tokens_per_s": round(tokens / seconds, 1),
        "tokens_per_forward": round(tokens / max(sum(r["forwards"] for r in rows), 1), 2),
        "unanswered": len(rows) - len(firsts),
    }


def bench_model(path: str, device: str, requests: int, gen_length: int) -> dict:
    engine = Engine(path, device=device, max_batch=8, prefix_cache=0)
    texts = make_examples(requests, seed=11, split="heldout")
    prompts = [engine.tokenizer.encode_chat(e.messages) for e in texts]
    params = GenerationParams(gen_length=gen_length)
    cfg = engine.config
    return {
        "model": str(path),
        "family": cfg.family,
        "dtype": str(engine.model.dtype),
        "decoding": {k: v for k, v in vars(params.resolve(cfg)).items() if k != "opening_floor"},
        "runs": [measure(engine, prompts, c, params) for c in (1, 8)],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", help="checkpoint directories (or bundled, bundled-ar)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--requests", type=int, default=32, help="prompts per model and concurrency")
    ap.add_argument("--gen-length", type=int, default=64)
    ap.add_argument(
        "--pipeline", action="store_true", help="also bench/pipeline.py, overlapped, on the device"
    )
    ap.add_argument("--out", default="runs/gpu.json")
    args = ap.parse_args()
    from llm.serving.models import model_dir
    from llm.support.models import register_bundled

    register_bundled()

    report = {
        "device": device_name(args.device),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "models": [],
    }
    print(f"# gpu bench: {report['device']}, torch {torch.__version__}")
    for name in args.models:
        result = bench_model(str(model_dir(name)), args.device, args.requests, args.gen_length)
        report["models"].append(result)
        for r in result["runs"]:
            print(
                f"  {result['family']:<14} x{r['concurrency']}: first answer token p50 "
                f"{r['ttfat_p50_ms']} / p95 {r['ttfat_p95_ms']} ms, {r['tokens_per_s']} tok/s, "
                f"{r['tokens_per_forward']} tokens/forward ({r['requests']} requests, {r['unanswered']} "
                "without a token)"
            )
    if args.pipeline:
        pipeline = [sys.executable, str(ROOT / "bench" / "pipeline.py"), "--configs", "overlapped"]
        done = subprocess.run(pipeline, capture_output=True, text=True, cwd=ROOT)
        report["pipeline"] = {
            "returncode": done.returncode,
            "output": done.stdout,
            "errors": done.stderr[-4000:],
        }
        print(done.stdout)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"# wrote {args.out}")


if __name__ == "__main__":
    main()
