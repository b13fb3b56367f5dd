"""The engine against independent references, on tiny random-weight checkpoints."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
import torch

from llm.engine.checkpoint import CheckpointError, load_checkpoint
from llm.engine.engine import Engine
from llm.engine.errors import DecodingError
from llm.engine.params import GenerationParams
from llm.engine.sampler import CONTENDER
from tests import reference as ref
from tests.tiny import write_own_checkpoint


@pytest.fixture(scope="module")
def llada_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("llada")
    ref.write_llada_checkpoint(path, seed=0)
    return path


@pytest.fixture(scope="module")
def dream_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("dream")
    ref.write_dream_checkpoint(path, seed=0, sharded=True)
    return path


@pytest.fixture(scope="module")
def block_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("block")
    write_own_checkpoint(path, attention="block", block_size=4, shift=True)
    return path


def chat_prompt(engine: Engine, text: str) -> list[int]:
    tok = engine.tokenizer
    return tok.encode_chat([{"role": "user", "content": text}])


@pytest.mark.parametrize("layout", ["llada", "dream"])
def test_layouts_load_and_match_plain_implementation(layout, llada_dir, dream_dir):
    path = llada_dir if layout == "llada" else dream_dir
    ckpt = load_checkpoint(path, device="cpu")
    ids = ckpt.tokenizer.encode_chat([{"role": "user", "content": "where is my order"}])
    assert ckpt.tokenizer.decode(ids, skip_special_tokens=False).endswith(
        "assistant<|end_header_id|>\n\n" if layout == "llada" else "<|im_start|>assistant\n"
    )
    ids = ids + [ckpt.config.mask_token_id] * 6
    ours = ckpt.model.full_logits(torch.tensor([ids]))[0].double()
    plain = ref.plain_logits(path, ids)
    scale = plain.abs().max()
    assert torch.allclose(ours, plain, atol=2e-4 * scale, rtol=0)
    assert ckpt.config.shift_logits == (layout == "dream")


@pytest.mark.parametrize("steps,block", [(16, 8), (8, 8), (16, 16), (32, 8)])
def test_reference_llada_decoding_token_for_token(llada_dir, steps, block):
    engine = Engine(llada_dir, device="cpu")
    prompt = chat_prompt(engine, "hello can you check my order")

    def logits_fn(canvas):
        return engine.model.full_logits(torch.tensor([canvas]))[0]

    expected = ref.llada_reference_generate(logits_fn, prompt, steps=steps, gen_length=16, block_length=block)
    params = GenerationParams(gen_length=16, block_length=block, steps=steps, cache="none", early_stop=False)
    seq_id = engine.add_request(prompt, params)
    seq = next(s for s in engine.waiting if s.id == seq_id)
    while engine.has_work():
        engine.step()
    assert seq.canvas.tolist() == expected
    assert seq.forwards <= steps  # steps that would commit nothing are skipped


def stepwise_cache_agreement(engine: Engine, prompt: list[int], mode: str) -> tuple[float, float]:
    """Follow the exact (no cache) trajectory; at every step also run the cached forward on the same
    canvas. Returns (argmax agreement at the block's masked positions, largest logit error on steps
    where the canvas had not changed since the cache was built)."""
    from llm.engine.sequence import Sequence

    params = GenerationParams(gen_length=32, block_length=8, steps=32, cache=mode).resolve(engine.config)
    seq = Sequence(prompt, params, engine.config)
    seq.slot = engine.cache.allocate()
    engine.running = [seq]
    agree = total = 0
    unchanged_error = 0.0
    block_start_canvas = None
    while not seq.finished:
        if seq.step_in_block == 0:
            block_start_canvas = seq.canvas.clone()
        work = seq.plan()
        cached = engine._run([work])[0]
        with torch.no_grad():
            full = engine.model.full_logits(seq.canvas[None])[0]
        exact = full[work.targets - int(engine.config.shift_logits)]
        agree += int((cached.argmax(-1) == exact.argmax(-1)).sum())
        total += len(work.targets)
        if torch.equal(seq.canvas, block_start_canvas):  # nothing stale yet: the cache must be exact
            unchanged_error = max(unchanged_error, float((cached - exact).abs().max() / exact.abs().max()))
        seq.commit(work, exact, 0)
    engine.running = []
    engine.cache.release(seq.slot)
    return agree / total, unchanged_error


def test_dream_timestep_schedule_is_dreams_float32_one():
    """Tokens a step with `steps` = gen_length and fewer, as Dream's float32 arithmetic gives them: none at
    the first step, two at the last; (1000, 1000) is where float64 would give 0, 0, 1, 1."""

    def counts(masked: int, steps: int, engine_side: bool) -> list[int]:
        out, times = [], ref.dream_timesteps(steps)
        for step in range(steps):
            n = (
                sampler_count(masked, step, steps)
                if engine_side
                else ref.dream_transfer_count(masked, step, steps, times)
            )
            out.append(n)
            masked -= n
        return out

    from llm.engine.sampler import timestep_count as sampler_count

    assert counts(8, 8, True) == [0, 1, 1, 1, 1, 1, 1, 2]
    assert counts(100, 7, True) == [14] * 6 + [16]
    assert counts(8, 4, True) == [1, 2, 2, 3]
    assert counts(256, 128, True) == [1] + [2] * 126 + [3]
    assert counts(1000, 1000, True)[:4] == [0, 1, 0, 1]
    for masked, steps in ((8, 8), (100, 7), (512, 256), (1000, 1000), (1024, 1024), (37, 11)):
        assert counts(masked, steps, True) == counts(masked, steps, False), (masked, steps)


@pytest.mark.parametrize("alg", ["entropy", "margin", "probability"])
@pytest.mark.parametrize("steps", [16, 8, 5])
def test_reference_dream_decoding_token_for_token(dream_dir, alg, steps):
    """Dream's own decoding, its default in our engine: the whole canvas, the timestep schedule and
    confidence by entropy (or margin, or probability)."""
    engine = Engine(dream_dir, device="cpu", dtype=torch.float64)
    prompt = chat_prompt(engine, "hello can you check my order")
    expected = ref.dream_reference_generate(
        lambda canvas: ref.plain_logits(dream_dir, canvas), prompt, gen_length=16, steps=steps, alg=alg
    )
    params = GenerationParams(gen_length=16, steps=steps, confidence=alg, cache="none", early_stop=False)
    seq_id = engine.add_request(prompt, params)
    seq = next(s for s in engine.waiting if s.id == seq_id)
    assert (seq.params.block_length, seq.params.schedule) == (16, "timesteps")
    while engine.has_work():
        engine.step()
    assert seq.canvas.tolist() == expected


def test_prefix_and_dual_cache_agreement_is_measured_and_bounded(llada_dir, dream_dir):
    """Fast-dLLM's caches are approximations on bidirectional models: exact until the canvas changes,
    then stale. Measure the per-step agreement with the exact forward and bound it."""
    report = {}
    for name, path in (("llada", llada_dir), ("dream", dream_dir)):
        engine = Engine(path, device="cpu")
        prompt = chat_prompt(engine, "where is my order")
        for mode in ("prefix", "dual"):
            agreement, unchanged_error = stepwise_cache_agreement(engine, prompt, mode)
            report[f"{name}/{mode}"] = round(agreement, 3)
            assert unchanged_error < 1e-4, (name, mode, unchanged_error)
    print("per-step argmax agreement of cached with exact forward:", json.dumps(report))
    assert min(report.values()) >= 0.5, report


@pytest.mark.parametrize("shift", [True, False])
@pytest.mark.parametrize("block_size", [1, 4])
def test_exact_block_cache_equals_no_cache(tmp_path, shift, block_size):
    write_own_checkpoint(tmp_path, attention="block", block_size=block_size, shift=shift, seed=3)
    engine = Engine(tmp_path, device="cpu")
    prompts = [[1, 2, 3, 4, 5], [9, 8, 7], [11] * 9]
    for rule in ({"steps": 24}, {"threshold": 0.2}):
        cached = engine.generate(
            prompts, GenerationParams(gen_length=24, cache="block", early_stop=False, **rule)
        )
        plain = engine.generate(
            prompts, GenerationParams(gen_length=24, cache="none", early_stop=False, **rule)
        )
        assert [g.token_ids for g in cached] == [g.token_ids for g in plain]
    if block_size == 1:  # the autoregressive path: one forward per token, prompt prefill included
        assert cached[0].forwards == 24


def test_batched_equals_one_at_a_time(llada_dir, block_dir):
    cases = [
        (llada_dir, GenerationParams(gen_length=16, block_length=8, steps=16, cache="none")),
        (llada_dir, GenerationParams(gen_length=16, block_length=8, threshold=0.5, cache="dual")),
        (block_dir, GenerationParams(gen_length=16, steps=16, cache="block")),
        (block_dir, GenerationParams(gen_length=16, temperature=0.8, seed=5, steps=16, cache="block")),
    ]
    for path, params in cases:
        engine = Engine(path, device="cpu")
        prompts = [[5, 6, 7], [1, 2, 3, 4, 5, 6, 7, 8, 9], [20, 21]]
        together = engine.generate(prompts, params)
        alone = [engine.generate([p], params)[0] for p in prompts]
        assert [g.token_ids for g in together] == [g.token_ids for g in alone]


def test_sampling_with_seed_is_reproducible(block_dir):
    engine = Engine(block_dir, device="cpu")
    params = GenerationParams(gen_length=16, temperature=1.0, threshold=0.5)

    def run(seed):
        return engine.generate([[1, 2, 3]], replace(params, seed=seed))[0].token_ids

    assert run(1) == run(1)
    assert len({tuple(run(s)) for s in range(4)}) > 1


def test_an_opening_under_its_floor_is_ruled_out_and_goes_alone(block_dir):
    """A floor above the probability of the token the model opens with (0.09 in this tiny model, a
    contender) makes the next best token the opening, committed alone; a floor it meets changes nothing,
    and neither does a floor of CONTENDER on every token (none can contend and sit under it)."""
    engine = Engine(block_dir, device="cpu")
    params = GenerationParams(gen_length=16, threshold=0.0, early_stop=False)  # a block a step

    def run(floor):
        return engine.generate([[1, 2, 3]], replace(params, opening_floor=floor))[0]

    free = run({})
    first = free.token_ids[0]
    for harmless in ({first: 0.0}, dict.fromkeys(range(engine.config.vocab_size), CONTENDER)):
        again = run(harmless)
        assert (again.token_ids, again.forwards) == (free.token_ids, free.forwards)
    floored = run({first: 1.0})
    assert floored.token_ids[0] != first
    assert floored.forwards == free.forwards + 1  # the opening went alone, the rest of its block after it


def test_streaming_is_a_gap_free_prefix_of_the_output(llada_dir, block_dir):
    for path, params in (
        (llada_dir, GenerationParams(gen_length=32, block_length=8, steps=32, cache="prefix")),
        (block_dir, GenerationParams(gen_length=32, threshold=0.3)),
    ):
        engine = Engine(path, device="cpu")
        chunks = list(engine.stream([3, 4, 5, 6], params))
        final = engine.generate([[3, 4, 5, 6]], params)[0]
        assert [t for c in chunks for t in c.token_ids] == final.token_ids
        assert chunks[-1].finished and all(not c.finished for c in chunks[:-1])
        emits = [c.emit_ns for c in chunks]
        assert emits == sorted(emits)
        commits = [t for c in chunks for t in c.commit_ns]
        assert all(0 < t <= c.emit_ns for c in chunks for t in c.commit_ns)
        assert len(commits) == len(final.token_ids)
        forwards = [c.forwards for c in chunks]
        assert forwards == sorted(forwards)


def test_early_stop_truncates_at_end_of_sequence(tmp_path):
    cfg = write_own_checkpoint(tmp_path, attention="block", block_size=4, seed=7)
    params = GenerationParams(gen_length=32, steps=32, early_stop=False)
    full = Engine(tmp_path, device="cpu").generate([[1, 2, 3]], params)[0]
    eos = full.token_ids[9]  # declare a token the model emits to be end-of-sequence
    cfg.eos_token_ids = [eos]
    cfg.save(tmp_path / "config.json")
    stopped = Engine(tmp_path, device="cpu").generate([[1, 2, 3]], GenerationParams(gen_length=32, steps=32))[
        0
    ]
    cut = full.token_ids.index(eos)
    assert stopped.token_ids == full.token_ids[:cut]
    assert stopped.finish_reason == "stop"
    assert stopped.forwards < full.forwards


def test_cancellation_frees_the_slot_without_disturbing_others(block_dir):
    engine = Engine(block_dir, device="cpu", max_batch=2)
    params = GenerationParams(gen_length=32, steps=32)
    alone = engine.generate([[7, 8, 9]], params)[0].token_ids
    keep = engine.add_request([7, 8, 9], params)
    drop = engine.add_request([1, 2, 3, 4], params)
    waiting = engine.add_request([4, 4], params)  # no slot free until one is released
    out: dict[str, list] = {keep: [], drop: [], waiting: []}
    for chunk in engine.step():
        out[chunk.request_id].append(chunk)
    assert len(engine.running) == 2 and not engine.cache.free
    engine.cancel(drop)
    for chunk in engine.step():
        out[chunk.request_id].append(chunk)
    assert out[drop][-1].finish_reason == "cancelled"
    assert [s.id for s in engine.running] == [keep, waiting]  # the freed slot went to the waiting one
    while engine.has_work():
        for chunk in engine.step():
            out[chunk.request_id].append(chunk)
    assert [t for c in out[keep] for t in c.token_ids] == alone
    assert sorted(engine.cache.free) == [0, 1]


@pytest.mark.parametrize("cache", ["block", "dual"])
def test_a_request_moved_into_a_freed_slot_decodes_as_if_alone(llada_dir, block_dir, cache):
    """Running requests stay in cache slots 0..B-1: when one leaves, the last one moves into its slot
    with its cached keys, mid-answer, and must not notice."""
    if cache == "block":
        path, params = block_dir, GenerationParams(gen_length=32, steps=32)
    else:
        path, params = llada_dir, GenerationParams(gen_length=16, block_length=8, steps=16, cache="dual")
    engine = Engine(path, device="cpu", max_batch=3, prefix_cache=0)
    prompts = [[1, 2, 3, 4], [7, 8, 9], [5, 6, 7, 8, 9, 10]]
    alone = [engine.generate([p], params)[0].token_ids for p in prompts[1:]]
    ids = [engine.add_request(p, params) for p in prompts]
    out: dict[str, list] = {i: [] for i in ids}
    for _ in range(3):
        for chunk in engine.step():
            out[chunk.request_id].append(chunk)
    engine.cancel(ids[0])
    for chunk in engine.step():
        out[chunk.request_id].append(chunk)
    assert [(s.id, s.slot) for s in engine.running] == [(ids[2], 0), (ids[1], 1)]
    while engine.has_work():
        for chunk in engine.step():
            out[chunk.request_id].append(chunk)
    assert [[t for c in out[i] for t in c.token_ids] for i in ids[1:]] == alone


def test_async_stream_and_cancel(block_dir):
    import asyncio

    from llm.engine.async_engine import AsyncEngine

    engine = Engine(block_dir, device="cpu")
    aengine = AsyncEngine(engine)
    params = GenerationParams(gen_length=32, steps=32)

    async def main():
        tokens = [t async for c in aengine.stream([7, 8, 9], params) for t in c.token_ids]
        async for _ in aengine.stream([1, 2, 3], params):
            break  # leaving early cancels
        await asyncio.sleep(0.2)
        return tokens

    try:
        tokens = asyncio.run(main())
    finally:
        aengine.close()
    assert tokens == engine.generate([[7, 8, 9]], params)[0].token_ids
    assert not engine.has_work() and len(engine.cache.free) == 8


def test_bad_checkpoint_directories_give_one_line_errors(tmp_path, llada_dir):
    def broken(name):
        path = tmp_path / name
        shutil.copytree(llada_dir, path)
        return path

    cases = {}
    p = broken("no-config")
    (p / "config.json").unlink()
    cases[p] = "config.json: missing"
    p = broken("unknown-type")
    cfg = json.loads((p / "config.json").read_text())
    (p / "config.json").write_text(json.dumps(cfg | {"model_type": "gpt9"}))
    cases[p] = "unknown model_type 'gpt9'"
    p = broken("shape")
    (p / "config.json").write_text(json.dumps(cfg | {"d_model": 128}))
    cases[p] = "has shape"
    p = broken("no-weights")
    (p / "model.safetensors").unlink()
    cases[p] = "model.safetensors: missing"
    p = broken("no-tokenizer")
    (p / "tokenizer.json").unlink()
    cases[p] = "tokenizer.json: missing"
    p = broken("corrupt")
    (p / "model.safetensors").write_bytes(b"not a safetensors file")
    cases[p] = "unreadable safetensors"
    cases[tmp_path / "nowhere"] = "not a directory"
    for path, message in cases.items():
        with pytest.raises(CheckpointError) as err:
            load_checkpoint(path, device="cpu")
        assert message in str(err.value) and "\n" not in str(err.value), (path, str(err.value))


def test_missing_shard_is_named(tmp_path, dream_dir):
    path = tmp_path / "dream"
    shutil.copytree(dream_dir, path)
    shard = sorted(path.glob("model-*.safetensors"))[0]
    shard.unlink()
    with pytest.raises(CheckpointError, match=shard.name):
        load_checkpoint(path, device="cpu")


def test_invalid_params_are_rejected(block_dir):
    engine = Engine(block_dir, device="cpu")
    for bad in (
        GenerationParams(gen_length=0),
        GenerationParams(gen_length=32, steps=3),
        GenerationParams(cache="dual"),
        GenerationParams(threshold=1.5),
        GenerationParams(opening_floor={5: 1.5}),
        GenerationParams(opening_floor={engine.config.vocab_size: 0.8}),
        GenerationParams(opening_floor={-1: 0.8}),
        GenerationParams(temperature=-1),
    ):
        with pytest.raises(DecodingError):
            engine.add_request([1, 2], bad)


def test_a_token_budget_is_rounded_up_to_whole_blocks(block_dir):
    """The one place decoding settings are resolved: a budget of 50 on the bundled block-8 model is a
    canvas of 56 tokens, as the server has always served it (its max_tokens still cuts the reply)."""
    from llm.engine.checkpoint import read_config
    from llm.support.models import BUNDLED

    assert GenerationParams(gen_length=50).resolve(read_config(BUNDLED["bundled"])).gen_length == 56
    tiny = Engine(block_dir, device="cpu").config  # block size 4
    assert GenerationParams(gen_length=30).resolve(tiny).gen_length == 32


def test_generate_command_json(block_dir, capsys):
    from ttfat.cli import main

    assert (
        main(
            [
                "generate",
                "--model",
                str(block_dir),
                "--prompt-ids",
                "1,2,3",
                "--gen-length",
                "16",
                "--steps",
                "16",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    expected = Engine(block_dir, device="cpu").generate(
        [[1, 2, 3]], GenerationParams(gen_length=16, steps=16)
    )[0]
    assert out["token_ids"] == expected.token_ids
    assert len(out["commit_ms"]) == len(out["token_ids"]) and out["forwards"] == expected.forwards
    assert main(["generate", "--model", str(block_dir / "nope"), "--prompt", "x"]) == 2


def test_prompt_prefix_reuse_is_exact(block_dir):
    """A prompt that starts like an earlier one reuses its keys/values and decodes the same tokens."""
    params = GenerationParams(gen_length=16, steps=16)
    first = list(range(1, 21))
    later = first[:15] + [40, 41, 42, 43]
    reuse = Engine(block_dir, device="cpu")
    fresh = Engine(block_dir, device="cpu", prefix_cache=0)
    reuse.generate([first], params)
    assert reuse.generate([later], params)[0].token_ids == fresh.generate([later], params)[0].token_ids
    assert (reuse.prefixes.hits, reuse.prefixes.reused_tokens) == (1, 15)
    assert reuse.generate([first], params)[0].token_ids == fresh.generate([first], params)[0].token_ids
    assert reuse.prefixes.reused_tokens == 15 + 19  # all but the last prompt token
    assert fresh.prefixes.hits == 0


def test_attention_calls_group_requests_while_padding_stays_under_half():
    from llm.engine.batch import runs

    assert runs([8, 16, 8, 8, 60, 8]) == [(0, 4), (4, 6)]  # 4 x 16 padded for 40 real; 2 x 60 for 68
    assert runs([120, 8, 8, 8]) == [(0, 2), (2, 4)]  # 2 x 120 for 128 real; a third would pad 224
    assert runs([8]) == [(0, 1)]
