"""The `ttfat` command. Each subcommand is a small function; the work lives in its domain package."""

from __future__ import annotations

import argparse
import json
import sys


def _add_decoding_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decoding (defaults come from the model)")
    g.add_argument("--gen-length", type=int, default=64, help="answer canvas / token budget (default 64)")
    g.add_argument(
        "--block-length", type=int, help="tokens per block (default: the model's block size, or 32)"
    )
    g.add_argument("--steps", type=int, help="fixed denoising steps over the canvas (LLaDA's reference rule)")
    g.add_argument(
        "--threshold", type=float, help="commit every position at least this confident (Fast-dLLM)"
    )
    g.add_argument("--factor", type=float, help="Fast-dLLM factor rule instead of a threshold")
    g.add_argument("--cache", choices=["none", "prefix", "dual", "block"], help="key/value cache mode")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default)")
    g.add_argument("--seed", type=int, help="random seed for sampling at temperature > 0")
    g.add_argument("--no-early-stop", action="store_true", help="denoise the whole canvas even after EOS")


def decoding_params(args: argparse.Namespace):
    from llm.params import GenerationParams

    return GenerationParams(
        gen_length=args.gen_length,
        block_length=args.block_length,
        steps=args.steps,
        threshold=args.threshold,
        factor=args.factor,
        cache=args.cache,
        temperature=args.temperature,
        seed=args.seed,
        early_stop=not args.no_early_stop,
    )


def cmd_generate(args: argparse.Namespace) -> int:
    from llm.checkpoint import resolve_model
    from llm.engine import Engine

    engine = Engine(resolve_model(args.model), device=args.device)
    tok = engine.tokenizer
    if args.prompt_ids:
        prompt = [int(t) for t in args.prompt_ids.split(",")]
    elif args.prompt is None:
        raise SystemExit("ttfat generate: give --prompt TEXT or --prompt-ids 1,2,3")
    elif args.raw:
        prompt = tok.encode(args.prompt)
    else:
        prompt = tok.encode_chat([{"role": "user", "content": args.prompt}])
    params = decoding_params(args)
    if args.json:
        (gen,) = engine.generate([prompt], params)
        out = {
            "text": gen.text,
            "token_ids": gen.token_ids,
            "commit_ms": [round(t, 3) for t in gen.commit_ms],
            "first_token_ms": gen.first_token_ms,
            "total_ms": gen.total_ms,
            "forwards": gen.forwards,
            "steps": gen.steps,
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


def cmd_ask(args: argparse.Namespace) -> int:
    import asyncio

    from llm.agent import Agent, EngineChat
    from llm.async_engine import AsyncEngine
    from llm.checkpoint import resolve_model
    from llm.engine import Engine

    engine = AsyncEngine(Engine(resolve_model(args.model), device=args.device))
    try:
        result = asyncio.run(Agent(EngineChat(engine, decoding_params(args))).turn(args.text))
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
        f"{fmt(d['first_answer_token_ms'])}, done {fmt(d['done_ms'])} ({result.llm_calls} LLM calls)"
    )
    return 0


def cmd_eval_llm(args: argparse.Namespace) -> int:
    from pathlib import Path

    from llm.checkpoint import resolve_model
    from llm.evaluate import sweep

    ar = None if args.ar_model == "none" else resolve_model(args.ar_model)
    sweep(resolve_model(args.model), ar, args.n, Path(args.out), default_only=args.default_only)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    from llm.server import Limits, serve

    limits = Limits(args.max_prompt_tokens, args.max_tokens, args.max_concurrent)
    print(f"ttfat: serving {args.model} on http://{args.host}:{args.port}/v1", file=sys.stderr)
    serve(args.model, args.host, args.port, args.api_key, args.device, args.max_batch, limits,
          dtype=args.dtype, threads=args.threads)  # fmt: skip
    return 0


def cmd_bench_llm(args: argparse.Namespace) -> int:
    from llm.client import ServerProcess
    from llm.loadgen import bench

    if args.url:
        bench(args.url, args.levels, args.requests_per_worker, args.api_key, min_requests=args.min_requests)
        return 0
    with ServerProcess(args.model) as url:
        bench([url], args.levels, args.requests_per_worker, min_requests=args.min_requests)
    return 0


def open_stages(args: argparse.Namespace, stack, settings, **env_extra) -> tuple:
    """The stages of `replay` and `talk` from their shared options: the LLM server (started here on a
    free loopback port unless --llm-url), ASR and TTS; and the environment a report must carry."""
    from dataclasses import asdict

    from asr.whisper import Transcriber
    from llm.agent import Agent
    from llm.client import OpenAIChat, ServerProcess
    from tts.piper import Synthesizer
    from voice.environment import environment
    from voice.pipeline import Stages

    extra = {k: v for k, v in [("threshold", args.threshold), ("steps", args.steps),
                               ("block_length", args.block_length)] if v is not None}  # fmt: skip
    url = args.llm_url
    if url is None:
        print(f"ttfat: starting the LLM server ({args.llm_model}) on a free loopback port", file=sys.stderr)
        url = stack.enter_context(ServerProcess(args.llm_model))
    llm = OpenAIChat(url, api_key=args.api_key, extra=extra, max_tokens=args.max_tokens)
    transcriber = Transcriber(args.asr_model)
    stages = Stages(transcriber, Agent(llm), Synthesizer())
    llm_info = {
        "url": args.llm_url or f"ttfat serve --model {args.llm_model} (started by ttfat)",
        "max_tokens": args.max_tokens,
        "decoding": extra or "the server's defaults",
    }
    if args.llm_url is None:  # our server: say what those defaults are
        from llm.checkpoint import read_config, resolve_model
        from llm.params import GenerationParams

        path = resolve_model(args.llm_model)
        p = asdict(GenerationParams(gen_length=args.max_tokens, **extra).resolve(read_config(path)))
        keys = ("steps", "block_length", "threshold", "factor", "cache")
        llm_info |= {"model": str(path), "decoding": {k: p[k] for k in keys}}
    asr_info = {"model": str(transcriber.path), "device": transcriber.device}
    env = environment(
        llm=llm_info,
        asr={**asr_info, "compute": transcriber.compute_type},
        tts={"voice": str(stages.synthesizer.path)},
        settings=asdict(settings),
        **env_extra,
    )
    return stages, env


def pipeline_settings(args: argparse.Namespace, mode: str, **more):
    from voice.pipeline import Settings
    from voice.turns import VadConfig

    vad = VadConfig(args.vad_aggressiveness, args.vad_frame_ms, args.vad_start_ms, end_ms=args.vad_end_ms)
    vad.validate(16000)
    settings = Settings(mode, vad, args.turn_timeout, barge_in=not args.no_barge_in, **more)
    settings.validate()
    return settings


def cmd_replay(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib
    import time
    from pathlib import Path

    from voice.mqtt import publisher_from_args
    from voice.replay import find_calls, run
    from voice.report import text_report

    channel = args.channel if args.channel == "auto" else int(args.channel)
    calls = find_calls(args.paths, channel)
    settings = pipeline_settings(args, args.mode, playback_latency_ms=args.playback_latency_ms)
    out = Path(args.out or time.strftime("runs/replay-%Y%m%d-%H%M%S"))
    with contextlib.ExitStack() as stack:
        stages, env = open_stages(args, stack, settings, mode=args.mode, concurrency=args.concurrency,
                                  inputs=args.paths)  # fmt: skip
        publisher = publisher_from_args(args, out.name, env)  # None without --mqtt
        summary = asyncio.run(run(calls, stages, settings, out, args.concurrency, env, publisher))
    print(text_report(summary))
    if args.html:
        write_html(out, args.html, summary)
    print(f"\nrun directory: {out}  (ttfat report {out} --html report.html)")
    return 0


def cmd_talk(args: argparse.Namespace) -> int:
    import asyncio
    import contextlib
    import time
    from pathlib import Path

    from voice.live import DeviceSpeaker, Microphone, device_arg, list_devices
    from voice.mqtt import publisher_from_args
    from voice.report import text_report
    from voice.talk import talk

    if args.list_devices:
        print(list_devices())
        return 0
    settings = pipeline_settings(args, "realtime")
    out = Path(args.out or time.strftime("runs/talk-%Y%m%d-%H%M%S"))
    mic = Microphone(device_arg(args.input_device), settings.vad.frame_ms)
    with contextlib.ExitStack() as stack:
        speaker = DeviceSpeaker(device_arg(args.output_device))
        stack.callback(speaker.close)
        devices = {"input": args.input_device, "output": args.output_device, "latency_ms": speaker.latency_ms}
        stages, env = open_stages(args, stack, settings, mode="live", devices=devices)
        publisher = publisher_from_args(args, out.name, env)
        summary = asyncio.run(talk(stages, settings, out, mic, speaker, env, publisher, args.seconds))
    print(text_report(summary))
    print(f"\nrun directory: {out}")
    return 0


def write_html(run_dir, path: str, summary: dict) -> None:
    from pathlib import Path

    from voice.html import html_report
    from voice.runlog import read_run

    Path(path).write_text(html_report(read_run(run_dir)[0], summary))
    print(f"ttfat: wrote {path}", file=sys.stderr)


def cmd_report(args: argparse.Namespace) -> int:
    from voice.report import summarize, text_report
    from voice.runlog import read_run

    turns, saved = read_run(args.run)
    summary = summarize(turns, saved.get("environment"))
    if saved.get("mqtt_gaps"):
        print(f"ttfat: warning: MQTT messages are missing for {len(saved['mqtt_gaps'])} call(s): "
              "this collected run is incomplete (see summary.json, mqtt_gaps)", file=sys.stderr)  # fmt: skip
    if args.html:
        write_html(args.run, args.html, summary)
    print(json.dumps(summary, indent=2) if args.json else text_report(summary))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from voice.report import compare_report, summarize
    from voice.runlog import read_run

    (a, env_a), (b, env_b) = (read_run(d) for d in (args.a, args.b))
    print(compare_report(summarize(a), summarize(b), args.a, args.b))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from llm.train import main as train_main

    train_main(args.train_args)
    return 0


def _add_pipeline_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM")
    g.add_argument(
        "--llm-url", help="an OpenAI-compatible base URL; default: start ttfat serve on a free port"
    )
    g.add_argument(
        "--llm-model", default="bundled", help="model for the local server: bundled, bundled-ar, DIR"
    )
    g.add_argument("--api-key", default="none")
    g.add_argument("--max-tokens", type=int, default=64, help="answer token budget (default 64)")
    g.add_argument("--threshold", type=float, help="decoding threshold sent with each request")
    g.add_argument("--steps", type=int, help="denoising steps sent with each request")
    g.add_argument("--block-length", type=int, help="block length sent with each request")
    g = p.add_argument_group("turn detection, ASR, playback")
    g.add_argument("--vad-aggressiveness", type=int, default=3, help="webrtcvad mode 0-3 (default 3)")
    g.add_argument("--vad-frame-ms", type=int, default=30, help="10, 20 or 30 (default 30)")
    g.add_argument("--vad-start-ms", type=int, default=150, help="voiced window that starts a turn (150)")
    g.add_argument("--vad-end-ms", type=int, default=300, help="unvoiced window that ends a turn (300)")
    g.add_argument("--asr-model", default="tiny.en", help="tiny.en (bundled), base, or a CTranslate2 dir")
    g.add_argument("--turn-timeout", type=float, default=20.0, help="seconds from endpoint to answer (20)")
    g.add_argument("--no-barge-in", action="store_true", help="do not stop the agent when the caller speaks")


def build_parser() -> argparse.ArgumentParser:
    from voice.collect import add_collect_parser
    from voice.mqtt import add_mqtt_args

    parser = argparse.ArgumentParser(
        prog="ttfat",
        description="Measure how long a caller waits for a useful answer from a voice agent "
        "built on a local diffusion LLM.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "generate",
        help="decode one prompt with the diffusion engine",
        description="Decode one prompt and stream the committed prefix as it becomes final. "
        "Example: ttfat generate --prompt 'where is my order 4217' --threshold 0.9",
    )
    p.add_argument("--model", default="bundled", help="bundled, bundled-ar or a checkpoint directory")
    p.add_argument("--prompt", help="user message (wrapped in the model's chat template unless --raw)")
    p.add_argument("--raw", action="store_true", help="use --prompt as it is, without the chat template")
    p.add_argument("--prompt-ids", help="comma-separated token ids (skips the tokenizer)")
    p.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    p.add_argument("--json", action="store_true", help="print one JSON object with ids, timings, counts")
    _add_decoding_args(p)
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser(
        "ask",
        help="one text turn through the agent (tool calls against the store, then the answer)",
        description="Send one caller sentence through the agent loop: the model may call "
        "lookup_order / check_stock against the bundled store database, then answers. "
        "Example: ttfat ask 'where is my order four two one seven'",
    )
    p.add_argument("text", help="what the caller said")
    p.add_argument("--model", default="bundled", help="bundled, bundled-ar or a checkpoint directory")
    p.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    p.add_argument("--json", action="store_true", help="print the turn as one JSON object")
    _add_decoding_args(p)
    p.set_defaults(func=cmd_ask)

    p = sub.add_parser(
        "eval-llm",
        help="tool-call and answer accuracy vs decoding settings (table + plot)",
        description="Evaluate a support-line model on held-out calls and real out-of-scope queries, "
        "sweeping threshold / block length / fixed steps, with tokens per forward and time per answer.",
    )
    p.add_argument("--model", default="bundled")
    p.add_argument("--ar-model", default="bundled-ar", help="autoregressive twin to compare (or 'none')")
    p.add_argument("-n", type=int, default=300, help="held-out model calls per setting (default 300)")
    p.add_argument(
        "--default-only",
        action="store_true",
        help="only the default decoding setting (and the twin): with -n 2000 the tool-call figure is "
        "known to about +-1.5 points instead of +-4",
    )
    p.add_argument("--out", default="runs/eval-llm", help="where eval.json and the plot go")
    p.set_defaults(func=cmd_eval_llm)

    p = sub.add_parser(
        "serve",
        help="the diffusion LLM server (OpenAI-compatible, streaming, batched)",
        description="Serve a model at /v1/chat/completions (stream or not, tools, decoding knobs as extra "
        "fields), /v1/models, /health and Prometheus /metrics. Binds 127.0.0.1 unless told otherwise.",
    )
    p.add_argument("--model", default="bundled", help="bundled, bundled-ar or a checkpoint directory")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    p.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        help="weights and activations (default: bfloat16 on CUDA, float32 on CPU; on CPUs with AMX "
        "bfloat16 makes batched steps cheaper, at answers not checked against the fp32 evaluation)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads for the model (default: half the cores, leaving the rest to the event loop and, "
        "in a voice stack, to ASR and TTS on the same machine)",
    )
    p.add_argument("--max-batch", type=int, default=16, help="requests decoded together (default 16)")
    p.add_argument("--max-concurrent", type=int, default=32, help="open requests before 429 (default 32)")
    p.add_argument("--max-tokens", type=int, default=256, help="largest max_tokens accepted (default 256)")
    p.add_argument(
        "--max-prompt-tokens", type=int, default=1536, help="longest prompt accepted (default 1536)"
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser(
        "bench-llm",
        help="load-test OpenAI-compatible endpoints: TTFT / TTFAT percentiles, tokens/s, errors",
        description="Support-line requests at concurrency 1, 2, 4, 8, 16 against each --url (compare two "
        "servers in one run), or against the bundled model on a local server started for the run.",
    )
    p.add_argument("--url", action="append", help="base URL such as http://127.0.0.1:8000/v1 (repeatable)")
    p.add_argument("--model", default="bundled", help="model for the local server when no --url is given")
    p.add_argument("--api-key", default="none")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    p.add_argument("--requests-per-worker", type=int, default=6)
    p.add_argument("--min-requests", type=int, default=24, help="at least this many per level (default 24)")
    p.set_defaults(func=cmd_bench_llm)

    p = sub.add_parser(
        "replay",
        help="replay call recordings through the voice pipeline and report TTFAT",
        description="Replay recordings (files, folders, manifests; WAV FLAC MP3 OGG, any rate, mono or "
        "stereo) through turn detection, ASR, the agent on the LLM server, TTS and a simulated speaker, and "
        "write turns.jsonl, events.jsonl and summary.json. Example: ttfat replay recordings/ --mode fast",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="audio files, folders or manifest.jsonl files")
    p.add_argument(
        "--mode",
        choices=["realtime", "fast"],
        default="realtime",
        help="realtime feeds audio at wall-clock pace (faithful); fast skips waiting for audio",
    )
    p.add_argument("--concurrency", type=int, default=1, help="calls replayed at once (default 1)")
    p.add_argument("--out", help="run directory (default runs/replay-DATE-TIME)")
    p.add_argument("--channel", default="auto", help="caller channel of stereo files: auto (loudest), 0, 1")
    p.add_argument("--html", metavar="FILE", help="also write the HTML report (waterfall, CDFs)")
    _add_pipeline_args(p)
    p.add_argument("--playback-latency-ms", type=float, default=0.0, help="simulated output latency (0)")
    add_mqtt_args(p)
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser(
        "talk",
        help="talk to the local voice agent through microphone and speaker",
        description="Live conversation: microphone -> turns -> ASR -> agent -> TTS -> speaker, with the same "
        "run directory and report as replay. Speaking while the agent talks interrupts it (barge-in). "
        "Use headphones: there is no echo cancellation, so the agent would interrupt itself. Ctrl-C ends "
        "the session and writes the report. Example: ttfat talk --list-devices; ttfat talk --input-device 2",
    )
    p.add_argument("--list-devices", action="store_true", help="list audio devices and exit")
    p.add_argument("--input-device", help="microphone: index or name (default: the system default)")
    p.add_argument("--output-device", help="speaker: index or name (default: the system default)")
    p.add_argument("--out", help="run directory (default runs/talk-DATE-TIME)")
    p.add_argument("--seconds", type=float, help="end the session after this long (default: Ctrl-C)")
    _add_pipeline_args(p)
    add_mqtt_args(p)
    p.set_defaults(func=cmd_talk)

    p = sub.add_parser(
        "report",
        help="TTFAT and first-useful-audio percentiles, stages, quality, environment of a run",
        description="Print the report of a run directory (failed turns count as never answered). "
        "Example: ttfat report runs/replay-... --html report.html",
    )
    p.add_argument("run", help="run directory (from ttfat replay, talk or collect)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--html", metavar="FILE", help="also write an HTML report with waterfall and CDF plots")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "compare",
        help="two runs side by side with ratios (e.g. diffusion vs autoregressive twin)",
        description="Example: ttfat compare runs/diffusion runs/ar",
    )
    p.add_argument("a", metavar="DIR_A")
    p.add_argument("b", metavar="DIR_B")
    p.set_defaults(func=cmd_compare)

    add_collect_parser(sub)

    p = sub.add_parser(
        "train", help="train the bundled models (see python -m llm.train --help)", add_help=False
    )
    p.add_argument("train_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_train)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from llm.checkpoint import CheckpointError

    try:
        return args.func(args)
    except CheckpointError as e:
        print(f"ttfat: {e}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, RuntimeError) as e:  # AudioDeviceError, model errors
        print(f"ttfat: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
