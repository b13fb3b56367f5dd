"""The agent's LLM over HTTP: any OpenAI-compatible server (ours, vLLM, SGLang, a hosted model),
through the official `openai` client, streaming. Also starts our own server on a free port."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator

from openai import AsyncOpenAI

from llm.agent import Delta
from llm.reply import ToolCall


class OpenAIChat:
    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str = "none",
        extra: dict | None = None,
        max_tokens: int = 64,
        timeout: float = 30.0,
    ):
        self.client = AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=0)
        self.model = model
        self.extra = extra or {}
        self.max_tokens = max_tokens

    async def chat(self, messages: list[dict], tools: list[dict]) -> AsyncIterator[Delta]:
        if self.model is None:
            self.model = (await self.client.models.list()).data[0].id
        stream = await self.client.chat.completions.create(
            model=self.model, messages=messages, tools=tools or None, stream=True, max_tokens=self.max_tokens,
            temperature=0, extra_body=self.extra,
        )  # fmt: skip
        calls: dict[int, ToolCall] = {}
        stats: dict = {}
        async for chunk in stream:
            now = time.monotonic_ns()
            stats = (chunk.model_extra or {}).get("ttfat_timings") or stats
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            reasoning = (delta.model_extra or {}).get("reasoning_content")
            if reasoning:
                yield Delta("reasoning", now, reasoning)
            if delta.content:
                yield Delta("content", now, delta.content)
            for tc in delta.tool_calls or []:
                call = calls.setdefault(
                    tc.index, ToolCall(name="", arguments="", id=tc.id or f"call_{tc.index + 1}")
                )
                if tc.function and tc.function.name:
                    call.name += tc.function.name
                if tc.function and tc.function.arguments:
                    call.arguments += tc.function.arguments
        for call in calls.values():
            yield Delta("tool_call", time.monotonic_ns(), tool_call=call)
        yield Delta("done", time.monotonic_ns(), stats=stats)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`ttfat serve` in its own process on a free port, so a load generator does not share its GIL."""

    def __init__(self, model: str = "bundled", port: int | None = None, dtype: str | None = None,
                 threads: int | None = None):  # fmt: skip
        self.model, self.port, self.dtype, self.threads = model, port or free_port(), dtype, threads

    def __enter__(self) -> str:
        import subprocess
        import sys

        import httpx

        cmd = [sys.executable, "-m", "voice.cli", "serve", "--model", self.model, "--port", str(self.port)]
        cmd += ["--dtype", self.dtype] if self.dtype else []
        cmd += ["--threads", str(self.threads)] if self.threads else []
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1)
                return f"http://127.0.0.1:{self.port}/v1"
            except httpx.HTTPError:
                time.sleep(0.1)
        self.proc.kill()
        raise RuntimeError(f"ttfat serve did not come up on port {self.port}")

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class LocalServer:
    """Our server in a background thread on a free loopback port (`with LocalServer(...) as url:`)."""

    def __init__(self, model: str = "bundled", port: int | None = None, api_key: str | None = None,
                 max_batch: int = 16, limits=None, device: str | None = None):  # fmt: skip
        self.model, self.port, self.api_key = model, port or free_port(), api_key
        self.max_batch, self.limits, self.device = max_batch, limits, device

    def __enter__(self) -> str:
        import uvicorn

        from llm.async_engine import AsyncEngine
        from llm.checkpoint import resolve_model
        from llm.engine import Engine
        from llm.server import create_app

        self.engine = AsyncEngine(
            Engine(resolve_model(self.model), device=self.device, max_batch=self.max_batch)
        )
        app = create_app(self.engine, self.model, self.api_key, self.limits)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the local LLM server did not start on port {self.port}")
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.engine.close()
