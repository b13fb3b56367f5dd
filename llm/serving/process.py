"""Our server on a free loopback port, for commands and tests that need one: `ServerProcess` in its
own process (so a load generator or a voice pipeline does not share its GIL or its threads), and
`LocalServer` in a thread of this process (for tests that look inside the engine)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


class ServerStartError(RuntimeError):
    """The server did not come up; the message carries the end of its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """`with ServerProcess(model_dir) as url:` — `python -m llm.serving.server` on a free port.

    `supervise`: a server that dies while in use is started again on the same port (its requests in
    flight fail, and are recorded as failed by whoever made them; later ones are served again);
    `restarts` counts how often.

    The server ends with this process, however it ends (SIGKILL, out of memory): it holds the read end
    of a pipe whose only write end is ours, and exits when that pipe closes (`watch_parent`)."""

    def __init__(
        self,
        model: str | Path,
        name: str | None = None,
        port: int | None = None,
        dtype: str | None = None,
        threads: int | None = None,
        start_timeout_s: float = 60.0,
        supervise: bool = False,
    ):
        self.model, self.name, self.port = Path(model), name, port or free_port()
        self.dtype, self.threads, self.start_timeout_s = dtype, threads, start_timeout_s
        self.supervise, self.restarts = supervise, 0
        self.closing = threading.Event()
        self.lifeline: int | None = None  # our end of the pipe the server watches

    def __enter__(self) -> str:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (read when it fails, closed on exit)
        url = self._start()
        if self.supervise:
            threading.Thread(target=self._watch, daemon=True, name="server supervisor").start()
        return url

    def _watch(self) -> None:
        while not self.closing.wait(0.2):
            if self.proc.poll() is None:
                continue
            if self.closing.is_set():  # it was stopped on purpose
                return
            print(
                f"ttfat: the LLM server exited (code {self.proc.returncode}); starting it again",
                file=sys.stderr,
                flush=True,
            )
            self._let_go()
            try:
                self._start()
                self.restarts += 1
            except ServerStartError as e:
                print(f"ttfat: {e}", file=sys.stderr, flush=True)
                return

    def _start(self) -> str:
        import httpx

        cmd = [
            sys.executable,
            "-m",
            "llm.serving.server",
            "--model",
            str(self.model),
            "--port",
            str(self.port),
        ]
        cmd += ["--name", self.name] if self.name else []
        cmd += ["--dtype", self.dtype] if self.dtype else []
        cmd += ["--threads", str(self.threads)] if self.threads else []
        read, self.lifeline = os.pipe()  # not inherited by other children: os.pipe's ends are not
        cmd += ["--parent-fd", str(read)]
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log, pass_fds=(read,))
        finally:
            os.close(read)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=1)
                return f"http://127.0.0.1:{self.port}/v1"
            except httpx.HTTPError:
                time.sleep(0.1)
        self.proc.kill()
        self.proc.wait()
        self._let_go()
        self.log.seek(0)
        tail = self.log.read().decode(errors="replace").strip().splitlines()[-5:]
        self.log.close()
        raise ServerStartError(
            f"the LLM server for {self.model} did not come up on port {self.port}"
            + "".join(f"\n  {line}" for line in tail)
        )

    def __exit__(self, *exc) -> None:
        self.closing.set()
        self.proc.terminate()
        self.proc.wait(timeout=10)
        self._let_go()  # after the wait: closed first, it would cut the server's drain short
        self.log.close()

    def _let_go(self) -> None:
        if self.lifeline is not None:
            os.close(self.lifeline)
            self.lifeline = None


class LocalServer:
    """`with LocalServer(model_dir) as url:` — our server in a background thread on a free port."""

    def __init__(
        self,
        model: str | Path,
        name: str | None = None,
        port: int | None = None,
        api_key: str | None = None,
        max_batch: int = 16,
        limits=None,
        device: str | None = None,
    ):
        self.model, self.name, self.port, self.api_key = Path(model), name, port or free_port(), api_key
        self.max_batch, self.limits, self.device = max_batch, limits, device

    def __enter__(self) -> str:
        import uvicorn

        from llm.engine.async_engine import AsyncEngine
        from llm.engine.engine import Engine
        from llm.serving.routes import create_app

        self.engine = AsyncEngine(Engine(self.model, device=self.device, max_batch=self.max_batch))
        app = create_app(self.engine, self.name or self.model.name, self.api_key, self.limits)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise ServerStartError(f"the local LLM server did not start on port {self.port}")
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.engine.close()
