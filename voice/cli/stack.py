"""What `replay` and `talk` share: the options of the voice stack (LLM endpoint, turn detection, ASR),
and the stack itself, built from them: the LLM server (started here on a free loopback port unless
--llm-url), the bundled support agent over it, ASR and TTS, and the environment a report must carry."""

from __future__ import annotations

import argparse
import sys

from asr.whisper import WINDOWS
from voice.settings import MODES, Settings, VadConfig


def add_stack_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("LLM")
    g.add_argument(
        "--llm-url", help="an OpenAI-compatible base URL; default: start our server on a free port"
    )
    g.add_argument(
        "--llm-model",
        default="bundled",
        help="model for the local server: bundled, bundled-ar or a checkpoint directory",
    )
    g.add_argument("--api-key", help="the endpoint's API key")
    g.add_argument("--max-tokens", type=int, help="answer token budget (default: the endpoint's; ours: 64)")
    g.add_argument("--threshold", type=float, help="decoding threshold sent with each request")
    g.add_argument("--steps", type=int, help="denoising steps sent with each request")
    g.add_argument("--block-length", type=int, help="block length sent with each request")
    vad, s = VadConfig, Settings
    g = p.add_argument_group("turn detection, ASR, playback")
    g.add_argument("--vad-aggressiveness", type=int, default=vad.aggressiveness,
                   help="webrtcvad mode 0-3 (default %(default)s)")  # fmt: skip
    g.add_argument(
        "--vad-frame-ms", type=int, default=vad.frame_ms, help="10, 20 or 30 (default %(default)s)"
    )
    g.add_argument("--vad-start-ms", type=int, default=vad.start_ms,
                   help="voiced window that starts a turn (default %(default)s)")  # fmt: skip
    g.add_argument("--vad-end-ms", type=int, default=vad.end_ms,
                   help="unvoiced window that ends a turn (default %(default)s)")  # fmt: skip
    g.add_argument("--asr-model", default="tiny.en", help="tiny.en (bundled), base, or a CTranslate2 dir")
    g.add_argument("--turn-timeout", type=float, default=s.turn_timeout_s,
                   help="seconds from the endpoint to the answer heard (default %(default)s)")  # fmt: skip
    g.add_argument("--no-barge-in", action="store_true", help="do not stop the agent when the caller speaks")
    g = p.add_argument_group("overlapped stages (default: all but --smart-turn; --serial turns them all off)")
    g.add_argument("--serial", action="store_true", help="the stages one after another, as before overlap")
    g.add_argument(
        "--no-speculate", action="store_true", help="do not transcribe in the silence before the endpoint"
    )
    g.add_argument("--no-preempt", action="store_true", help="do not start the answer before the endpoint")
    g.add_argument(
        "--no-first-clause-first",
        action="store_true",
        help="speak words at once, before their LLM call has shown whether it answers",
    )
    g.add_argument(
        "--no-words-end-turns",
        action="store_true",
        help="do not give a longer end window to words that read like the start of a turn ('Okay.')",
    )
    g.add_argument(
        "--smart-turn",
        action="store_true",
        help="end complete turns on a pause and wait on incomplete ones (Smart Turn v3.2)",
    )
    g.add_argument(
        "--asr-window",
        choices=WINDOWS,
        default="auto",
        help="Whisper's window: full 30 s, fit to the audio, or auto (fit, 30 s for numbers)",
    )


def add_mode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        choices=MODES,
        default=Settings.mode,
        help="realtime feeds audio at wall-clock pace (faithful); fast skips waiting for audio",
    )
    p.add_argument("--playback-latency-ms", type=float, default=Settings.playback_latency_ms,
                   help="the simulated speaker's output latency (default %(default)s)")  # fmt: skip


def settings_from_args(args: argparse.Namespace, mode: str, **more) -> Settings:
    vad = VadConfig(args.vad_aggressiveness, args.vad_frame_ms, args.vad_start_ms, end_ms=args.vad_end_ms)
    levers = {
        "speculate": not args.no_speculate,
        "preempt": not (args.no_preempt or args.no_speculate),
        "first_clause_first": not args.no_first_clause_first,
        "words_end_turns": not (args.no_words_end_turns or args.no_speculate),
        "smart_turn": args.smart_turn,
    }
    settings = Settings(mode, vad, args.turn_timeout, barge_in=not args.no_barge_in, **levers, **more)
    settings = settings.serial() if args.serial else settings
    settings.validate()
    return settings


def open_stack(args: argparse.Namespace, stack, settings: Settings, **env_extra):
    """(Stages, environment) for a run; servers it starts are closed with `stack`."""
    from dataclasses import asdict

    from asr.whisper import Transcriber
    from llm.serving.client import OpenAIChat, server_info
    from llm.serving.process import ServerProcess
    from llm.support.models import model_dir, served_name
    from llm.support.tools import store_agent
    from tts.piper import Synthesizer
    from voice.endpointing import SmartTurn
    from voice.environment import environment
    from voice.stages import Stages

    knobs = {k: v for k, v in [("threshold", args.threshold), ("steps", args.steps),
                               ("block_length", args.block_length)] if v is not None}  # fmt: skip
    url = args.llm_url
    if url is None:
        print(f"ttfat: starting the LLM server ({args.llm_model}) on a free loopback port", file=sys.stderr)
        url = stack.enter_context(ServerProcess(model_dir(args.llm_model), served_name(args.llm_model)))
    chat = OpenAIChat(url, api_key=args.api_key, extra=knobs, max_tokens=args.max_tokens)
    transcriber = Transcriber(args.asr_model, window="full" if args.serial else args.asr_window)
    turn_model = SmartTurn() if settings.smart_turn else None
    stages = Stages(transcriber, store_agent(chat), Synthesizer(), turn_model)
    ours = server_info(url)
    llm = {
        "url": args.llm_url or f"our server, model {args.llm_model} (started by ttfat)",
        "model": ours["model"] if ours else "the endpoint's first",
        "max_tokens": args.max_tokens or "the endpoint's default",
        "sent with each request": knobs or "nothing",
        "server decoding defaults": ours["decoding"] if ours else "not reported by the endpoint",
    }
    env = environment(
        llm=llm,
        asr={
            "model": str(transcriber.path),
            "device": transcriber.device,
            "compute": transcriber.compute_type,
        },
        tts={"voice": str(stages.synthesizer.path)},
        settings=asdict(settings),
        **env_extra,
    )
    return stages, env
