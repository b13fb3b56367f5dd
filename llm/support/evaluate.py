"""`ttfat eval-llm`: how well a model does the support-line job, and how that trades against speed.

- held-out set (phrasings and order ids never used in training; catalog products, and separately
  product names never used in training either): tool-call accuracy
  (right tool, right arguments) on first calls, answer fact accuracy (every required fact stated) on
  answers, exact-match rate;
- real phrasings (../shared/data/text, out-of-scope queries): the rate of replies that invent order
  facts (a status, carrier or date with no lookup, or a lookup of a number the caller never said);
- a sweep of decoding settings (threshold, block length, fixed steps) with tokens per forward and
  time per answer beside accuracy, as a table and a plot;
- 95% intervals around the default setting's and the twin's figures, which the targets are read
  against (`--default-only` with a larger ``n`` narrows them).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from llm.engine.engine import Engine
from llm.engine.params import GenerationParams
from llm.serving.reply import split_reply
from llm.support.conversations import Example, make_examples
from llm.support.policy import SYSTEM_PROMPT
from llm.support.real_queries import real_queries
from llm.support.spoken import caller_words, parse_order_id
from llm.support.store import STATUSES, Store, order_id_argument
from llm.support.tools import store as shared_store

CARRIERS_AND_PHRASES = ["UPS", "USPS", "FedEx", "DHL", "your order", "should arrive", "December", "January"]
ORDER_FACT_WORDS = [s.replace("_", " ") for s in STATUSES] + CARRIERS_AND_PHRASES


@dataclass
class Scores:
    setting: str
    tool_call_acc: float
    fact_acc: float
    exact: float
    tokens_per_forward: float
    ms_per_answer: float
    n_tool: int
    n_answer: int
    groups: dict[str, tuple[int, int]] = field(default_factory=dict)  # group -> (right, n); see `group`

    def row(self) -> str:
        return (
            f"{self.setting:<34} {100 * self.tool_call_acc:6.1f} {100 * self.fact_acc:6.1f} "
            f"{100 * self.exact:6.1f} {self.tokens_per_forward:7.2f} {self.ms_per_answer:8.1f}"
        )

    def intervals(self) -> dict[str, tuple[float, float]]:
        """95% intervals of both rates (see `interval`), as eval.json stores them."""
        return {
            "tool_call_ci95": interval(self.tool_call_acc, self.n_tool),
            "fact_ci95": interval(self.fact_acc, self.n_answer),
        }


def interval(rate: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a rate measured on n calls. A few hundred held-out calls pin a rate
    down only to a few points (95% of 120 first calls spans 89.5-97.7%), so targets are read with it."""
    if n == 0:
        return 0.0, 1.0
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def interval_line(r: Scores) -> str:
    """Both rates of one row with their intervals and counts, as eval-llm prints them."""
    (tl, th), (fl, fh) = r.intervals().values()
    return (
        f"{r.setting}: tool calls {100 * r.tool_call_acc:.1f}% [{100 * tl:.1f}, {100 * th:.1f}] of "
        f"{r.n_tool}, answer facts {100 * r.fact_acc:.1f}% [{100 * fl:.1f}, {100 * fh:.1f}] of {r.n_answer}"
    )


def group(example: Example, store: Store) -> str | None:
    """The targets read separately: each stock state (in stock, out of stock, not carried; both calls of
    a stock question) and bare greetings."""
    if example.intent == "unknown_product":
        return "stock: not carried"
    if example.intent == "stock":
        row = store.products.get(store.find_product(example.meta["product"]) or "")
        return (
            "stock: not carried"
            if row is None
            else "stock: " + ("in stock" if row["in_stock"] else "out of stock")
        )
    return "greeting" if example.intent == "greeting" else None


def group_lines(r: Scores) -> list[str]:
    """Each group's rate with its interval, and all stock states together, as eval-llm prints them."""
    lines = []
    stock = [v for k, v in r.groups.items() if k.startswith("stock: ")]
    groups = {**r.groups, "stock: all": tuple(map(sum, zip(*stock, strict=True)))} if stock else r.groups
    for name, (right, n) in sorted(groups.items()):
        lo, hi = interval(right / n, n)
        lines.append(f"{r.setting}, {name}: {100 * right / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] of {n}")
    return lines


HEADER = f"{'setting':<34} {'tool%':>6} {'fact%':>6} {'exact%':>6} {'tok/fw':>7} {'ms/ans':>8}"


def judge(engine: Engine, example: Example, token_ids: list[int]) -> tuple[bool, bool]:
    """(correct, exact) for one reply."""
    content, calls = split_reply(engine.tokenizer, token_ids)
    want = example.target
    if want.get("tool_calls"):
        fn = want["tool_calls"][0]["function"]
        try:
            ok = (
                len(calls) == 1
                and calls[0].name == fn["name"]
                and json.loads(calls[0].arguments) == json.loads(fn["arguments"])
            )
        except json.JSONDecodeError:
            ok = False
        return ok, ok and content == want["content"]
    ok = not calls and all(f.lower() in content.lower() for f in example.facts)
    return ok, ok and content == want["content"]


def score(
    engine: Engine,
    examples: list[Example],
    params: GenerationParams,
    setting: str,
    batch: int = 16,
    timed: int = 20,
    failures: list[dict] | None = None,
) -> Scores:
    """Accuracy and speed of one setting; wrong replies are appended to ``failures`` when given."""
    tok = engine.tokenizer
    prompts = [tok.encode_chat(e.messages) for e in examples]
    tool_ok, ans_ok, exact = [], [], []
    groups: dict[str, list[bool]] = {}
    store = shared_store()  # read once for all settings
    tokens = forwards = 0
    for i in range(0, len(prompts), batch):
        for ex, gen in zip(
            examples[i : i + batch], engine.generate(prompts[i : i + batch], params), strict=True
        ):
            ok, ex_ok = judge(engine, ex, gen.token_ids)
            if failures is not None and not ok:
                failures.append(
                    {
                        "setting": setting,
                        "intent": ex.intent,
                        "meta": ex.meta,
                        "user": ex.messages[-1]["content"],
                        "want": ex.target,
                        "got": tok.decode(gen.token_ids, skip_special_tokens=False),
                    }
                )
            (tool_ok if ex.target.get("tool_calls") else ans_ok).append(ok)
            if (name := group(ex, store)) is not None:
                groups.setdefault(name, []).append(ok)
            exact.append(ex_ok)
            tokens += len(gen.token_ids) + 1  # + the end-of-sequence token it committed
            forwards += gen.forwards
    times = [engine.generate([p], params)[0].total_ms for p in prompts[:timed]]
    mean = lambda xs: statistics.mean(xs) if xs else 0.0  # noqa: E731
    return Scores(
        setting,
        mean(tool_ok),
        mean(ans_ok),
        mean(exact),
        tokens / max(forwards, 1),
        statistics.median(times),
        len(tool_ok),
        len(ans_ok),
        {k: (sum(v), len(v)) for k, v in groups.items()},
    )


def invented_order_facts(engine: Engine, params: GenerationParams, limit: int = 400) -> dict:
    """Real out-of-scope queries: model replies that state order facts nobody looked up or look up a
    number the caller never said (`invented_rate`), and agent answers, as the caller hears them, that
    state order facts no tool call found (`agent_invented_rate`)."""
    queries = [q for q in real_queries() if q["out_of_scope"]][:limit]
    if not queries:
        return {"n": 0, "note": "no real queries found under ../shared/data/text"}
    tok = engine.tokenizer
    invented, refused, tool_calls = 0, 0, 0
    texts = [caller_words(q["text"]) for q in queries]  # what the agent would hand the model
    prompts = [
        tok.encode_chat([{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": t}])
        for t in texts
    ]
    for i in range(0, len(prompts), 16):
        for text, gen in zip(texts[i : i + 16], engine.generate(prompts[i : i + 16], params), strict=True):
            content, calls = split_reply(tok, gen.token_ids)
            tool_calls += bool(calls)
            said_id = parse_order_id(text)
            bad_call = any(
                c.name == "lookup_order" and order_id_argument(c.arguments) != said_id for c in calls
            )
            facts = not calls and any(w.lower() in content.lower() for w in ORDER_FACT_WORDS)
            invented += bad_call or facts
            refused += "can't help" in content
    n = len(texts)
    return {
        "n": n,
        "invented_rate": invented / n,
        "polite_refusal_rate": refused / n,
        "tool_call_rate": tool_calls / n,
        "agent_invented_rate": agent_invented(engine, [q["text"] for q in queries], params) / n,
    }


def agent_invented(engine: Engine, texts: list[str], params: GenerationParams) -> int:
    """What the caller would hear: full agent turns (tools included, the agent's own caller_words); an
    answer invents order facts when it states one and no tool call found anything."""
    import asyncio

    from llm.engine.async_engine import AsyncEngine
    from llm.serving.engine_chat import EngineChat
    from llm.support.tools import store_agent

    aengine = AsyncEngine(engine)
    agent = store_agent(EngineChat(aengine, params))

    async def run() -> int:
        count = 0
        for text in texts:
            result = await agent.turn(text)
            found = any((c.result or {}).get("found") for c in result.tool_calls)
            count += not found and any(w.lower() in result.answer.lower() for w in ORDER_FACT_WORDS)
        return count

    try:
        return asyncio.run(run())
    finally:
        aengine.close()


def sweep(model_dir, ar_dir, n: int, out: Path, default_only: bool = False, out_of_scope: int = 400) -> dict:
    """The whole evaluation; ``default_only`` skips the other decoding settings, so that a larger ``n``
    (a tighter interval around the target figures) fits in a few minutes."""
    engine = Engine(model_dir)
    examples = make_examples(n, seed=12345, split="heldout", new_products=False)
    unseen_products = make_examples(n, seed=12345, split="heldout")
    default, twin = GenerationParams(threshold=0.9), GenerationParams(steps=64)  # the targets' decoding
    settings = [
        ("threshold 0.5", GenerationParams(threshold=0.5)),
        ("threshold 0.7", GenerationParams(threshold=0.7)),
        ("threshold 0.8", GenerationParams(threshold=0.8)),
        ("threshold 0.9 (default)", default),
        ("threshold 0.95", GenerationParams(threshold=0.95)),
        ("threshold 0.9, block 4", GenerationParams(threshold=0.9, block_length=4)),
        ("threshold 0.9, block 16", GenerationParams(threshold=0.9, block_length=16)),
        ("fixed 1 token/step", GenerationParams(steps=64)),
        ("fixed 2 tokens/step", GenerationParams(steps=32)),
        ("fixed 4 tokens/step", GenerationParams(steps=16)),
    ]
    if default_only:
        settings = [(name, params) for name, params in settings if params is default]
    results, targets = [], []  # targets: the default setting and the AR twin, read with intervals
    failures: list[dict] = []  # of the default setting and the AR twin, to see what goes wrong
    print(HEADER)
    kind = "diffusion" if engine.config.block_size > 1 else "autoregressive"  # --model may be an AR model
    for name, params in tqdm(settings, desc="settings", leave=False):
        row = score(
            engine, examples, params, f"{kind} {name}", failures=failures if params is default else None
        )
        results.append(row)
        tqdm.write(row.row())
        if params is default:
            targets.append(row)
    results.append(score(engine, unseen_products, default, f"{kind} 0.9, unseen products"))
    print(results[-1].row())
    if ar_dir is not None:
        ar = Engine(ar_dir)
        results.append(score(ar, examples, twin, "autoregressive twin", failures=failures))
        print(results[-1].row())
        targets.append(results[-1])
        results.append(score(ar, unseen_products, twin, "AR twin, unseen products"))
        print(results[-1].row())
    print("95% intervals (Wilson):")
    for r in targets + [r for r in results if "unseen" in r.setting]:
        for line in [interval_line(r), *group_lines(r)]:
            print("  " + line)
    oos = invented_order_facts(engine, default, out_of_scope)
    print("real out-of-scope queries:", json.dumps(oos))
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "examples": n,
        "results": [{**r.__dict__, **r.intervals()} for r in results],
        "real_out_of_scope": oos,
    }
    (out / "eval.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "failures.jsonl").write_text("".join(json.dumps(f) + "\n" for f in failures))
    plot(results, out / "steps_vs_quality.png")
    print(f"wrote {out / 'eval.json'}, {out / 'failures.jsonl'} and {out / 'steps_vs_quality.png'}")
    return summary


def plot(results: list[Scores], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        for ax, x in ((a, r.tokens_per_forward), (b, r.ms_per_answer)):
            ax.scatter([x], [100 * r.tool_call_acc], marker="o", color="tab:blue")
            ax.scatter([x], [100 * r.fact_acc], marker="s", color="tab:orange")
            ax.annotate(r.setting.replace("diffusion ", ""), (x, 100 * r.fact_acc), fontsize=6)
    a.set_xlabel("tokens committed per forward pass")
    b.set_xlabel("median ms per answer (batch 1)")
    for ax in (a, b):
        ax.set_ylabel("accuracy % (o tool call, s answer facts)")
        ax.grid(alpha=0.3)
    fig.suptitle("Decoding settings: quality vs parallelism and time (held-out support calls)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
