"""Engine speed: tokens/s, time to first committed token and forwards per answer, by decoding mode.

Random weights at a compute-bound size (~30M parameters) with fixed tokens-per-step schedules give
the cost of each mode; the bundled model (if installed) gives real threshold-decoding parallelism.
Prompt key/value reuse is off, so repeated runs of one prompt do not flatter the cached modes.
Targets (issue 2): >= 8x tokens/s over the LLaDA reference at 256 tokens, >= 3x at 32, and time to
first committed token <= 1/4 of the reference's.

Releasing text (issue 47): our engine streams the committed prefix, a token as soon as it and all before
it are final; SGLang streams a dLLM a finished block at a time. On the bundled model and held-out
support-line prompts, the same decoding of each prompt is read both ways: when the first answer token
and the first clause (voice/pipeline/chunker.py, as TTS would take it) are released, as same-run ratios.

    python bench/engine.py [--lengths 32 64 256] [--prompt 64] [--repeats 2] [--release-only]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch
from tokenizers import Tokenizer, models

from llm.engine.checkpoint import save_checkpoint
from llm.engine.config import ModelConfig
from llm.engine.engine import Engine
from llm.engine.model import Transformer
from llm.engine.params import GenerationParams
from llm.support.models import BUNDLED
from voice.record.environment import cpu_name

VOCAB = 4096


def random_checkpoint(path: Path, attention: str, block_size: int) -> Path:
    cfg = ModelConfig(
        vocab_size=VOCAB,
        hidden_size=512,
        num_layers=8,
        num_heads=8,
        num_kv_heads=8,
        intermediate_size=1536,
        mask_token_id=VOCAB - 1,
        eos_token_ids=[VOCAB - 2],
        pad_token_id=VOCAB - 3,
        attention=attention,
        block_size=block_size,
        shift_logits=True,
        max_position=4096,
    )
    torch.manual_seed(0)
    model = Transformer(cfg)
    with torch.no_grad():
        model.lm_head.weight[cfg.eos_token_ids[0]] = 0  # never stop early: measure the full length
    save_checkpoint(model, path)
    Tokenizer(models.WordLevel({f"t{i}": i for i in range(VOCAB)}, unk_token="t0")).save(
        str(path / "tokenizer.json")
    )
    return path


def measure(engine: Engine, prompt: list[int], params: GenerationParams, repeats: int) -> dict:
    runs = []
    for _ in range(repeats):
        t0 = time.monotonic_ns()
        first = None
        n = forwards = 0
        for chunk in engine.stream(prompt, params):
            if chunk.token_ids and first is None:
                first = chunk.emit_ns
            n += len(chunk.token_ids)
            forwards = chunk.forwards
        total = (time.monotonic_ns() - t0) / 1e9
        runs.append({"tok_s": n / total, "ttft_ms": (first - t0) / 1e6, "forwards": forwards, "tokens": n})
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def row(name: str, m: dict, ref: dict | None) -> str:
    speed = f"{m['tok_s'] / ref['tok_s']:6.1f}x" if ref else "   1.0x"
    ttft = f"{m['ttft_ms'] / ref['ttft_ms']:5.2f}" if ref else " 1.00"
    return (
        f"  {name:<34} {m['tok_s']:8.1f} tok/s {speed}  first token {m['ttft_ms']:8.1f} ms ({ttft} of ref)"
        f"  forwards {m['forwards']:5.0f}  tokens/forward {m['tokens'] / max(m['forwards'], 1):5.2f}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 256])
    ap.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    ap.add_argument("--per-step", type=int, default=4, help="tokens committed per step in the parallel modes")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--release-only", action="store_true", help="only per-token against per-block release")
    args = ap.parse_args()
    print(
        f"# engine bench: {cpu_name()}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}, python {platform.python_version()}"
    )
    if args.release_only:
        bench_release(args.repeats)
        return
    tmp = Path(tempfile.mkdtemp())
    bidir = Engine(random_checkpoint(tmp / "bidir", "bidirectional", 32), device="cpu", prefix_cache=0)
    block = Engine(random_checkpoint(tmp / "block", "block", 8), device="cpu", prefix_cache=0)
    ar = Engine(random_checkpoint(tmp / "ar", "block", 1), device="cpu", prefix_cache=0)
    params_m = sum(p.numel() for p in bidir.model.parameters()) / 1e6
    print(
        f"# random weights, {params_m:.1f}M parameters, fp32, prompt {args.prompt} tokens, batch 1, "
        f"parallel modes commit {args.per_step} tokens per step"
    )
    prompt = list(range(10, 10 + args.prompt))
    k = args.per_step
    for n in args.lengths:
        print(f"\nanswer length {n}")
        blk = min(32, n)
        ref = measure(
            bidir,
            prompt,
            GenerationParams(gen_length=n, block_length=blk, steps=n, cache="none"),
            args.repeats,
        )
        print(row("(a) LLaDA reference, 1 token/step", ref, None))

        def parallel(cache: str, n=n, blk=blk) -> GenerationParams:
            return GenerationParams(gen_length=n, block_length=blk, steps=n // k, cache=cache)

        for name, engine, params in (
            (f"parallel {k}/step, no cache", bidir, parallel("none")),
            (f"parallel {k}/step, prefix cache", bidir, parallel("prefix")),
            (f"parallel {k}/step, dual cache", bidir, parallel("dual")),
            (f"block diffusion (8), {k}/step, exact", block, GenerationParams(gen_length=n, steps=n // k)),
            ("autoregressive (block 1), cached", ar, GenerationParams(gen_length=n, steps=n)),
        ):
            print(row(name, measure(engine, prompt, params, args.repeats), ref))
    if (BUNDLED["bundled"] / "config.json").exists():
        bench_bundled(args.repeats)
        bench_release(args.repeats)


def bench_bundled(repeats: int) -> None:
    """Threshold decoding needs a trained model: tokens per forward on real support-line prompts."""
    from llm.support.conversations import make_examples

    engine = Engine(BUNDLED["bundled"], device="cpu", prefix_cache=0)
    ar = (
        Engine(BUNDLED["bundled-ar"], device="cpu", prefix_cache=0)
        if (BUNDLED["bundled-ar"] / "config.json").exists()
        else None
    )
    tok = engine.tokenizer
    prompts = [tok.encode_chat(e.messages) for e in make_examples(24, seed=7, split="heldout")]
    print(f"\nbundled model, {len(prompts)} held-out support-line prompts (answers of ~10-30 tokens)")
    rows = {}
    for name, eng, params in (
        ("diffusion, threshold 0.9, block cache", engine, GenerationParams(threshold=0.9)),
        (
            "diffusion, 1 token/step (reference rule)",
            engine,
            GenerationParams(steps=GenerationParams.gen_length),
        ),
        ("autoregressive twin, cached", ar, GenerationParams(steps=GenerationParams.gen_length)),
    ):
        if eng is None:
            continue
        ms = [measure(eng, p, params, repeats) for p in prompts]
        rows[name] = {k: statistics.mean(m[k] for m in ms) for k in ms[0]}
    ref = rows.get("autoregressive twin, cached")
    for name, m in rows.items():
        print(row(name, m, ref).replace("of ref", "of AR"))


def release_times(engine: Engine, prompt: list[int], params: GenerationParams) -> tuple[list[str], dict]:
    """One decoding, read two ways: per answer token, when the committed prefix released it, and when its
    block was finished (every position of the block committed, as SGLang releases text); ms from arrival.
    Returns the token texts and {"token": [...], "block": [...]}."""
    t0 = time.monotonic_ns()
    tokens, emitted = [], []
    for chunk in engine.stream(prompt, params):
        tokens += chunk.token_ids
        emitted += [(chunk.emit_ns - t0) / 1e6] * len(chunk.token_ids)
    b = params.resolve(engine.config).block_length
    origin = len(prompt) // b * b if engine.config.aligned_blocks else len(prompt)
    block_of = [(len(prompt) + i - origin) // b for i in range(len(tokens))]
    # a block is finished when its last token joins the final prefix (no token is released before it is
    # committed, and blocks finish in order)
    finished = {k: max(e for e, j in zip(emitted, block_of, strict=True) if j == k) for k in set(block_of)}
    texts = [engine.tokenizer.decode(tokens[: i + 1]) for i in range(len(tokens))]
    return texts, {"token": emitted, "block": [finished[k] for k in block_of]}


def first_clause(texts: list[str]) -> int | None:
    """The index of the token that completes the answer's first clause, as the pipeline cuts clauses."""
    from voice.pipeline.chunker import Chunker

    for i, text in enumerate(texts):
        if Chunker(min_words=4, split_first=True).feed(text, 0):
            return i
    return None


def bench_release(repeats: int) -> None:
    """Per committed token against per finished block, on the same decodings of real prompts: with the
    bundled model's own blocks of 8, and decoded in blocks of 32 (SGLang's LLaDA2 and Fast-dLLM v2
    size; the model was trained on 8, so its answers differ a little)."""
    from llm.support.conversations import make_examples

    engine = Engine(BUNDLED["bundled"], device="cpu", prefix_cache=0)
    prompts = [engine.tokenizer.encode_chat(e.messages) for e in make_examples(24, seed=7, split="heldout")]
    for block in (engine.config.block_size, 32):
        release_table(engine, prompts, GenerationParams(block_length=block), repeats)


def release_table(engine: Engine, prompts: list[list[int]], params: GenerationParams, repeats: int) -> None:
    first = {"token": [], "block": []}
    clause = {"token": [], "block": []}
    for prompt in prompts:
        for _ in range(repeats):
            texts, at = release_times(engine, prompt, params)
            for way in at:
                first[way].append(at[way][0])
            if (i := first_clause(texts)) is not None:
                for way in at:
                    clause[way].append(at[way][i])
    print(
        f"\nreleasing text, bundled model in blocks of {params.block_length} (threshold 0.9), "
        f"{len(prompts)} held-out prompts x {repeats}: per committed token (ours) against per finished "
        "block (SGLang)"
    )
    for name, times in (("first answer token", first), ("first clause", clause)):
        if not times["token"]:
            continue
        ours, theirs = statistics.median(times["token"]), statistics.median(times["block"])
        ratios = sorted(a / b for a, b in zip(times["token"], times["block"], strict=True))
        print(
            f"  {name:<20} p50 {ours:7.1f} ms against {theirs:7.1f} ms: {ours / theirs:.2f}x of per-block "
            f"(per-prompt ratio p50 {statistics.median(ratios):.2f}, worst {ratios[-1]:.2f}; "
            f"{len(ratios)} answers)"
        )


if __name__ == "__main__":
    main()
