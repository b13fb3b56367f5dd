"""`ttfat bench-llm`: an asyncio load generator for any OpenAI-compatible chat endpoint.

At each concurrency level, N workers send the given conversations back to back (streaming) and time,
on the client: first token, first answer token (TTFAT), completion; tokens/s over the level's wall
time; errors. Where the server reports `ttfat_timings` (ours does), the HTTP overhead — client TTFAT
minus the engine's TTFAT, from the moment the engine got the request — is measured too. Failed
requests count in the percentiles as +inf.
"""

from __future__ import annotations

import asyncio
import math
import statistics
import time

from openai import AsyncOpenAI

from llm.clock import ms


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile; +inf values (failures) count."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def engine_ttfat(timings: dict) -> float | None:
    """TTFAT inside the engine: from the engine's arrival of the request (after the server parsed and
    tokenized it) to its first answer token, so that HTTP overhead includes the server's own work."""
    answer = timings.get("first_answer_token_ms")
    return None if answer is None else answer - timings.get("arrival_ms", 0.0)


async def one_request(client: AsyncOpenAI, model: str, messages: list[dict], extra: dict) -> dict:
    """`extra`: extra request fields (decoding knobs, max_tokens)."""
    start = time.monotonic_ns()
    first = answer = None
    tokens = 0
    server = {}
    stream = await client.chat.completions.create(
        model=model, messages=messages, stream=True, temperature=0, extra_body=extra
    )
    async for chunk in stream:
        now = time.monotonic_ns()
        server = (chunk.model_extra or {}).get("ttfat_timings") or server
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content or delta.tool_calls:
            first = first or now
        if delta.content:
            answer = answer or now
    done = time.monotonic_ns()
    since = lambda t: math.inf if t is None else ms(start, t, None)  # noqa: E731  never came: infinitely late
    return {
        "ttft": since(first),
        "ttfat": since(answer),
        "done": since(done),
        "tokens": tokens,
        "server_ttfat": engine_ttfat(server),
    }


async def run_level(
    url: str,
    prompts: list[list[dict]],
    concurrency: int,
    requests: int,
    api_key: str = "none",
    extra: dict | None = None,
) -> dict:
    client = AsyncOpenAI(base_url=url, api_key=api_key, max_retries=0, timeout=60)
    model = (await client.models.list()).data[0].id
    queue: asyncio.Queue = asyncio.Queue()
    for i in range(requests):
        queue.put_nowait(prompts[i % len(prompts)])
    results, errors = [], []

    async def worker():
        while not queue.empty():
            messages = queue.get_nowait()
            try:
                results.append(await one_request(client, model, messages, extra or {}))
            except Exception as e:  # counted, and +inf in the percentiles
                errors.append(repr(e))
                results.append({"ttft": math.inf, "ttfat": math.inf, "done": math.inf, "tokens": 0})

    start = time.monotonic()
    await asyncio.gather(*[worker() for _ in range(concurrency)])
    wall = time.monotonic() - start
    overhead = [r["ttfat"] - r["server_ttfat"] for r in results if r.get("server_ttfat") is not None]
    out = {
        "concurrency": concurrency,
        "requests": requests,
        "errors": len(errors),
        "tokens_per_s": sum(r["tokens"] for r in results) / wall,
    }
    for key in ("ttft", "ttfat"):
        values = [r[key] for r in results]
        out |= {
            f"{key}_p50": percentile(values, 50),
            f"{key}_p95": percentile(values, 95),
            f"{key}_p99": percentile(values, 99),
        }
    out["http_overhead_p50_ms"] = statistics.median(overhead) if overhead else None
    await client.close()
    return out


COLUMNS = [
    ("concurrency", "conc", "d"),
    ("requests", "req", "d"),
    ("errors", "err", "d"),
    ("ttft_p50", "TTFT p50", ".1f"),
    ("ttft_p95", "p95", ".1f"),
    ("ttft_p99", "p99", ".1f"),
    ("ttfat_p50", "TTFAT p50", ".1f"),
    ("ttfat_p95", "p95", ".1f"),
    ("ttfat_p99", "p99", ".1f"),
    ("tokens_per_s", "tok/s", ".1f"),
    ("http_overhead_p50_ms", "http ms", ".2f"),
]


def print_table(url: str, rows: list[dict]) -> None:
    """Milliseconds, client side; `http ms` is client TTFAT minus the server's own (p50)."""
    print(f"\n{url}")
    print(" ".join(f"{title:>9}" for _, title, _ in COLUMNS))
    for r in rows:
        print(" ".join("        -" if r[k] is None else f"{r[k]:>9{fmt}}" for k, _, fmt in COLUMNS))


def bench(
    urls: list[str],
    prompts: list[list[dict]],
    levels=(1, 2, 4, 8, 16),
    requests_per_worker: int = 6,
    api_key: str = "none",
    extra: dict | None = None,
    min_requests: int = 24,
) -> dict[str, list[dict]]:
    """Each level sends max(min_requests, concurrency x requests_per_worker) requests, cycling through
    `prompts` (conversations as OpenAI message lists)."""
    report = {}
    for url in urls:
        rows = [
            asyncio.run(
                run_level(url, prompts, c, max(min_requests, c * requests_per_worker), api_key, extra)
            )
            for c in levels
        ]
        print_table(url, rows)
        report[url] = rows
    return report
