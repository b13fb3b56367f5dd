"""Training: the loss falls, checkpoints load, and the training layout computes exactly what the
engine computes when it decodes (no answer token can see itself through the mask or the shift)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from llm.engine.checkpoint import load_checkpoint
from llm.engine.engine import Engine
from llm.engine.params import GenerationParams
from llm.engine.tokenizer import Tokenizer
from llm.support.models import BUNDLED
from llm.support.recipe import install, load_recipe, run_recipe
from llm.support.train import (
    OPENING_FLOOR,
    Batches,
    TrainConfig,
    batch_logits,
    batch_loss,
    first_fit,
    render,
    train,
    turn_chains,
)

TINY = dict(
    hidden_size=64,
    num_layers=2,
    num_heads=4,
    intermediate_size=128,
    batch_size=8,
    examples=400,
    tokenizer_examples=400,
    save_every=1000,
    warmup=5,
    lr=3e-3,
)

# The shipped recipe's shape at a size that trains in seconds.
TINY_RECIPE = """
ship_dtype = "bfloat16"
[data]
examples = 400
tokenizer_examples = 400
[backbone]
hidden_size = 64
num_layers = 2
num_heads = 4
intermediate_size = 128
[[stages]]
name = "ar"
block_size = 1
steps = 40
batch_size = 8
warmup = 5
lr = 3e-3
save_every = 1000
[[stages]]
name = "diffusion"
init = "ar"
block_size = 8
steps = 20
batch_size = 8
warmup = 5
lr = 3e-3
complementary = true
seed = 1
[ships]
bundled = "diffusion"
bundled-ar = "ar"
"""


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    path = tmp_path_factory.mktemp("recipe") / "recipe.toml"
    path.write_text(TINY_RECIPE)
    return load_recipe(path)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, recipe):
    out = tmp_path_factory.mktemp("models")
    return out, run_recipe(recipe, out)


@pytest.fixture(scope="module")
def ar_dir(trained):
    return trained[1]["bundled-ar"]


@pytest.fixture(scope="module")
def diffusion_dir(trained):
    return trained[1]["bundled"]


def losses(path) -> list[float]:
    return [json.loads(line)["loss"] for line in (path / "train_log.jsonl").read_text().splitlines()]


def cpu_computes_in_bf16() -> bool:
    """Read off /proc/cpuinfo, independently of torch: AVX512-BF16 or AMX. Elsewhere bf16 is emulated, and
    a step on an AVX2-only AMD EPYC took about 30 times as long as in fp32."""
    flags = set(re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M).group(1).split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def test_short_training_runs_lower_the_loss_and_write_loadable_checkpoints(ar_dir, diffusion_dir):
    for path, block in ((ar_dir, 1), (diffusion_dir, 8)):
        loss = losses(path)
        assert sum(loss[-5:]) / 5 < sum(loss[:5]) / 5, loss
        ckpt = load_checkpoint(path, device="cpu")
        assert ckpt.config.block_size == block and ckpt.config.attention == "block"
        let = str(ckpt.tokenizer.encode("Let me check that for you.")[0])  # both fillers' first word
        assert ckpt.config.extra["generation"]["opening_floor"] == {let: OPENING_FLOOR}
        engine = Engine(ckpt)
        prompt = engine.tokenizer.encode_chat([{"role": "user", "content": "hi"}])
        gen = engine.generate([prompt], GenerationParams(gen_length=16, steps=16))[0]
        assert gen.forwards >= 1


def test_the_recipe_writes_each_stage_lineage_from_the_recipe_and_the_commit(recipe, trained, ar_dir):
    out, shipped = trained
    info = json.loads((shipped["bundled"] / "train_info.json").read_text())
    assert info["stage"] == "diffusion" and info["init"] == "ar"
    assert re.fullmatch(r"[0-9a-f]{40}", info["commit"]) and isinstance(info["dirty"], bool)
    assert info["settings"] == {**recipe.data, **recipe.backbone, **recipe.stages[1].settings}
    assert info["run"]["steps"] == 20 and info["run"]["device"] == "cpu" and info["run"]["seconds"] > 0
    assert info["run"]["autocast"] == ("bfloat16" if cpu_computes_in_bf16() else "float32")
    assert [e["stage"] for e in info["earlier"]] == ["ar"]
    ar_info = json.loads((ar_dir / "train_info.json").read_text())
    assert info["earlier"][0] == {k: v for k, v in ar_info.items() if k != "earlier"}
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert run_recipe(recipe, out) == shipped  # done stages are not trained again
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_install_ships_the_recipes_stages_in_its_dtype(tmp_path, recipe, trained):
    out, _ = trained
    weights = {"bundled": tmp_path / "diffusion", "bundled-ar": tmp_path / "ar"}
    install(recipe, out, weights)
    for name, stage in recipe.ships.items():
        tensors = load_file(str(weights[name] / "model.safetensors"))
        assert {t.dtype for t in tensors.values()} == {torch.bfloat16}
        trained_model = load_checkpoint(out / stage, device="cpu").model
        shipped = load_checkpoint(weights[name], device="cpu")
        for key, value in shipped.model.state_dict().items():  # fp32 in the engine, bf16-rounded
            assert torch.equal(value, trained_model.state_dict()[key].to(torch.bfloat16).float())
        assert (weights[name] / "train_info.json").read_bytes() == (
            out / stage / "train_info.json"
        ).read_bytes()


@pytest.mark.parametrize(
    "old, new, error",
    [
        ('init = "ar"', 'init = "diffusion"', "not an earlier stage"),
        ("steps = 20", "step = 20", "unknown keys"),
        ("hidden_size = 64", "hidden = 64", "unknown keys"),
        ('bundled-ar = "ar"', 'bundled-ar = "twin"', "do not exist"),
        ('ship_dtype = "bfloat16"', 'ship_dtype = "int4"', "ship_dtype"),
    ],
)
def test_a_recipe_with_mistakes_is_refused(tmp_path, old, new, error):
    path = tmp_path / "recipe.toml"
    path.write_text(TINY_RECIPE.replace(old, new))
    with pytest.raises(ValueError, match=error):
        load_recipe(path)


def test_ttfat_train_takes_the_recipe_options(recipe, trained, capsys):
    """`ttfat train --recipe FILE --out DIR` reaches the recipe (a finished run trains nothing more)."""
    from ttfat.cli import main

    out, paths = trained
    before = {p: (p / "train_info.json").read_bytes() for p in paths.values()}
    assert main(["train", "--recipe", str(recipe.path), "--out", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{m}: {p}" for m, p in paths.items()]
    assert before == {p: (p / "train_info.json").read_bytes() for p in paths.values()}


def test_the_shipped_recipe_reads():
    recipe = load_recipe()
    assert [s.name for s in recipe.stages] == ["ar", "diffusion"] and recipe.stages[1].init == "ar"
    assert recipe.ships == {"bundled": "diffusion", "bundled-ar": "ar"}


@pytest.mark.parametrize("which", ["trained", "bundled", "bundled-ar"])
def test_a_name_is_the_same_tokens_said_and_as_a_tool_argument(request, which):
    """The copy into check_stock is token for token, and conversations still decode to themselves."""
    tok = Tokenizer(request.getfixturevalue("ar_dir") if which == "trained" else BUNDLED[which])
    call = {
        "type": "function",
        "function": {"name": "check_stock", "arguments": '{"product": "charcoal grill"}'},
    }
    conversation = [
        {"role": "user", "content": "do you have a charcoal grill"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [call]},
        {"role": "tool", "content": '{"product": "charcoal grill", "found": false}'},
    ]
    text = tok.apply_chat_template(conversation, add_generation_prompt=False)
    ids = tok.encode(text)
    name = tok.encode(" charcoal grill")
    starts = [i for i in range(len(ids)) if ids[i : i + len(name)] == name]
    assert len(starts) == 3, [tok.decode([t]) for t in ids]
    assert tok.decode(ids, skip_special_tokens=False) == text


def test_resume_continues_from_the_saved_step(tmp_path):
    cfg = TrainConfig(out=tmp_path, block_size=1, steps=4, **(TINY | {"save_every": 2}), bf16=False)
    assert train(cfg)["autocast"] == "float32"  # --fp32 wins where bf16 would be picked
    cfg.steps = 6
    train(cfg)
    steps = [json.loads(line)["step"] for line in (tmp_path / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5, 6]


def test_a_run_cut_short_and_resumed_trains_what_an_uninterrupted_run_trains(tmp_path, monkeypatch):
    """Resumed from its last checkpoint, a stage draws the same batches and masks an uninterrupted run
    would, and logs each step once."""
    import llm.support.train as training

    def run(out, crash_after=None):
        saves = []
        real_save = training.save_checkpoint

        def save(model, path):  # the fault: the process dies right after a checkpoint
            real_save(model, path)
            saves.append(path)
            if len(saves) == crash_after:
                raise KeyboardInterrupt

        monkeypatch.setattr(training, "save_checkpoint", save)
        cfg = TrainConfig(out=out, block_size=8, steps=6, complementary=True, **(TINY | {"save_every": 2}))
        try:
            train(cfg)
        except KeyboardInterrupt:
            monkeypatch.setattr(training, "save_checkpoint", real_save)
            train(cfg)

    run(tmp_path / "straight")
    run(tmp_path / "resumed", crash_after=2)
    logs = [(tmp_path / d / "train_log.jsonl").read_text() for d in ("straight", "resumed")]
    assert [json.loads(line)["step"] for line in logs[1].splitlines()] == [1, 2, 3, 4, 5, 6]
    assert logs[0] == logs[1]
    a, b = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("straight", "resumed"))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(("block", "complementary"), [(1, False), (8, False), (8, True)])
def test_training_layout_equals_inference_logits(diffusion_dir, block, complementary):
    """Logits the trainer computes for masked answer tokens equal the engine's, block by block."""
    from llm.support.conversations import make_examples

    ckpt = load_checkpoint(diffusion_dir, device="cpu")
    model, tok, cfg = ckpt.model, ckpt.tokenizer, ckpt.config
    pairs = sorted(
        (render(tok, e.messages, e.target) for e in make_examples(48, seed=3)),
        key=lambda p: len(p[0]) + 3 * len(p[1]),  # a row holds the answer 3 times: clean, noisy, complement
    )
    pairs = pairs[:11] + pairs[-1:]  # the longest sets the row length; the shortest share rows
    batches = Batches(pairs, cfg, block, min_t=0.5, complementary=complementary)
    batch = batches.make(list(range(len(pairs))), torch.Generator().manual_seed(0))
    with torch.no_grad():
        trained = batch_logits(model, batch)
        first = 0
        for i, (prompt, answer) in enumerate(pairs):
            row, offset, n = batch["segments"][i]
            labels = batch["labels"][first : first + n]
            if block == 1:
                canvas = torch.tensor(prompt + answer)
                views = [(torch.arange(len(prompt), len(canvas)), canvas, torch.arange(len(canvas)))]
                clean = answer
            else:
                a = -(-len(answer) // block) * block
                clean = answer + cfg.eos_token_ids * (a - len(answer))
                row = batch["ids"][row, offset:]
                q = len(prompt) - batches.shared
                offs = torch.arange(len(prompt) + a) - len(prompt)
                block_ids = torch.where(offs < 0, torch.arange(len(prompt) + a), len(prompt) + offs // block)
                views = []
                for c in range(2 if complementary else 1):  # each noisy copy, in label order
                    lo = q + a - block + c * a  # after the clean copy, which leaves out its last block
                    noisy = row[lo : lo + a]
                    targets = len(prompt) + torch.nonzero(noisy == cfg.mask_token_id).flatten()
                    # the engine's view when denoising the block of each target: clean blocks before
                    # it, the noisy block itself; later blocks do not exist yet (block attention)
                    canvas = torch.tensor(prompt + clean)
                    canvas[len(prompt) :] = torch.where(
                        noisy == cfg.mask_token_id, noisy, canvas[len(prompt) :]
                    )
                    views.append((targets, canvas, block_ids))
            j = 0
            for targets, canvas, block_ids in views:
                for t in targets.tolist():
                    view = canvas.clone()
                    if block > 1:  # blocks before the target's are clean in the engine's view
                        k = (t - len(prompt)) // block
                        s = len(prompt) + k * block
                        view[len(prompt) : s] = torch.tensor(clean[: s - len(prompt)])
                        view = view[: s + block]
                    else:
                        view = view[: t + 1]
                    full = model.full_logits(view[None], block_ids[None, : len(view)])[0]
                    assert torch.allclose(trained[first + j], full[t - 1], atol=1e-4), (i, j)
                    j += 1
            assert j == n
            first += n
            if complementary:  # every answer token is a label exactly once
                assert sorted(labels.tolist()) == sorted(clean)
        assert first == len(batch["labels"])
        assert len(batch["ids"]) < len(pairs)  # packed: several examples share a row


@pytest.mark.parametrize("block", [1, 8])
def test_packing_examples_into_rows_changes_no_loss(diffusion_dir, block):
    """Examples packed several to a row (first fit) give the loss and gradients they give one a row."""
    from llm.support.conversations import make_examples

    ckpt = load_checkpoint(diffusion_dir, device="cpu")
    model, tok = ckpt.model, ckpt.tokenizer
    pairs = [render(tok, e.messages, e.target) for e in make_examples(24, seed=5)]
    batches = Batches(pairs, ckpt.config, block, min_t=0.2, complementary=block > 1)
    results, tokens = [], []
    for packed in (False, True):
        batch = batches.make(list(range(24)), torch.Generator().manual_seed(0), packed=packed)
        rows = len(batch.pop("segments")) and batch["ids"].shape[0]
        tokens.append(int((batch["ids"] != ckpt.config.pad_token_id).sum()))
        model.zero_grad()
        loss = batch_loss(model, batch)
        loss.backward()
        results.append((rows, loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (rows_one, loss_one, grads_one), (rows_packed, loss_packed, grads_packed) = results
    assert rows_one == 24 and rows_packed < 24
    if block == 1:  # a turn's second call shares its first call's tokens (consecutive examples here)
        chains = [c for c in batches.chains if len(c) > 1]
        shared = sum(len(pairs[c[0]][0]) - batches.shared + len(pairs[c[0]][1]) for c in chains)
        assert chains and tokens[1] == tokens[0] - shared
    else:
        assert tokens[1] == tokens[0]
    assert torch.allclose(loss_one, loss_packed, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads_one, grads_packed, strict=True))


def test_leaving_out_the_clean_copys_last_block_changes_no_loss(diffusion_dir):
    """No noisy block sees the clean copy's last block, so diffusion rows leave it out: one block fewer
    tokens an example, the same loss and gradients."""
    from llm.support.conversations import make_examples

    ckpt = load_checkpoint(diffusion_dir, device="cpu")
    model, tok = ckpt.model, ckpt.tokenizer
    pairs = [render(tok, e.messages, e.target) for e in make_examples(16, seed=7)]
    results = []
    for tail in (True, False):
        batches = Batches(pairs, ckpt.config, 8, min_t=0.2, complementary=True, clean_tail=tail)
        batch = batches.make(list(range(16)), torch.Generator().manual_seed(0), packed=False)
        batch.pop("segments")
        model.zero_grad()
        loss = batch_loss(model, batch)
        loss.backward()
        tokens = int((batch["ids"] != ckpt.config.pad_token_id).sum())
        results.append((tokens, loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (tokens_tail, loss_tail, grads_tail), (tokens, loss, grads) = results
    assert tokens == tokens_tail - 8 * 16
    assert torch.allclose(loss, loss_tail, atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(grads, grads_tail, strict=True))


def test_turns_are_drawn_whole_and_every_example_is_in_one(diffusion_dir):
    """A data turn's two calls form one chain (the second's prompt is the first's row); batches draw
    whole chains, so the trainer's AR rows can hold both calls once."""
    from llm.support.conversations import make_examples

    ckpt = load_checkpoint(diffusion_dir, device="cpu")
    examples = make_examples(60, seed=6)
    pairs = [render(ckpt.tokenizer, e.messages, e.target) for e in examples]
    chains = turn_chains(pairs)
    assert [i for c in chains for i in c] == list(range(60))
    for c in chains:
        assert len(c) <= 2
        if len(c) == 2:  # a tool call, then the answer that reads its result
            assert examples[c[0]].target.get("tool_calls") and not examples[c[1]].target.get("tool_calls")
    assert any(len(c) == 2 for c in chains) and any(len(c) == 1 for c in chains)
    batches = Batches(pairs, ckpt.config, 1, min_t=0.2)
    idx = batches.draw(random.Random(0), 32)
    assert 32 <= len(idx) <= 33
    assert all(run in chains for run in _runs(idx, chains))


def _runs(idx: list[int], chains: list[list[int]]) -> list[list[int]]:
    """``idx`` cut back into the chains it was drawn as (each chain is consecutive in it)."""
    runs, at = [], 0
    while at < len(idx):
        chain = next(c for c in chains if c[0] == idx[at])
        runs.append(idx[at : at + len(chain)])
        at += len(chain)
    return runs


def test_first_fit_fills_rows_longest_first():
    assert first_fit([5, 3, 4, 2, 6], 6) == [[4], [0], [2, 3], [1]]
    bins = first_fit([7, 1, 2, 3, 4, 5, 6, 7], 7)
    assert sorted(j for b in bins for j in b) == list(range(8)) and len(bins) == 5


def test_the_compiled_loss_equals_the_eager_one(diffusion_dir):
    """`compile = true` (the recipe's long stages) computes the same loss and gradients, and one compiled
    graph serves batches of other widths (dynamic shapes)."""
    from llm.support.conversations import make_examples

    ckpt = load_checkpoint(diffusion_dir, device="cpu")
    model, tok = ckpt.model, ckpt.tokenizer
    batches = Batches(
        [render(tok, e.messages, e.target) for e in make_examples(40, seed=4)],
        ckpt.config,
        8,
        min_t=0.2,
        complementary=True,
    )
    compiled = torch.compile(batch_loss, dynamic=True)
    widths = set()
    for first in (0, 10, 20):
        batch = batches.make(list(range(first, first + 10)), torch.Generator().manual_seed(first))
        batch.pop("segments")
        widths.add(batch["ids"].shape[1])
        grads = []
        for fn in (batch_loss, compiled):
            model.zero_grad()
            loss = fn(model, batch)
            loss.backward()
            grads.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        (eager, eager_grads), (comp, comp_grads) = grads
        assert torch.allclose(eager, comp, atol=1e-5)
        assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(eager_grads, comp_grads, strict=True))
    assert len(widths) > 1
