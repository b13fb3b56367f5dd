"""What `replay` and `talk` share: the options of the voice stack (LLM endpoint, turn detection, ASR),
and the stack itself, built from them: the LLM server (started here on a free loopback port unless
--llm-url), the bundled support agent over it, ASR and TTS, and the environment a report must carry."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from asr.whisper import WINDOWS
from llm.knobs import request_fields
from ttfat.decoding import add_decoding_args, decoding_knobs
from voice.pipeline.settings import MODES, Settings, SettingsError, VadConfig


def add_agent_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--agent",
        metavar="FILE",
        help="the agent file: system prompt, tools and their backends, fillers, model, decoding extras "
        "(default: the bundled Northwind agent, llm/support/agent.toml; see docs/agent-files.md)",
    )


def add_stack_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("agent and LLM")
    add_agent_arg(g)
    g.add_argument(
        "--llm-url",
        action="append",
        help="an OpenAI-compatible base URL (default: start our server on a free port); give two or more "
        "for an A/B run: the same recordings against each, calls alternating, and compare's table",
    )
    g.add_argument(
        "--llm-model",
        action="append",
        help="with --llm-url: the model name sent (default: the agent file's, else the endpoint's first; "
        "one per --llm-url, or one for all); without: the model our server runs, bundled (default), "
        "bundled-ar or a checkpoint directory (two or more: an A/B run, one server each)",
    )
    g.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY"),
        help="the endpoint's API key (default: $OPENAI_API_KEY)",
    )
    add_decoding_args(p)
    vad, s = VadConfig, Settings
    g = p.add_argument_group("turn detection, ASR, playback")
    g.add_argument(
        "--vad-aggressiveness",
        type=int,
        default=vad.aggressiveness,
        help="webrtcvad mode 0-3 (default %(default)s)",
    )
    g.add_argument(
        "--vad-frame-ms", type=int, default=vad.frame_ms, help="10, 20 or 30 (default %(default)s)"
    )
    g.add_argument(
        "--vad-start-ms",
        type=int,
        default=vad.start_ms,
        help="voiced window that starts a turn (default %(default)s)",
    )
    g.add_argument(
        "--vad-end-ms",
        type=int,
        default=vad.end_ms,
        help="unvoiced window that ends a turn (default %(default)s)",
    )
    g.add_argument("--asr-model", default="tiny.en", help="tiny.en (bundled), base, or a CTranslate2 dir")
    g.add_argument(
        "--tts-voice",
        metavar="PATH.onnx",
        help="a piper voice (its .onnx.json beside it); default: the bundled voice",
    )
    g.add_argument(
        "--turn-timeout",
        type=float,
        default=s.turn_timeout_s,
        help="seconds from the endpoint to the answer heard (default %(default)s)",
    )
    g.add_argument("--no-barge-in", action="store_true", help="do not stop the agent when the caller speaks")
    g.add_argument(
        "--no-audio",
        action="store_true",
        help="keep no audio of the turns (by default each "
        "turn's caller and answer as heard go into the run directory, for the page)",
    )
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
        "--no-split-first-clause",
        action="store_true",
        help="speak the answer's first clause whole, not split before 'and'/'but' to be heard sooner",
    )
    g.add_argument(
        "--no-stream-speech",
        action="store_true",
        help="play each clause once all its audio is made, not piece by piece as the voice makes it",
    )
    g.add_argument(
        "--no-words-end-turns",
        action="store_true",
        help="do not give a longer end window to words that read like the start of a turn ('Okay.')",
    )
    g.add_argument(
        "--text-turn",
        action="store_true",
        help="also give the longer end window to words the text end-of-turn model finds incomplete "
        "(voice/pipeline/textturn.py; bench/endpointing.py measures it)",
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
        help="Whisper's window: full 30 s, fit to the audio, or auto (fit; words holding a number that may "
        "spell three digits or more are heard again, unless the agent file's numbers_whole says it is whole)",
    )
    g.add_argument(
        "--asr-readings",
        type=int,
        default=10,
        metavar="N",
        help="with --asr-window auto, a number not whole is looked for first among the fitted window's N "
        "likeliest readings (a beam decode, 100-200 ms on 2 cores), and only then heard again at 30 s "
        "(450-600 ms); 0: straight to 30 s (default %(default)s)",
    )


def add_mode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mode",
        choices=MODES,
        default=Settings.mode,
        help="realtime feeds audio at wall-clock pace (faithful); fast skips waiting for audio",
    )
    p.add_argument(
        "--playback-latency-ms",
        type=float,
        default=Settings.playback_latency_ms,
        help="the simulated speaker's output latency (default %(default)s)",
    )


def settings_from_args(args: argparse.Namespace, mode: str, **more) -> Settings:
    vad = VadConfig(args.vad_aggressiveness, args.vad_frame_ms, args.vad_start_ms, end_ms=args.vad_end_ms)
    levers = {
        "speculate": not args.no_speculate,
        "preempt": not (args.no_preempt or args.no_speculate),
        "first_clause_first": not args.no_first_clause_first,
        "split_first_clause": not args.no_split_first_clause,
        "stream_speech": not args.no_stream_speech,
        "words_end_turns": not (args.no_words_end_turns or args.no_speculate),
        "text_turn": args.text_turn,
        "smart_turn": args.smart_turn,
    }
    settings = Settings(
        mode,
        vad,
        args.turn_timeout,
        barge_in=not args.no_barge_in,
        record_audio=not args.no_audio,
        **levers,
        **more,
    )
    settings = settings.serial() if args.serial else settings
    settings.validate()
    return settings


def endpoints(args: argparse.Namespace) -> list[tuple[str | None, str | None]]:
    """(url, model) of each endpoint a run measures, --llm-url and --llm-model paired in order (a url of
    None: our server, started here for that model). More than one: an A/B run."""
    urls, models = args.llm_url or [], args.llm_model or []
    if not urls:
        return [(None, m) for m in models] or [(None, None)]
    if len(models) > 1 and len(models) != len(urls):
        raise SettingsError("give one --llm-model for all --llm-url, or one per --llm-url, in order")
    return [
        (u, models[i] if len(models) > 1 else (models[0] if models else None)) for i, u in enumerate(urls)
    ]


@dataclass
class StackPlan:
    """What `open_stack` will load, found and checked first (`plan_stack`): no model is loaded and no
    server started until every input of the run is known to be usable."""

    spec: object  # the agent file (llm.agentfile.AgentSpec)
    servers: dict[str, Path]  # the model our server is started for, per endpoint without --llm-url


def plan_stack(args: argparse.Namespace) -> StackPlan:
    """Read the agent file and find every model the stack needs; raises the project's one-line errors."""
    from asr.whisper import bundled_model
    from llm.agentfile import BUNDLED_AGENT, load_agent_file
    from llm.serving.models import ModelNotFound, model_dir
    from tts.piper import voice_files

    if args.asr_readings < 0:
        raise SettingsError(f"--asr-readings must be 0 or more, not {args.asr_readings}")
    servers = {}
    for url, model in endpoints(args):
        if url is None:
            path = servers[model or "bundled"] = model_dir(model or "bundled")
            if not (path / "config.json").is_file():
                raise ModelNotFound(
                    f"{path}: not a checkpoint directory (no config.json); --llm-model takes "
                    "bundled, bundled-ar or a checkpoint directory"
                )
    bundled_model(args.asr_model)  # found, not loaded
    voice_files(args.tts_voice)
    return StackPlan(load_agent_file(args.agent or BUNDLED_AGENT), servers)


def open_stack(
    args: argparse.Namespace, stack, settings: Settings, plan: StackPlan, **env_extra
) -> list[tuple[str, object, dict]]:
    """(label, Stages, environment) for each endpoint the run measures (one, or several for an A/B run;
    they share the ASR and TTS); servers it starts are closed with `stack`."""
    from dataclasses import asdict

    from asr.whisper import Transcriber
    from llm.serving.client import OpenAIChat, check_endpoint, server_info
    from llm.serving.models import served_name
    from llm.serving.process import ServerProcess
    from tts.piper import Synthesizer
    from voice.pipeline.endpointing import SmartTurn
    from voice.pipeline.stages import Stages
    from voice.record.environment import environment

    spec = plan.spec
    extra = request_fields({**spec.decoding, **decoding_knobs(args)})  # the command line wins
    tools = [t.schema for t in spec.tools]
    transcriber = Transcriber(
        args.asr_model,
        window="full" if args.serial else args.asr_window,
        numbers_whole=spec.numbers_whole,
        nbest=args.asr_readings,
    )
    synthesizer = Synthesizer(args.tts_voice)
    turn_model = SmartTurn() if settings.smart_turn else None
    asr = {
        "model": str(transcriber.path),
        "device": transcriber.device,
        "compute": transcriber.compute_type,
        "window": transcriber.window,
        "numbers_whole": getattr(spec.numbers_whole, "__qualname__", None),
        "readings": transcriber.nbest,
    }
    arms, labels = [], set()
    for url, model in endpoints(args):
        given = url
        if url is None:
            local = model or "bundled"
            print(f"ttfat: starting the LLM server ({local}) on a free loopback port", file=sys.stderr)
            url = stack.enter_context(ServerProcess(plan.servers[local], served_name(local), supervise=True))
            model = served_name(local)
        model = check_endpoint(url, model or spec.model, tools, args.api_key)
        chat = OpenAIChat(url, model=model, api_key=args.api_key, extra=extra)
        ours = server_info(url)
        llm = {
            "url": given or f"our server at {url} (started by ttfat)",
            "model": model,
            "max_tokens": extra.get("max_tokens", "the endpoint's default"),
            "sent with each request": extra or "nothing",
            "server decoding defaults": ours["decoding"] if ours else "not reported by the endpoint",
        }
        env = environment(
            agent=spec.describe(),
            llm=llm,
            asr=asr,
            tts={"voice": str(synthesizer.path)},
            settings=asdict(settings),
            **env_extra,
        )
        label = _label(model, labels)
        arms.append((label, Stages(transcriber, spec.agent(chat), synthesizer, turn_model), env))
    return arms


def _label(model: str, taken: set[str]) -> str:
    """A folder-safe name for an endpoint's run directory, unique within the run."""
    import re

    base = re.sub(r"[^A-Za-z0-9._-]+", "-", model.rsplit("/", 1)[-1]).strip("-") or "endpoint"
    label, n = base, 1
    while label in taken:
        n += 1
        label = f"{base}-{n}"
    taken.add(label)
    return label


def add_mirror_args(p: argparse.ArgumentParser) -> None:
    """Where else the events and records go: MQTT, OpenTelemetry."""
    from voice.record.mqtt import add_mqtt_args
    from voice.record.otlp import add_otlp_args

    add_mqtt_args(p)
    add_otlp_args(p.add_argument_group("OpenTelemetry (each turn a trace, in Jaeger, Tempo, Langfuse...)"))


def mirrors_from_args(args: argparse.Namespace, run_id: str, env: dict) -> list:
    """The MQTT publisher and the trace exporter the options ask for (either, both or none)."""
    from voice.record.mqtt import publisher_from_args
    from voice.record.otlp import exporter_from_args

    mirrors = (publisher_from_args(args, run_id, env), exporter_from_args(args, run_id, env))
    return [m for m in mirrors if m is not None]
