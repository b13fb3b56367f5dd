"""The server's Prometheus metrics (`/metrics`). Latencies count from the moment the server received
the request; `ttfat_time_to_first_answer_token_seconds` is what Pipecat calls TTFAT (LLM request ->
first answer token), not ttfat's own TTFAT, which counts from the end of the caller's speech."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from llm.engine.async_engine import AsyncEngine

LATENCY_BUCKETS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10)


class Metrics:
    def __init__(self, engine: AsyncEngine):
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            "ttfat_requests", "chat completion requests by HTTP status", ["status"], registry=r
        )
        self.errors = Counter("ttfat_server_errors", "requests that failed inside the server", registry=r)
        waiting = Gauge("ttfat_requests_waiting", "requests waiting for a decoding slot", registry=r)
        waiting.set_function(lambda: len(engine.engine.waiting))
        running = Gauge("ttfat_requests_running", "requests being decoded", registry=r)
        running.set_function(lambda: len(engine.engine.running))
        sizes = (1, 2, 4, 8, 16, 32, 64)
        self.batch = Histogram("ttfat_batch_size", "requests per forward pass", buckets=sizes, registry=r)
        self.first_token = Histogram(
            "ttfat_time_to_first_token_seconds", "request to first token", buckets=LATENCY_BUCKETS, registry=r
        )
        self.first_answer_token = Histogram(
            "ttfat_time_to_first_answer_token_seconds",
            "request to first answer token (after tool calls and reasoning)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens_per_forward = Histogram(
            "ttfat_tokens_per_forward",
            "tokens committed per forward pass",
            buckets=(0.5, 1, 1.5, 2, 3, 4, 6, 8, 12, 16),
            registry=r,
        )
