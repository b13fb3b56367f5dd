"""`ttfat ask`: one text turn through the bundled agent, the engine in-process."""

from __future__ import annotations

import argparse
import json

from ttfat.decoding import add_decoding_args, add_model_args, decoding_knobs
from ttfat.stack import add_agent_arg


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ask",
        help="one caller turn through the agent: tools, answer, times",
        description="Send one caller sentence through the agent loop, the engine in-process: the\n"
        "model may call the agent's tools (the bundled agent's: lookup_order /\n"
        "check_stock against the store database), then answers. Prints the tool calls,\n"
        "the answer, and first token / first answer token / done times. The agent\n"
        "file's [decoding] applies under the decoding knobs given.",
        epilog="examples:\n"
        "  ttfat ask 'where is my order four two one seven'\n"
        "  ttfat ask 'where is my order four two one seven' --json --threshold 0.9\n"
        "\n"
        "see also:\n"
        "  docs/commands.md: ttfat ask\n"
        "  docs/agent-files.md: the agent file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("text", help="what the caller said")
    add_agent_arg(p)
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="print the turn as one JSON object")
    add_decoding_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from llm.agentfile import BUNDLED_AGENT, load_agent_file
    from llm.engine.async_engine import AsyncEngine
    from llm.engine.engine import Engine
    from llm.engine.params import GenerationParams
    from llm.serving.engine_chat import EngineChat
    from llm.serving.models import model_dir

    spec = load_agent_file(args.agent or BUNDLED_AGENT)
    params = GenerationParams(**{**spec.decoding, **decoding_knobs(args)})  # the command line wins
    engine = AsyncEngine(Engine(model_dir(args.model), device=args.device))
    try:
        result = asyncio.run(spec.agent(EngineChat(engine, params)).turn(args.text))
    finally:
        engine.close()
    if args.json:
        print(json.dumps(result.to_dict()))
        return 0
    if result.filler:
        print(f"filler:  {result.filler}")
    for call in result.tool_calls:
        print(f"tool:    {call.name}({call.arguments}) -> {json.dumps(call.result)}")
    print(f"answer:  {result.answer}")
    d = result.to_dict()
    fmt = lambda ms: "-" if ms is None else f"{ms:.1f} ms"  # noqa: E731
    print(
        f"timing:  first token {fmt(d['first_token_ms'])}, first answer token "
        f"{fmt(d['first_answer_token_ms'])}, done {fmt(d['done_ms'])} ({len(result.calls)} LLM calls)"
    )
    return 0
