"""`ttfat generate`: decode one prompt with the engine, streaming the committed prefix."""

from __future__ import annotations

import argparse
import json
import sys

from ttfat.decoding import add_decoding_args, add_model_args, decoding_knobs


def add_parser(sub) -> None:
    p = sub.add_parser(
        "generate",
        help="decode one prompt, streaming the committed prefix",
        description="Decode one prompt and stream the committed prefix as it becomes final. --model\n"
        "takes bundled, bundled-ar or a checkpoint directory in the layout of LLaDA,\n"
        "Dream, SDAR, Fast-dLLM v2, LLaDA2.0 or ttfat, decoded as the family's own\n"
        "reference decodes, with the defaults of its model card. The decoding knobs are\n"
        "the same for ask, replay, talk, serve-agent and bench-llm.",
        epilog="examples:\n"
        "  ttfat generate --prompt 'where is my order 4217'\n"
        "  # --json: token ids and commit times\n"
        "  ttfat generate --prompt 'where is my order 4217' --threshold 0.9 --json\n"
        "  # DIR: a checkpoint of one of those families\n"
        "  ttfat generate --model DIR --prompt 'Hello'\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: the model families and the decoding knobs",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_args(p)
    p.add_argument("--prompt", help="user message (wrapped in the model's chat template unless --raw)")
    p.add_argument("--raw", action="store_true", help="use --prompt as it is, without the chat template")
    p.add_argument("--prompt-ids", help="comma-separated token ids (skips the tokenizer)")
    p.add_argument("--json", action="store_true", help="print one JSON object with ids, timings, counts")
    add_decoding_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from llm.engine.engine import Engine
    from llm.engine.params import GenerationParams
    from llm.serving.models import model_dir

    if args.prompt_ids is None and args.prompt is None:
        raise SystemExit("ttfat generate: give --prompt TEXT or --prompt-ids 1,2,3")
    engine = Engine(model_dir(args.model), device=args.device)
    tok = engine.tokenizer
    if args.prompt_ids:
        prompt = [int(t) for t in args.prompt_ids.split(",")]
    elif args.raw:
        prompt = tok.encode(args.prompt)
    else:
        prompt = tok.encode_chat([{"role": "user", "content": args.prompt}])
    params = GenerationParams(**decoding_knobs(args))
    if args.json:
        (gen,) = engine.generate([prompt], params)
        out = {
            "text": gen.text,
            "token_ids": gen.token_ids,
            "commit_ms": [round(t, 3) for t in gen.commit_ms],
            "first_token_ms": gen.first_token_ms,
            "total_ms": gen.total_ms,
            "forwards": gen.forwards,
            "tokens_per_forward": gen.tokens_per_forward,
            "finish_reason": gen.finish_reason,
        }
        print(json.dumps(out))
        return 0
    ids: list[int] = []
    printed = ""
    for chunk in engine.stream(prompt, params):
        ids += chunk.token_ids
        text = tok.decode(ids)
        sys.stdout.write(text[len(printed) :])
        sys.stdout.flush()
        printed = text
        last = chunk
    print(f"\n[{len(ids)} tokens, {last.forwards} forward passes, {last.finish_reason}]", file=sys.stderr)
    return 0
