"""The block-diffusion families whose blocks start at position 0 (SDAR, ...), against our independent
float64 reference (tests/reference_block.py), token for token, on tiny checkpoints in the released layout."""

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
    assert torch.allclose(ours, plain, atol=1e-6 * plain.abs().max(), rtol=0)


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
        expected = ref.sdar_reference_generate(
            lambda ids: ref.block_logits(sdar_dir, ids), prompt, gen_length=gen, steps=steps,
            threshold=threshold, stop_ids=(),
        )  # fmt: skip
        params = GenerationParams(gen_length=gen, threshold=threshold, steps=gen // 4 * steps, cache=cache,
                                  ignore_eos=True)  # fmt: skip
        (out,) = sdar.generate([prompt], params)
        assert out.token_ids == expected, (name, threshold, steps, cache)


def test_sdar_stops_at_a_stop_token_as_the_reference_does(sdar, sdar_dir):
    """The fixture never says <|im_end|>, so one of its answer tokens is made a stop token for both."""
    prompt = _prompts(sdar)["across a boundary"]
    logits = lambda ids: ref.block_logits(sdar_dir, ids)  # noqa: E731
    whole = ref.sdar_reference_generate(logits, prompt, gen_length=12, threshold=0.5, stop_ids=())
    stop = whole[5]
    expected = ref.sdar_reference_generate(logits, prompt, gen_length=12, threshold=0.5, stop_ids=(stop,))
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
