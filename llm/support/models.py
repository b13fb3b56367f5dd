"""The bundled models: the support-line diffusion model and its autoregressive twin (model card in
`weights/README.md`). Importing this module registers their names with the serving side's registry
(`llm/serving/models.py`); the `ttfat` command does so at start."""

from __future__ import annotations

from pathlib import Path

from llm.serving.models import register

WEIGHTS = Path(__file__).resolve().parent / "weights"
BUNDLED = {"bundled": WEIGHTS / "support-diffusion", "bundled-ar": WEIGHTS / "support-ar"}

for _name, _path in BUNDLED.items():
    register(_name, _path, install="ttfat train")
