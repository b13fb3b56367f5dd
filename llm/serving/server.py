"""The server process: one model directory behind the OpenAI-compatible API (FastAPI on uvicorn with
httptools and uvloop). `ttfat serve` runs it for a user; `python -m llm.serving.server --model DIR`
is how other processes start it (`ServerProcess`). Both take the options of `add_arguments`, whose
defaults are those of `ServerConfig` and `Limits`."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path

from llm.serving.requests import Limits


@dataclass
class ServerConfig:
    model: Path  # a checkpoint directory
    name: str = ""  # the model id announced in /v1/models (default: the directory's name)
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    device: str | None = None  # default: cuda when available
    dtype: str | None = None  # default: bfloat16 on CUDA, float32 on CPU
    threads: int | None = None  # default: half the cores (the rest for the event loop, ASR and TTS)
    max_batch: int = 16
    limits: Limits = field(default_factory=Limits)
    drain_s: float = 10.0  # on SIGTERM: requests under way get this long to finish, then are cancelled


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Every option but --model (its meaning differs: `ttfat serve` also takes bundled names)."""
    p.add_argument("--name", help="model id announced in /v1/models (default: the model's name)")
    p.add_argument("--host", default=ServerConfig.host, help="bind address (default %(default)s)")
    p.add_argument("--port", type=int, default=ServerConfig.port, help="(default %(default)s)")
    p.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    p.add_argument("--device", help="cuda or cpu (default: cuda when available)")
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        help="weights and activations (default: bfloat16 on CUDA, float32 on CPU; on CPUs with AMX "
        "bfloat16 makes batched steps cheaper, at answers not checked against the fp32 evaluation; on CPUs "
        "without bf16 hardware it is emulated and slower, and the server says so)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads for the model (default: half the cores, leaving the rest to the event loop and, "
        "in a voice stack, to ASR and TTS on the same machine)",
    )
    p.add_argument(
        "--max-batch",
        type=int,
        default=ServerConfig.max_batch,
        help="requests decoded together (default %(default)s)",
    )
    p.add_argument(
        "--max-concurrent",
        type=int,
        default=Limits.max_concurrent,
        help="open requests before 429 (default %(default)s)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=Limits.max_tokens,
        help="largest max_tokens accepted (default %(default)s)",
    )
    p.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=Limits.max_prompt_tokens,
        help="longest prompt accepted (default %(default)s)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=int,
        default=Limits.max_body_bytes,
        help="largest request body accepted; larger gets 413 (default %(default)s)",
    )
    p.add_argument(
        "--drain-s",
        type=float,
        default=ServerConfig.drain_s,
        help="on SIGTERM, seconds requests under way get (default %(default)s)",
    )


def config_from_args(args: argparse.Namespace, model: Path, name: str) -> ServerConfig:
    limits = Limits(args.max_prompt_tokens, args.max_tokens, args.max_concurrent, args.max_body_bytes)
    return ServerConfig(
        model,
        args.name or name,
        args.host,
        args.port,
        args.api_key,
        args.device,
        args.dtype,
        args.threads,
        args.max_batch,
        limits,
        args.drain_s,
    )


def slow_dtype(device: str, dtype: str | None) -> str | None:
    """Why the requested dtype will be slow here, or None: bfloat16 on hardware that does not compute in
    it is emulated (a reply of the bundled model took 2.3 times as long as in float32 on an AVX2-only
    AMD EPYC)."""
    from llm.engine.checkpoint import native_bf16

    if dtype == "bfloat16" and not native_bf16(device):
        return f"--dtype bfloat16: this {device} has no bf16 hardware; emulated, bf16 is slower than float32"
    return None


def serve(config: ServerConfig) -> None:
    import logging

    import torch
    import uvicorn

    from llm.engine.async_engine import AsyncEngine
    from llm.engine.engine import Engine
    from llm.serving.routes import create_app

    torch.set_num_threads(config.threads or max(1, (os.cpu_count() or 2) // 2))
    dtype = config.dtype and getattr(torch, config.dtype)
    engine = AsyncEngine(Engine(config.model, device=config.device, dtype=dtype, max_batch=config.max_batch))
    app = create_app(engine, config.name or config.model.name, config.api_key, config.limits)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if warning := slow_dtype(engine.engine.model.device.type, config.dtype):  # the device it loaded on
        logging.getLogger("ttfat.server").warning(warning)
    # SIGTERM: uvicorn stops accepting, lets requests under way finish for drain_s, then cancels them
    uvicorn.run(
        app, host=config.host, port=config.port, log_level="warning", timeout_graceful_shutdown=config.drain_s
    )


def watch_parent(fd: int) -> None:
    """Exit when the pipe `fd` reads end-of-file: its write end belongs to the process that started us
    (`ServerProcess`), and the kernel closes it however that process ends, SIGKILL included."""
    import threading

    def wait() -> None:
        while os.read(fd, 1):  # the parent never writes; a byte would be no reason to stop
            pass
        os._exit(0)  # nobody is left to answer: no drain

    threading.Thread(target=wait, daemon=True, name="parent watch").start()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m llm.serving.server", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", type=Path, required=True, help="checkpoint directory")
    p.add_argument("--parent-fd", type=int, help="exit when this pipe closes (the parent ended)")
    add_arguments(p)
    args = p.parse_args(argv)
    if args.parent_fd is not None:
        watch_parent(args.parent_fd)  # before the model loads, which takes seconds
    serve(config_from_args(args, args.model, args.model.name))


if __name__ == "__main__":
    main()
