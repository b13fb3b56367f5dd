"""The block-diffusion families whose blocks start at position 0 (SDAR, Fast-dLLM v2, LLaDA2), against our
independent float64 reference (tests/reference_block.py), token for token, on tiny checkpoints in the
released layout."""

from __future__ import annotations

import json

import pytest
import torch

from llm.engine.checkpoint import CheckpointError, load_checkpoint
from llm.engine.engine import Engine
from llm.engine.params import GenerationParams
from tests import reference_block as ref


@pytest.fixture(scope="module")
def sdar_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("sdar")
    ref.write_sdar_checkpoint(path, seed=1, sharded=True)
    return path


@pytest.fixture(scope="module")
def sdar(sdar_dir):
    return Engine(sdar_dir, device="cpu", dtype=torch.float64)


def test_sdar_loads_with_its_own_tokenizer_and_matches_the_float64_forward(sdar_dir, sdar):
    cfg = sdar.config
    assert (cfg.family, cfg.mask_token_id, cfg.block_size, cfg.head_dim) == ("sdar", 151669, 4, 16)
    assert cfg.eos_token_ids == [151645, 151643] and cfg.aligned_blocks and not cfg.shift_logits
    prompt = sdar.tokenizer.encode_chat([{"role": "user", "content": "where is my order"}])
    assert sdar.tokenizer.decode(prompt, skip_special_tokens=False).endswith("<|im_start|>assistant\n")
    ids = prompt + [cfg.mask_token_id] * 7
    blocks = torch.arange(len(ids)) // cfg.block_size
    ours = sdar.model.full_logits(torch.tensor([ids]), blocks[None])[0].double()
    plain = ref.block_logits(sdar_dir, ids)
    assert torch.allclose(ours, plain, atol=1e-5 * plain.abs().max(), rtol=0)


def _prompts(engine: Engine) -> dict[str, list[int]]:
    chat = engine.tokenizer.encode_chat([{"role": "user", "content": "hello can you check my order"}])
    assert len(chat) % 4, "the chat prompt must end inside a block"
    return {"shorter than a block": chat[:3], "a whole number of blocks": chat[:8], "across a boundary": chat}


CASES = [  # (threshold, steps per block of 4, cache)
    (None, 4, "block"),  # low_confidence_static: one a step
    (None, 2, "none"),  # static, two a step
    (0.9, 4, "block"),  # the model card's dynamic rule
    (0.5, 4, "none"),
    (0.2, 2, "block"),
    (0.9, 2, "none"),  # a floor of two a step over few confident positions
    (0.05, 4, "block"),
]


@pytest.mark.parametrize("threshold,steps,cache", CASES)
def test_sdar_decoding_equals_the_reference_token_for_token(sdar, sdar_dir, threshold, steps, cache):
    gen = 12
    for name, prompt in _prompts(sdar).items():
        expected = ref.low_confidence_generate(
            lambda ids: ref.block_logits(sdar_dir, ids),
            prompt,
            gen_length=gen,
            steps=steps,
            threshold=threshold,
            stop_ids=(),
        )
        params = GenerationParams(
            gen_length=gen, threshold=threshold, steps=gen // 4 * steps, cache=cache, ignore_eos=True
        )
        (out,) = sdar.generate([prompt], params)
        assert out.token_ids == expected, (name, threshold, steps, cache)


def test_sdar_stops_at_a_stop_token_as_the_reference_does(sdar, sdar_dir):
    """The fixture never says <|im_end|>, so one of its answer tokens is made a stop token for both."""
    prompt = _prompts(sdar)["across a boundary"]
    logits = lambda ids: ref.block_logits(sdar_dir, ids)  # noqa: E731
    whole = ref.low_confidence_generate(logits, prompt, gen_length=12, threshold=0.5, stop_ids=())
    stop = whole[5]
    expected = ref.low_confidence_generate(logits, prompt, gen_length=12, threshold=0.5, stop_ids=(stop,))
    assert len(expected) < len(whole)
    saved, sdar.config.eos_token_ids = sdar.config.eos_token_ids, [stop]
    try:
        (out,) = sdar.generate([prompt], GenerationParams(gen_length=12, threshold=0.5))
    finally:
        sdar.config.eos_token_ids = saved
    assert out.token_ids == expected and out.finish_reason == "stop"


def test_sdar_prompt_blocks_are_reused_whole(sdar):
    """Two prompts that share their first blocks: the second reuses them (whole blocks only: a block's keys
    depend on all of it) and decodes as if alone."""
    chat = _prompts(sdar)["across a boundary"]
    params = GenerationParams(gen_length=8, threshold=0.5, ignore_eos=True)
    (alone,) = Engine(sdar.checkpoint, max_batch=1, prefix_cache=0).generate([chat[:-1]], params)
    sdar.generate([chat], params)
    hits = sdar.prefixes.hits
    (again,) = sdar.generate([chat[:-1]], params)
    assert sdar.prefixes.hits == hits + 1 and sdar.prefixes.reused_tokens % 4 == 0
    assert again.token_ids == alone.token_ids


def test_a_wrong_sdar_directory_says_which_tensor_in_one_line(tmp_path, sdar_dir):
    import shutil

    from safetensors.torch import load_file, save_file

    bad = tmp_path / "bad"
    shutil.copytree(sdar_dir, bad)
    name = "model.layers.1.self_attn.k_norm.weight"
    shard = bad / json.loads((bad / "model.safetensors.index.json").read_text())["weight_map"][name]
    tensors = load_file(str(shard))
    del tensors[name]
    save_file(tensors, str(shard))
    config = json.loads((bad / "config.json").read_text())
    with pytest.raises(CheckpointError, match="k_norm") as e:
        load_checkpoint(bad, device="cpu")
    assert "\n" not in str(e.value)
    (bad / "config.json").write_text(json.dumps({**config, "rope_scaling": {"type": "yarn", "factor": 4}}))
    with pytest.raises(CheckpointError, match="rope_scaling"):
        load_checkpoint(bad, device="cpu")


# -- Fast-dLLM v2 ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fast_dirs(tmp_path_factory):
    """The released block of 32 (sub-blocks of 8), and a block of 8 for cases that need many blocks."""
    out = {}
    for bd in (32, 8):
        out[bd] = tmp_path_factory.mktemp(f"fast{bd}")
        ref.write_fast_dllm_v2_checkpoint(out[bd], seed=2, bd_size=bd, sharded=bd == 8)
    return out


def test_fast_dllm_v2_loads_tied_with_its_template_file_and_matches_the_float64_forward(fast_dirs):
    engine = Engine(fast_dirs[32], device="cpu", dtype=torch.float64)
    cfg = engine.config
    assert (cfg.family, cfg.mask_token_id, cfg.block_size, cfg.eos_token_ids) == (
        "fast_dllm_v2",
        151665,
        32,
        [151645],
    )
    assert cfg.shift_logits and cfg.aligned_blocks and cfg.greedy_block_start and cfg.tie_embeddings
    prompt = engine.tokenizer.encode_chat([{"role": "user", "content": "where is my order"}])
    text = engine.tokenizer.decode(prompt, skip_special_tokens=False)
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.")
    assert text.endswith("<|im_start|>assistant\n")
    ids = prompt + [cfg.mask_token_id] * 9
    ours = engine.model.full_logits(torch.tensor([ids]), (torch.arange(len(ids)) // 32)[None])[0].double()
    plain = ref.block_logits(fast_dirs[32], ids)
    assert torch.allclose(ours, plain, atol=1e-5 * plain.abs().max(), rtol=0)


FAST_CASES = [  # (block, sub-block, threshold, cache)
    (32, 8, 0.9, "block"),  # the model card's decoding
    (32, 8, 1.0, "none"),  # generate()'s own default: one token a step
    (8, 4, 0.9, "none"),
    (8, 4, 0.5, "block"),
    (8, 8, 0.3, "block"),  # no sub-blocks
    (8, 2, 1.0, "block"),
]


@pytest.mark.parametrize("bd,sub,threshold,cache", FAST_CASES)
def test_fast_dllm_v2_decoding_equals_the_reference_token_for_token(fast_dirs, bd, sub, threshold, cache):
    engine = Engine(fast_dirs[bd], device="cpu", dtype=torch.float64)
    chat = engine.tokenizer.encode_chat([{"role": "user", "content": "hello can you check my order"}])
    assert len(chat) % bd, "the chat prompt must end inside a block"
    prompts = {
        "shorter than a block": chat[:5],
        "a whole number of blocks": chat[: len(chat) // bd * bd],
        "across a boundary": chat,
    }
    gen = bd + 3 if bd == 32 else 2 * bd + 3  # two or three blocks: a greedy start in each after the first
    for name, prompt in prompts.items():
        expected = ref.fast_dllm_v2_reference_generate(
            lambda ids: ref.block_logits(fast_dirs[bd], ids, tail=bd + 1),
            prompt,
            gen_length=gen,
            block_length=bd,
            sub_block_length=sub,
            threshold=threshold,
            stop_ids=(),
        )
        params = GenerationParams(
            gen_length=gen, sub_block_length=sub, threshold=threshold, cache=cache, ignore_eos=True
        )
        (out,) = engine.generate([prompt], params)
        assert out.token_ids == expected, (name, bd, sub, threshold, cache)


def test_fast_dllm_v2_stops_at_a_stop_token_as_the_reference_does(fast_dirs):
    engine = Engine(fast_dirs[8], device="cpu", dtype=torch.float64)
    prompt = engine.tokenizer.encode_chat([{"role": "user", "content": "hello can you check my order"}])
    logits = lambda ids: ref.block_logits(fast_dirs[8], ids, tail=9)  # noqa: E731
    settings = {"gen_length": 19, "block_length": 8, "sub_block_length": 4, "threshold": 0.5}
    whole = ref.fast_dllm_v2_reference_generate(logits, prompt, **settings, stop_ids=())
    stop = whole[8]  # the greedy first token of the second block
    expected = ref.fast_dllm_v2_reference_generate(logits, prompt, **settings, stop_ids=(stop,))
    assert len(expected) < len(whole)
    engine.config.eos_token_ids = [stop]
    (out,) = engine.generate([prompt], GenerationParams(gen_length=19, sub_block_length=4, threshold=0.5))
    assert out.token_ids == expected and out.finish_reason == "stop"


# -- LLaDA2 ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def llada2_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("llada2")
    ref.write_llada2_checkpoint(path, seed=3, sharded=True)
    return path


@pytest.fixture(scope="module")
def llada2(llada2_dir):
    return Engine(llada2_dir, device="cpu", dtype=torch.float64)


def test_llada2_loads_its_fused_experts_and_matches_the_float64_forward(llada2, llada2_dir):
    cfg = llada2.config
    assert (cfg.family, cfg.mask_token_id, cfg.eos_token_ids, cfg.block_size) == (
        "llada2",
        156895,
        [156892],
        32,
    )
    assert (cfg.head_dim, cfg.rotary_dim, cfg.qk_norm, cfg.moe.experts, cfg.moe.dense_layers) == (
        8,
        4,
        True,
        8,
        1,
    )
    prompt = llada2.tokenizer.encode_chat([{"role": "user", "content": "where is my order"}])
    text = llada2.tokenizer.decode(prompt, skip_special_tokens=False)
    assert text == (
        "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>where is my order"
        "<|role_end|><role>ASSISTANT</role>"
    )
    ids = prompt + [cfg.mask_token_id] * 20
    ours = llada2.model.full_logits(torch.tensor([ids]), (torch.arange(len(ids)) // 32)[None])[0].double()
    plain = ref.llada2_logits(llada2_dir, ids)
    assert torch.allclose(ours, plain, atol=1e-5 * plain.abs().max(), rtol=0)


def test_llada2_expert_biases_change_the_routing(llada2):
    """The fixture's unequal expert biases choose other experts than the scores alone would, for some
    tokens: the routing test below covers the bias."""
    layer = llada2.model.layers[1].mlp
    x = llada2.model.embed_tokens.weight[:200].float()
    with_bias, _ = layer.gate(x, layer.moe)
    saved = layer.gate.expert_bias.clone()
    layer.gate.expert_bias.zero_()
    try:
        without, _ = layer.gate(x, layer.moe)
    finally:
        layer.gate.expert_bias.copy_(saved)
    changed = (with_bias.sort(-1).values != without.sort(-1).values).any(-1).float().mean()
    assert 0.1 < changed < 1.0


LLADA2_CASES = [  # (threshold, steps per block of 32, cache)
    (0.95, 32, "block"),  # generate()'s defaults
    (0.5, 32, "none"),
    (0.2, 16, "block"),  # a floor of two a step
    (None, 16, "none"),  # the fixed schedule alone
]


@pytest.mark.parametrize("threshold,steps,cache", LLADA2_CASES)
def test_llada2_decoding_equals_the_reference_token_for_token(llada2, llada2_dir, threshold, steps, cache):
    words = "hello can you check my order it was shipped on monday and it is still not here where is it"
    chat = llada2.tokenizer.encode_chat([{"role": "user", "content": words}])
    assert len(chat) > 32 and len(chat) % 32
    prompts = {"shorter than a block": chat[:20], "a whole block": chat[:32], "across a boundary": chat}
    gen = 34
    for name, prompt in prompts.items():
        expected = ref.low_confidence_generate(
            lambda ids: ref.llada2_logits(llada2_dir, ids, tail=32),
            prompt,
            gen_length=gen,
            block_length=32,
            steps=steps,
            threshold=threshold,
            mask_id=156895,
            stop_ids=(),
        )
        params = GenerationParams(
            gen_length=gen, threshold=threshold, steps=-(-gen // 32) * steps, cache=cache, ignore_eos=True
        )
        (out,) = llada2.generate([prompt], params)
        assert out.token_ids == expected, (name, threshold, steps, cache)


def test_llada2_stops_at_a_stop_token_as_the_reference_does(llada2, llada2_dir):
    prompt = llada2.tokenizer.encode_chat([{"role": "user", "content": "where is my order"}])
    logits = lambda ids: ref.llada2_logits(llada2_dir, ids, tail=32)  # noqa: E731
    settings = {"gen_length": 34, "block_length": 32, "steps": 32, "threshold": 0.5, "mask_id": 156895}
    whole = ref.low_confidence_generate(logits, prompt, **settings, stop_ids=())
    stop = whole[20]
    expected = ref.low_confidence_generate(logits, prompt, **settings, stop_ids=(stop,))
    assert len(expected) < len(whole)
    saved, llada2.config.eos_token_ids = llada2.config.eos_token_ids, [stop]
    try:
        (out,) = llada2.generate([prompt], GenerationParams(gen_length=34, threshold=0.5))
    finally:
        llada2.config.eos_token_ids = saved
    assert out.token_ids == expected and out.finish_reason == "stop"


# -- every entry point takes every family ------------------------------------------------------------


@pytest.mark.parametrize("family", ["sdar", "fast_dllm_v2", "llada2"])
def test_generate_and_serve_take_each_family(family, sdar_dir, fast_dirs, llada2_dir, capsys):
    """`ttfat generate --model DIR` decodes as the engine does, and the server names the family and the
    decoding it applies in /health and streams a chat reply."""
    import httpx

    from llm.serving.process import LocalServer
    from ttfat.cli import main

    path = {"sdar": sdar_dir, "fast_dllm_v2": fast_dirs[8], "llada2": llada2_dir}[family]
    assert (
        main(
            ["generate", "--model", str(path), "--prompt", "where is my order", "--gen-length", "9", "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    engine = Engine(path, device="cpu")
    prompt = engine.tokenizer.encode_chat([{"role": "user", "content": "where is my order"}])
    assert out["token_ids"] == engine.generate([prompt], GenerationParams(gen_length=9))[0].token_ids
    with LocalServer(path, family) as url:
        health = httpx.get(url.removesuffix("/v1") + "/health").json()
        assert health["family"] == family and health["layout"]["blocks_from"] == "position 0"
        assert health["decoding"]["block_length"] == engine.config.block_size
        body = {"model": family, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 6}
        reply = httpx.post(url + "/chat/completions", json=body, timeout=60).json()
        assert reply["choices"][0]["finish_reason"] in ("stop", "length")


def test_replay_and_eval_llm_take_a_family_directory(tmp_path, sdar_dir):
    """`ttfat replay --llm-model DIR` serves it and answers every turn of a call (the tiny random model
    says nonsense, but every turn is recorded), and `ttfat eval-llm --model DIR` scores it."""
    import subprocess
    import sys

    from tests.test_preflight import CALL

    def run(*argv):
        return subprocess.run(
            [sys.executable, "-m", "ttfat", *argv], cwd=tmp_path, capture_output=True, text=True, timeout=600
        )

    import soundfile as sf

    from voice.pipeline.audio import load_audio

    sf.write(tmp_path / "turn.wav", load_audio(CALL).samples[: 6 * 16000], 16000)  # the call's first turn
    done = run(
        "replay",
        "turn.wav",
        "--mode",
        "fast",
        "--llm-model",
        str(sdar_dir),
        "--max-tokens",
        "12",
        "--out",
        "r",
        "--no-audio",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    turns = [json.loads(line) for line in (tmp_path / "r" / "turns.jsonl").read_text().splitlines()]
    assert turns and all(t["status"] in ("ok", "failed") for t in turns)
    done = run(
        "eval-llm",
        "--model",
        str(sdar_dir),
        "--ar-model",
        "none",
        "-n",
        "2",
        "--default-only",
        "--out-of-scope",
        "8",
        "--out",
        "e",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "e" / "eval.json").is_file()


def test_the_prepared_gpu_script_runs_on_the_cpu(tmp_path, sdar_dir):
    """bench/gpu.py, prepared for a lent accelerator, measures a tiny checkpoint here as a real one there."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "gpu.py"
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            str(sdar_dir),
            "--device",
            "cpu",
            "--requests",
            "8",
            "--gen-length",
            "8",
            "--out",
            str(tmp_path / "gpu.json"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "gpu.json").read_text())
    (model,) = report["models"]
    assert model["family"] == "sdar" and [r["concurrency"] for r in model["runs"]] == [1, 8]
    for run in model["runs"]:
        assert run["requests"] == 8 and run["tokens_per_s"] > 0 and run["tokens_per_forward"] >= 1
        assert run["ttfat_p50_ms"] <= run["ttfat_p95_ms"]
