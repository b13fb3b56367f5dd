"""A Pipecat 1.14 voice agent on a Twilio media stream, the way Pipecat's telephony examples build one, all
offline: FastAPI's WebSocket with `FastAPIWebsocketTransport` and `TwilioFrameSerializer`, Silero VAD,
our bundled Whisper (tiny.en, through Pipecat's `WhisperSTTService`), the bundled Northwind agent's prompt
and tools on our LLM server (through `OpenAILLMService`), and the bundled piper voice (`PiperTTSService`,
pointed at the voice's own folder, so nothing is downloaded). A peer for `ttfat probe`'s tests and for
`bench/probe.py --pipecat`. With `--stall`, it says a stall phrase as each of the caller's turns goes to the
model, and lets the model start `--hold` seconds later, as agents that cover a slow answer do.

    python tests/pipecat_agent.py --llm-url http://127.0.0.1:PORT/v1 [--port 0] [--stall PHRASE ...]

Its first line of output is the ws:// URL it serves.
"""

import argparse
import asyncio
import itertools
import json
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def app(llm_url: str, model: str, stalls: list[str], hold_s: float):
    from fastapi import FastAPI, WebSocket
    from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
    from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
    from pipecat.audio.vad.silero import SileroVADAnalyzer
    from pipecat.frames.frames import LLMContextFrame, TranscriptionFrame, TTSSpeakFrame
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import (
        LLMContextAggregatorPair,
        LLMUserAggregatorParams,
    )
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.runner.utils import parse_telephony_websocket
    from pipecat.serializers.twilio import TwilioFrameSerializer
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.services.piper.tts import PiperTTSService
    from pipecat.services.whisper.stt import WhisperSTTService
    from pipecat.transports.websocket.fastapi import FastAPIWebsocketParams, FastAPIWebsocketTransport

    from asr.whisper import bundled_model
    from llm.agentfile import BUNDLED_AGENT, load_agent_file
    from llm.agentfile.tools import FileTools
    from llm.chat import ToolCall
    from tts.piper import bundled_voice

    spec = load_agent_file(BUNDLED_AGENT)
    tools = FileTools(spec.tools)
    schemas = [
        FunctionSchema(
            f["name"],
            f.get("description", ""),
            f["parameters"].get("properties", {}),
            f["parameters"].get("required", []),
        )
        for f in (t.schema["function"] for t in spec.tools)
    ]
    voice = bundled_voice()
    server = FastAPI()

    class CallerWords(FrameProcessor):
        """The agent file's `caller_words`: the words as the bundled model was trained to read them."""

        async def process_frame(self, frame, direction) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, TranscriptionFrame) and spec.caller_words:
                frame.text = spec.caller_words(frame.text)
            await self.push_frame(frame, direction)

    class Stall(FrameProcessor):
        """A stall phrase as soon as the caller's turn goes to the model, which starts `hold_s` later."""

        def __init__(self) -> None:
            super().__init__()
            self.phrases = itertools.cycle(stalls)

        async def process_frame(self, frame, direction) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, LLMContextFrame) and direction == FrameDirection.DOWNSTREAM:
                await self.push_frame(TTSSpeakFrame(next(self.phrases), append_to_context=False))
                await asyncio.sleep(hold_s)
            await self.push_frame(frame, direction)

    @server.websocket("/")
    async def call(websocket: WebSocket) -> None:
        await websocket.accept()
        _, data = await parse_telephony_websocket(websocket)
        serializer = TwilioFrameSerializer(
            data["stream_id"], data["call_id"], params=TwilioFrameSerializer.InputParams(auto_hang_up=False)
        )
        transport = FastAPIWebsocketTransport(
            websocket,
            FastAPIWebsocketParams(
                audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False, serializer=serializer
            ),
        )
        stt = WhisperSTTService(
            settings=WhisperSTTService.Settings(model=str(bundled_model())), device="cpu", compute_type="int8"
        )
        llm = OpenAILLMService(
            api_key="none", base_url=llm_url, settings=OpenAILLMService.Settings(model=model)
        )

        async def run_tool(params) -> None:
            call = ToolCall(params.function_name, json.dumps(params.arguments), params.tool_call_id)
            messages = [m for m in params.context.get_messages() if isinstance(m, dict)]
            await params.result_callback(await tools.run(call, messages))  # the store checks what was said

        for schema in schemas:
            llm.register_function(schema.name, run_tool)
        tts = PiperTTSService(settings=PiperTTSService.Settings(voice=voice.stem), download_dir=voice.parent)
        context = LLMContext([{"role": "system", "content": spec.system_prompt}], ToolsSchema(schemas))
        pair = LLMContextAggregatorPair(
            context, user_params=LLMUserAggregatorParams(vad_analyzer=SileroVADAnalyzer())
        )
        pipeline = Pipeline(
            [
                transport.input(),
                stt,
                CallerWords(),
                pair.user(),
                *([Stall()] if stalls else []),
                llm,
                tts,
                transport.output(),
                pair.assistant(),
            ]
        )
        task = PipelineTask(
            pipeline, params=PipelineParams(audio_in_sample_rate=16000, audio_out_sample_rate=8000)
        )

        @transport.event_handler("on_client_disconnected")
        async def hung_up(transport, client) -> None:
            await task.cancel()

        await PipelineRunner(handle_sigint=False).run(task)

    return server


def main() -> None:
    import uvicorn

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm-url", required=True)
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--stall", action="append", default=[], metavar="PHRASE", help="said as each turn starts")
    ap.add_argument("--hold", type=float, default=2.0, metavar="S", help="the model starts this much later")
    args = ap.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    sock.listen(16)  # calls wait in the backlog until the app is up
    server = app(args.llm_url, args.model, args.stall, args.hold)
    print(f"ws://127.0.0.1:{sock.getsockname()[1]}/", flush=True)
    config = uvicorn.Config(server, log_level="warning", ws="websockets")
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


if __name__ == "__main__":
    main()
