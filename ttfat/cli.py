"""The `ttfat` command: one module per subcommand (`ttfat/commands/`), each with `add_parser` (its
options, whose defaults come from the dataclasses they set) and `run` (the work, imported when the
command runs, so `--help` stays fast and the voice process never loads what it does not use)."""

from __future__ import annotations

import argparse
import sys

from llm.support.models import register_bundled
from ttfat.commands import (
    ask,
    bench_llm,
    collect,
    compare,
    eval_llm,
    generate,
    manifest,
    probe,
    replay,
    report,
    serve,
    serve_agent,
    talk,
    train,
)

COMMANDS = (
    replay,
    report,
    compare,
    manifest,
    talk,
    serve_agent,
    probe,
    collect,
    serve,
    ask,
    generate,
    bench_llm,
    eval_llm,
    train,
)


class Parser(argparse.ArgumentParser):
    """A mistake on the command line is one line, like every other mistake (not the usage screen)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ttfat",
        description="Measure how long a caller waits for a useful answer from a voice agent built on\n"
        "a local diffusion LLM, and how much of that wait is the model.",
        epilog="start here:\n"
        "  ttfat replay recordings/ --out runs/mine  # the sample calls, then the report\n"
        "  ttfat report runs/mine --html page.html   # the page: every turn, its audio\n"
        "  ttfat probe ws://HOST/PATH recordings/    # any voice agent, from outside\n"
        "\n"
        "the commands by task:\n"
        "  our voice pipeline        replay, report, compare, manifest, talk, collect\n"
        "  any agent, from outside   probe, serve-agent\n"
        "  the LLM alone             serve, ask, generate, bench-llm, eval-llm, train\n"
        "\n"
        "ttfat COMMAND --help shows a command's options and examples. More in docs/:\n"
        "commands.md (every command), agent-files.md (your own agent), probe.md (an\n"
        "agent from outside), timing.md (what is measured, from when).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


def user_errors() -> tuple[type[Exception], ...]:
    """The project's own errors: each message says what to do, so they print as one line. Anything else
    is a bug and keeps its traceback. (All torch-free modules.)"""
    from asr.whisper import AsrModelError
    from llm.agentfile import AgentFileError
    from llm.engine.errors import CheckpointError, DecodingError
    from llm.serving.client import EndpointError
    from llm.serving.models import ModelNotFound
    from llm.serving.process import ServerStartError
    from tts.piper import VoiceError
    from voice.pipeline.audio import AudioError
    from voice.pipeline.settings import SettingsError
    from voice.record.runlog import RunDirError
    from voice.runs.live import AudioDeviceError
    from voice.runs.probe.session import ProbeConnectError
    from voice.runs.replay import ManifestError
    from voice.runs.telephony import WireError

    return (
        AsrModelError,
        AgentFileError,
        CheckpointError,
        DecodingError,
        EndpointError,
        ServerStartError,
        ModelNotFound,
        VoiceError,
        AudioError,
        AudioDeviceError,
        ManifestError,
        RunDirError,
        SettingsError,
        ProbeConnectError,
        WireError,
    )


def main(argv: list[str] | None = None) -> int:
    register_bundled()  # the names bundled and bundled-ar, wherever a command takes a model
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if hasattr(args, "train_args"):  # `ttfat train` passes on all it gets (REMAINDER misses a leading --x)
        args.train_args = rest + args.train_args
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        return args.func(args)
    except Exception as e:
        if not isinstance(e, user_errors()):
            raise
        print(f"ttfat: {e}", file=sys.stderr)
        return 2
