"""OpenTelemetry traces of every turn (`--otlp URL`, or the standard OTEL_EXPORTER_OTLP_ENDPOINT): one
trace per turn, one span per stage, on the call's clock, posted over OTLP/HTTP to URL/v1/traces.

The spans are built from the turn's timeline events when its `turn_done` arrives, so they carry the
times the run log holds (the log stays the source of truth): the turn from the caller's first word to
its end; endpointing (t0 to the endpoint); every ASR run (speculative ones too, kept or discarded);
every LLM call as a GenAI `chat` span with the server's own timings; every tool as `execute_tool`;
the synthesis of every clause; playback. The root span carries TTFAT, first useful audio heard and
the LLM's share as attributes, so a tracing UI can sort and filter turns by them.

A collector that cannot be reached is warned about once; the run goes on and its log is complete.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from urllib.parse import urlsplit

from llm.clock import ns
from voice.timing.timeline import Event, Timeline

ENV_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


class OtlpError(RuntimeError):
    """The OpenTelemetry SDK is missing, or the URL cannot be a collector's."""


def traces_url(base: str) -> str:
    """URL/v1/traces, as OTEL_EXPORTER_OTLP_ENDPOINT is read (a base URL, the signal path appended)."""
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise OtlpError(f"--otlp takes a collector's base URL such as http://localhost:4318, not {base!r}")
    return base.rstrip("/") + "/v1/traces"


class TraceExporter:
    """A run log mirror (voice/record/runlog.py): `async with TraceExporter(url, run_id) as traces:`, then
    `traces.observe(timeline)` per call. `url` None: the standard environment variables decide."""

    def __init__(
        self, url: str | None, run_id: str = "run", *, environment: dict | None = None, timeout_s: float = 5.0
    ):
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError as e:
            raise OtlpError(
                f"OpenTelemetry is not installed ({e}): pip install opentelemetry-sdk "
                "opentelemetry-exporter-otlp-proto-http"
            ) from e
        self.url = (
            traces_url(url) if url else os.environ.get(ENV_VARS[0]) or traces_url(os.environ[ENV_VARS[1]])
        )
        env = environment or {}
        resource = Resource.create(
            {
                "service.name": "ttfat",
                "ttfat.run": run_id,
                **{f"ttfat.{k}": str(v) for k, v in env.items() if isinstance(v, str | int | float | bool)},
            }
        )
        self.exporter = _WarnOnce(OTLPSpanExporter(endpoint=self.url, timeout=timeout_s), self.url)
        self.provider = TracerProvider(resource=resource)
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter, schedule_delay_millis=500))
        self.tracer = self.provider.get_tracer("ttfat")
        # the exporter's own retries log a traceback per batch; _WarnOnce says it once, in one line
        logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter").setLevel(logging.CRITICAL)
        logging.getLogger("opentelemetry.sdk.trace.export").setLevel(logging.CRITICAL)

    async def __aenter__(self) -> TraceExporter:
        return self

    async def __aexit__(self, exc_type, exc, tb) -> None:
        import asyncio

        await asyncio.to_thread(self.provider.shutdown)  # flushes; bounded by the exporter's timeout
        if self.exporter.lost:
            print(
                f"ttfat: OTLP: {self.exporter.lost} spans not delivered to {self.url} "
                "(the local run log is complete)",
                file=sys.stderr,
            )

    def observe(self, timeline: Timeline) -> None:
        """Export each turn of this call as a trace once its `turn_done` arrives."""
        events: dict[int, list[Event]] = defaultdict(list)
        # the call's clock (monotonic, plus the waits fast replay skipped) to the Unix epoch
        offset = time.time_ns() - timeline.clock()

        def on_event(event: Event) -> None:
            if event.turn < 0:
                return
            events[event.turn].append(event)
            if event.name == "turn_done":
                record = timeline.turns[event.turn].to_dict()
                self._export(record, sorted(events.pop(event.turn), key=lambda e: e.t_ns), offset)

        timeline.observers.append(on_event)

    def publish_records(self, records: list[dict]) -> None:
        """Turns that never ran through a timeline (an unreadable file): a root span at this moment, so
        failures show up where the timed turns do."""
        now = time.time_ns()
        for record in records:
            attributes = {**_turn_attributes(record), "ttfat.timed": False}
            span = self.tracer.start_span("turn", context=_root(), start_time=now, attributes=attributes)
            _set_status(span, record)
            span.end(end_time=now)

    def end(self, summary: dict | None) -> None:
        pass  # the summary is the run log's; each trace went out with its turn

    def _export(self, record: dict, events: list[Event], offset: int) -> None:
        from opentelemetry import trace

        def at(t_ns: int) -> int:
            return t_ns + offset

        def last(name: str) -> Event | None:
            return next((e for e in reversed(events) if e.name == name), None)

        start = next((e for e in events if e.name == "speech_start"), events[0])
        done = last("turn_done")
        name, attributes = f"turn {record['call']}:{record['turn']}", _turn_attributes(record)
        root = self.tracer.start_span(name, context=_root(), start_time=at(start.t_ns), attributes=attributes)
        _set_status(root, record)
        parent = trace.set_span_in_context(root)

        ends = [done.t_ns]
        # A turn the caller went on with after its endpoint restarts there: the answer dropped then, and
        # the first t0 and endpoint, belong to no record (its ASR attempts stay, kept or not)
        resumed = max((i for i, e in enumerate(events) if e.name == "turn_resumed"), default=-1)
        answer = events[resumed + 1 :]

        def span(name: str, a: int, b: int, attributes: dict, kind=trace.SpanKind.INTERNAL, marks=()) -> None:
            """A stage of the turn, from `a` to `b` on the call's clock, with (name, t_ns) events."""
            s = self.tracer.start_span(
                name, context=parent, start_time=at(a), attributes=attributes, kind=kind
            )
            for mark, t_ns in marks:
                s.add_event(mark, timestamp=at(t_ns))
            s.end(end_time=at(b))
            ends.append(b)

        t0, endpoint = last("t0"), last("endpoint")
        if t0 and endpoint:
            span("endpointing", t0.t_ns, endpoint.t_ns, {"ttfat.cut": endpoint.data.get("cut")})
        self._asr_spans(events, endpoint, span)
        for e in answer:
            if e.name == "llm_call":
                self._llm_span(e, span)
        starts = [e for e in answer if e.name == "tool_start"]
        for begin, end in zip(starts, [e for e in answer if e.name == "tool_end"], strict=False):
            tool = begin.data["tool"]
            span(
                f"execute_tool {tool}",
                begin.t_ns,
                end.t_ns,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": tool,
                    "gen_ai.tool.call.arguments": begin.data.get("arguments") or "",
                },
            )
        for e in answer:
            if e.name == "clause" and e.data.get("synth_ns") is not None:
                attributes = {"ttfat.text": e.data["text"], "ttfat.filler": bool(e.data.get("filler"))}
                span("tts", e.data["synth_ns"], e.t_ns, attributes)
        heard, heard_end, barge = last("first_audio_heard"), last("last_audio_heard"), last("barge_in")
        if heard:
            end = barge.data.get("stopped_ns", barge.t_ns) if barge else heard_end.t_ns if heard_end else None
            if end is not None:
                span("playback", heard.t_ns, max(end, heard.t_ns), {"ttfat.barge_in": bool(barge)})
        for e in answer:  # the anchors, as events on the turn's span
            if e.name in (
                "t0",
                "endpoint",
                "asr_final",
                "first_answer_token",
                "first_useful_token",
                "first_audio_heard",
                "first_useful_audio_heard",
                "barge_in",
            ):
                root.add_event(e.name, timestamp=at(e.t_ns))
        # fast replay places audio when it is queued, so the answer may be heard after the turn's task ended
        root.end(end_time=at(max(ends)))

    @staticmethod
    def _asr_spans(events: list[Event], endpoint: Event | None, span) -> None:
        """One span per ASR run: at the endpoint (serial), or each attempt made on a pause."""
        kept = {e.data["attempt"] for e in events if e.name == "attempt_kept"}
        discarded = {e.data["attempt"]: e.data.get("reason") for e in events if e.name == "attempt_discarded"}
        for begin in (e for e in events if e.name == "asr_spec_start"):
            n = begin.data["attempt"]
            final = next((e for e in events if e.name == "asr_spec_final" and e.data["attempt"] == n), None)
            if final is None:
                continue  # dropped before it reached the model
            attributes = {
                "ttfat.attempt": n,
                "ttfat.speculative": True,
                "ttfat.kept": n in kept,
                "ttfat.text": final.data.get("text", ""),
                "ttfat.audio_s": begin.data.get("audio_s"),
            }
            if n in discarded:
                attributes["ttfat.discarded"] = discarded[n]
            span("asr", begin.t_ns, final.t_ns, attributes)
        asr_final = next((e for e in reversed(events) if e.name == "asr_final"), None)
        if not kept and endpoint and asr_final and asr_final.t_ns >= endpoint.t_ns:
            attributes = {"ttfat.speculative": False, "ttfat.text": asr_final.data.get("text", "")}
            span("asr", endpoint.t_ns, asr_final.t_ns, attributes)

    @staticmethod
    def _llm_span(e: Event, span) -> None:
        """A GenAI client span (OpenTelemetry semantic conventions), with the server's timings."""
        from opentelemetry import trace

        d, url = e.data, urlsplit(e.data.get("endpoint") or "")
        request = d["request_ns"]
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "ttfat",
            "gen_ai.request.model": d.get("model") or "",
            "server.address": url.hostname or "",
            "gen_ai.response.finish_reasons": ["tool_calls" if d.get("tools") else "stop"],
            "ttfat.round": d.get("round"),
            "ttfat.answered": bool(d.get("answered")),
            **{f"ttfat.{k}": d.get(k) for k in ("first_token_ms", "first_content_ms", "http_overhead_ms")},
            **{f"ttfat.server.{k}": v for k, v in (d.get("server") or {}).items()},
        }
        if url.port:
            attributes["server.port"] = url.port
        attributes = {k: v for k, v in attributes.items() if v is not None}
        end = request + ns(d.get("done_ms") or 0)
        first = d.get("first_token_ms")
        marks = [] if first is None else [("first_token", request + ns(first))]
        span(f"chat {d.get('model') or ''}".strip(), request, end, attributes, trace.SpanKind.CLIENT, marks)


def _root():
    """An empty context: the span it starts is a new trace's root."""
    from opentelemetry.context import Context

    return Context()


def _turn_attributes(record: dict) -> dict:
    keys = (
        "ttfat_ms",
        "first_useful_audio_ms",
        "endpoint_ms",
        "asr_ms",
        "first_audio_ms",
        "complete_ms",
        "llm_share",
        "llm_wait_ms",
    )
    attributes = {
        "ttfat.call": record["call"],
        "ttfat.turn": record["turn"],
        "ttfat.status": record["status"],
        "ttfat.transcript": record.get("transcript") or "",
        "ttfat.answer": record.get("answer") or "",
        "ttfat.speculative": bool(record.get("speculative")),
        **{f"ttfat.{k}": record[k] for k in keys if record.get(k) is not None},
    }
    if record.get("error"):
        attributes["ttfat.error"] = record["error"]
    return attributes


def _set_status(span, record: dict) -> None:
    from opentelemetry.trace import Status, StatusCode

    if record["status"] != "ok":
        span.set_status(Status(StatusCode.ERROR, record.get("error") or record["status"]))


class _WarnOnce:
    """The OTLP exporter, saying once (in one line) that the collector is unreachable, and counting the
    spans it could not deliver."""

    def __init__(self, inner, url: str):
        self.inner, self.url = inner, url
        self.lost, self.warned = 0, False

    def export(self, spans: Sequence):
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            result = self.inner.export(spans)
        except Exception:  # the SDK's exporters return FAILURE, but a transport may still raise
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.lost += len(spans)
            if not self.warned:
                self.warned = True
                print(
                    f"ttfat: warning: OTLP collector {self.url} not reachable; traces are lost, the run "
                    "goes on and its local log is complete",
                    file=sys.stderr,
                )
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def add_otlp_args(parser) -> None:
    """--otlp for `talk` and `replay`."""
    parser.add_argument(
        "--otlp",
        metavar="URL",
        help="also send each turn as an OpenTelemetry trace (OTLP/HTTP) to the collector at this base URL, "
        "e.g. http://localhost:4318 (traces go to URL/v1/traces; default: $OTEL_EXPORTER_OTLP_ENDPOINT "
        "when set); an unreachable collector only warns, the run directory stays complete",
    )


def exporter_from_args(args, run_id: str, environment: dict | None = None) -> TraceExporter | None:
    """The exporter --otlp or the standard variables ask for, or None."""
    if not (args.otlp or any(os.environ.get(v) for v in ENV_VARS)):
        return None
    return TraceExporter(args.otlp, run_id, environment=environment)
