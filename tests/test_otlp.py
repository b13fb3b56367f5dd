"""OpenTelemetry export (voice/record/otlp.py): a replay sends each turn as a trace to a real OTLP/HTTP
receiver started here; the protobuf it receives is decoded and checked against turns.jsonl."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from llm.serving.process import free_port
from tests.test_pipeline import models, server, speech_file, stages  # noqa: F401 (fixtures)
from voice.pipeline.settings import Settings
from voice.record.otlp import OtlpError, TraceExporter, exporter_from_args, traces_url
from voice.record.runlog import read_run
from voice.runs.replay import find_calls, run

RECORDINGS = Path(__file__).resolve().parents[1] / "recordings"


class Receiver:
    """An OTLP/HTTP trace receiver on a free port: it keeps the spans of every request to /v1/traces."""

    def __init__(self):
        received, paths = [], []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                paths.append(self.path)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                received.append(request)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.received, self.paths = received, paths
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_port}"

    def spans(self) -> list:
        out = []
        for request in self.received:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    out += list(scope.spans)
        return out

    def resource(self) -> dict:
        resource = self.received[0].resource_spans[0].resource
        return {a.key: _value(a.value) for a in resource.attributes}

    def close(self):
        self.http.shutdown()


def _value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind)


def attrs(span) -> dict:
    return {a.key: _value(a.value) for a in span.attributes}


def replay_with(exporter, models, server, tmp_path, paths) -> tuple[list[dict], dict]:  # noqa: F811
    calls = find_calls([str(p) for p in paths])
    asyncio.run(run(calls, stages(models, server), Settings("fast"), tmp_path / "run", 1, {}, [exporter]))
    return read_run(tmp_path / "run")


def test_each_turn_is_a_trace_of_its_stages_on_the_run_logs_times(tmp_path, models, server):  # noqa: F811
    receiver = Receiver()
    try:
        exporter = TraceExporter(receiver.url, "r1", environment={"mode": "fast"})
        records, _ = replay_with(exporter, models, server, tmp_path, [RECORDINGS / "call03.wav"])
    finally:
        receiver.close()
    assert set(receiver.paths) == {"/v1/traces"}
    assert receiver.resource()["service.name"] == "ttfat" and receiver.resource()["ttfat.run"] == "r1"
    traces = defaultdict(list)
    for span in receiver.spans():
        traces[span.trace_id].append(span)
    assert len(traces) == len(records) == 3  # one trace per turn, nothing else
    by_turn = {}
    for spans in traces.values():
        (root,) = [s for s in spans if not s.parent_span_id]
        assert all(s.parent_span_id == root.span_id for s in spans if s is not root)  # one level: stages
        by_turn[attrs(root)["ttfat.turn"]] = (root, [s for s in spans if s is not root])
    tools_seen = 0
    for record in records:
        root, children = by_turn[record["turn"]]
        a = attrs(root)
        assert root.name == f"turn {record['call']}:{record['turn']}"
        assert a["ttfat.status"] == record["status"] and a["ttfat.transcript"] == record["transcript"]
        assert a["ttfat.ttfat_ms"] == pytest.approx(record["ttfat_ms"])
        assert a["ttfat.first_useful_audio_ms"] == pytest.approx(record["first_useful_audio_ms"])
        events = {e.name: e.time_unix_nano for e in root.events}

        def ms(t_ns: int) -> float:
            return (t_ns - events["t0"]) / 1e6  # noqa: B023

        assert ms(events["first_useful_audio_heard"]) == pytest.approx(
            record["first_useful_audio_ms"], abs=1e-3
        )
        names = [s.name for s in children]
        (endpointing,) = [s for s in children if s.name == "endpointing"]
        assert ms(endpointing.end_time_unix_nano) == pytest.approx(record["endpoint_ms"], abs=1e-3)
        assert ms(endpointing.start_time_unix_nano) == pytest.approx(0, abs=1e-3)
        kept = [s for s in children if s.name == "asr" and attrs(s).get("ttfat.kept", True)]
        assert kept and attrs(kept[-1])["ttfat.text"] == record["transcript"]
        chats = sorted(
            (s for s in children if s.name.startswith("chat ")), key=lambda s: s.start_time_unix_nano
        )
        assert len(chats) == len(record["llm_calls"]) >= 1
        for span, call in zip(chats, record["llm_calls"], strict=True):
            c = attrs(span)
            assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.request.model"] == call["model"]
            assert ms(span.start_time_unix_nano) == pytest.approx(call["request_ms"], abs=1e-3)
            duration = (span.end_time_unix_nano - span.start_time_unix_nano) / 1e6
            assert duration == pytest.approx(call["done_ms"], abs=1e-3)
            assert c["ttfat.server.prefill_ms"] == call["server"]["prefill_ms"]  # the server's own timings
        tools = [s for s in children if s.name.startswith("execute_tool ")]
        assert [attrs(s)["gen_ai.tool.name"] for s in tools] == [t["name"] for t in record["tool_calls"]]
        tools_seen += len(tools)
        assert "tts" in names and "playback" in names
        for span in children:
            assert root.start_time_unix_nano <= span.start_time_unix_nano <= span.end_time_unix_nano
            assert span.end_time_unix_nano <= root.end_time_unix_nano
    assert tools_seen >= 2  # call03 looks up an order twice


def test_an_unreachable_collector_warns_once_and_the_run_loses_nothing(tmp_path, models, server, capsys):  # noqa: F811
    path = speech_file(models, tmp_path / "a.wav", ["hello", "what time do you open on saturday"])
    exporter = TraceExporter(f"http://127.0.0.1:{free_port()}", "r2", timeout_s=1.0)
    start = time.monotonic()
    records, summary = replay_with(exporter, models, server, tmp_path, [path])
    assert time.monotonic() - start < 60
    err = capsys.readouterr().err
    assert err.count("OTLP collector") == 1 and "not reachable" in err
    assert "spans not delivered" in err
    assert len(records) == 2 and summary["turns"] == 2


def test_the_collector_url_is_a_base_url_as_the_standard_variable_is(monkeypatch):
    assert traces_url("http://collector:4318") == "http://collector:4318/v1/traces"
    assert traces_url("http://collector:4318/") == "http://collector:4318/v1/traces"
    with pytest.raises(OtlpError, match="base URL"):
        traces_url("collector:4318")

    class Args:
        otlp = None

    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    assert exporter_from_args(Args(), "r") is None  # nothing asked, nothing sent
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://otel.example:4318")
    assert exporter_from_args(Args(), "r").url == "http://otel.example:4318/v1/traces"
