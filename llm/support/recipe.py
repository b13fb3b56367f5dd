"""The bundled models' recipe: one TOML file (``recipe.toml``) names the data, the backbone and the
stages, and ``run_recipe`` trains every stage of it from scratch on this commit's generator, the AR twin
first and then the diffusion model adapted from it (`ttfat train --recipe FILE --out DIR`,
`make models`). Its command line (`main`, which `ttfat train` runs) also trains one stage by hand; it
lives here, not in train.py, so that a stage's training never imports the recipe that runs it.

Each stage trains into ``DIR/<stage>`` and resumes there from its last checkpoint; a stage whose
``train_info.json`` is written is done and skipped. ``train_info.json`` is written here, from the recipe,
the stage's settings and the commit, never by hand: it is the model's lineage.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

import torch

from llm.support.train import TrainConfig, train

ROOT = Path(__file__).resolve().parents[2]
RECIPE = Path(__file__).with_name("recipe.toml")

# What a stage may set (everything else in TrainConfig comes from [data] and [backbone]).
STAGE_KEYS = {
    "block_size", "steps", "batch_size", "lr", "warmup", "seed", "complementary", "min_t", "save_every",
    "compile",
}  # fmt: skip
DATA_KEYS = {"examples", "tokenizer_examples"}
BACKBONE_KEYS = {"hidden_size", "num_layers", "num_heads", "intermediate_size", "vocab_size"}


@dataclass
class Stage:
    name: str  # its folder under the output directory
    init: str | None  # the stage it starts from; None trains from scratch (a new tokenizer too)
    settings: dict = field(default_factory=dict)  # TrainConfig fields


@dataclass
class Recipe:
    path: Path
    data: dict
    backbone: dict
    stages: list[Stage]
    ships: dict[str, str]  # bundled model name -> the stage that is shipped as it
    ship_dtype: str = "float32"  # what the shipped weights are stored in


def load_recipe(path: str | Path = RECIPE) -> Recipe:
    """Read and check a recipe file: unknown keys and stages that start from a later stage are errors."""
    path = Path(path)
    raw = tomllib.loads(path.read_text())
    data, backbone = raw.get("data", {}), raw.get("backbone", {})
    for section, got, allowed in (("data", data, DATA_KEYS), ("backbone", backbone, BACKBONE_KEYS)):
        if unknown := set(got) - allowed:
            raise ValueError(f"{path}: [{section}] has unknown keys {sorted(unknown)}")
    stages: list[Stage] = []
    for i, s in enumerate(raw.get("stages", [])):
        s = dict(s)
        name, init = s.pop("name", None), s.pop("init", None)
        if not name:
            raise ValueError(f"{path}: stage {i + 1} has no name")
        if unknown := set(s) - STAGE_KEYS:
            raise ValueError(f"{path}: stage {name!r} has unknown keys {sorted(unknown)}")
        if init is not None and init not in {st.name for st in stages}:
            raise ValueError(f"{path}: stage {name!r} starts from {init!r}, which is not an earlier stage")
        stages.append(Stage(name, init, s))
    if not stages:
        raise ValueError(f"{path}: no [[stages]]")
    ships = dict(raw.get("ships", {}))
    if missing := set(ships.values()) - {s.name for s in stages}:
        raise ValueError(f"{path}: [ships] names stages that do not exist: {sorted(missing)}")
    dtype = raw.get("ship_dtype", "float32")
    if dtype not in ("float32", "bfloat16"):
        raise ValueError(f"{path}: ship_dtype must be float32 or bfloat16, not {dtype!r}")
    return Recipe(path, data, backbone, stages, ships, dtype)


def commit() -> dict:
    """The commit the generator comes from, and whether the tree had changes."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "HEAD")
    return {"commit": head or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def stage_config(recipe: Recipe, stage: Stage, out: Path, device: str = "cpu") -> TrainConfig:
    known = {f.name for f in fields(TrainConfig)}
    settings = {**recipe.data, **recipe.backbone, **stage.settings}
    assert set(settings) <= known, set(settings) - known
    init = out / stage.init if stage.init else None
    return TrainConfig(out=out / stage.name, init=init, device=device, **settings)


def run_recipe(recipe: Recipe, out: str | Path, device: str = "cpu") -> dict[str, Path]:
    """Train every stage not yet done; return the shipped models' folders by bundled name."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    source = commit()
    lineage: dict[str, dict] = {}
    for stage in recipe.stages:
        tc = stage_config(recipe, stage, out, device)
        info_file = tc.out / "train_info.json"
        if not info_file.exists():
            result = train(tc)
            info = {
                "recipe": os.path.relpath(recipe.path.resolve(), ROOT),
                "stage": stage.name,
                "init": stage.init,
                **source,
                "settings": {**recipe.data, **recipe.backbone, **stage.settings},
                "run": result,
                "earlier": [lineage[s] for s in _ancestors(recipe, stage)],
            }
            info_file.write_text(json.dumps(info, indent=2) + "\n")
        lineage[stage.name] = {k: v for k, v in json.loads(info_file.read_text()).items() if k != "earlier"}
    return {model: out / stage for model, stage in recipe.ships.items()}


def _ancestors(recipe: Recipe, stage: Stage) -> list[str]:
    by_name = {s.name: s for s in recipe.stages}
    chain, init = [], stage.init
    while init is not None:
        chain.append(init)
        init = by_name[init].init
    return chain[::-1]


SHIPPED_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "train_info.json",
    "train_log.jsonl",
)


def install(recipe: Recipe, out: str | Path, weights: dict[str, Path] | None = None) -> dict[str, Path]:
    """Copy the shipped stages, trained into ``out``, over the bundled models (``weights``: name -> its
    folder, the bundled ones by default), the weights in the recipe's ``ship_dtype``."""
    from safetensors.torch import load_file, save_file

    from llm.support.models import BUNDLED

    weights = weights or BUNDLED
    done = {}
    for model, stage in recipe.ships.items():
        src, dst = Path(out) / stage, Path(weights[model])
        if not (src / "train_info.json").exists():
            raise FileNotFoundError(f"{src}: stage {stage!r} is not trained yet (run the recipe first)")
        dst.mkdir(parents=True, exist_ok=True)
        for name in SHIPPED_FILES:
            (dst / name).write_bytes((src / name).read_bytes())
        tensors = load_file(str(src / "model.safetensors"))
        dtype = getattr(torch, recipe.ship_dtype)
        save_file({k: v.to(dtype).contiguous() for k, v in tensors.items()}, str(dst / "model.safetensors"))
        done[model] = dst
    return done


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m llm.support.recipe",
        description="Train the bundled models from their recipe (--recipe), or one stage by hand.",
        epilog="The shipped models: python -m llm.support.recipe --recipe llm/support/recipe.toml --out "
        "build/models, then --install to copy the shipped stages into llm/support/weights/.",
    )
    p.add_argument("--out", type=Path, required=True, help="output dir (resumes from what is there)")
    p.add_argument("--recipe", type=Path, help="train every stage of this recipe (llm/support/recipe.toml)")
    p.add_argument(
        "--install",
        action="store_true",
        help="with --recipe: copy the shipped stages, trained "
        "into --out, over the bundled weights (in the recipe's dtype)",
    )
    p.add_argument("--block-size", type=int, default=1, help="1 = autoregressive twin; 8 = block diffusion")
    p.add_argument("--init", type=Path, help="start from this checkpoint (the AR model for stage 2)")
    for name in ("steps", "batch_size", "examples", "seed", "save_every"):
        p.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(TrainConfig, name))
    p.add_argument("--lr", type=float, default=TrainConfig.lr)
    p.add_argument(
        "--fp32",
        action="store_true",
        help="no bf16 autocast (default: bf16 where the hardware "
        "computes in it, a GPU or a CPU with AVX512-BF16 or AMX; fp32 elsewhere)",
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the loss (long runs)")
    p.add_argument(
        "--complementary", action="store_true", help="diffusion: train on both a mask and its complement"
    )
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    if a.recipe is not None:
        recipe = load_recipe(a.recipe)
        if a.install:
            for model, path in install(recipe, a.out).items():
                print(f"installed {model}: {path}")
            return
        for model, path in run_recipe(recipe, a.out, device=a.device).items():
            print(f"{model}: {path}")
        return
    tc = TrainConfig(
        out=a.out,
        block_size=a.block_size,
        init=a.init,
        steps=a.steps,
        batch_size=a.batch_size,
        examples=a.examples,
        seed=a.seed,
        save_every=a.save_every,
        lr=a.lr,
        bf16=False if a.fp32 else None,
        complementary=a.complementary,
        compile=a.compile,
        device=a.device,
    )
    run = train(tc)
    info = {
        "init": str(tc.init) if tc.init else None,
        **commit(),
        "settings": _settings(tc),
        "run": run,
    }
    (tc.out / "train_info.json").write_text(json.dumps(info, indent=2) + "\n")


def _settings(tc: TrainConfig) -> dict:
    return {k: v for k, v in vars(tc).items() if k not in ("out", "init", "device")}


if __name__ == "__main__":
    main()
