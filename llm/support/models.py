"""The bundled models: the support-line diffusion model and its autoregressive twin (model card in
`weights/README.md`). `register_bundled` gives their names to the serving side's registry
(`llm/serving/models.py`); the `ttfat` command calls it at start."""

from __future__ import annotations

from pathlib import Path

from llm.serving.models import register

WEIGHTS = Path(__file__).resolve().parent / "weights"
BUNDLED = {"bundled": WEIGHTS / "support-diffusion", "bundled-ar": WEIGHTS / "support-ar"}


def register_bundled() -> None:
    """Let `bundled` and `bundled-ar` stand for the bundled checkpoints wherever a model is asked for."""
    for name, path in BUNDLED.items():
        register(name, path, install="ttfat train")
