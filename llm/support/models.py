"""The bundled models: the support-line diffusion model and its autoregressive twin (model card in
`weights/README.md`). Names a user may give instead of a checkpoint directory."""

from __future__ import annotations

from pathlib import Path

WEIGHTS = Path(__file__).resolve().parent / "weights"
BUNDLED = {"bundled": WEIGHTS / "support-diffusion", "bundled-ar": WEIGHTS / "support-ar"}


class ModelNotFound(FileNotFoundError):
    """A model name that is neither bundled nor a directory; the message says what would be."""


def model_dir(name: str | Path) -> Path:
    """`bundled` (the diffusion model shipped with ttfat), `bundled-ar` (its autoregressive twin) or a
    local checkpoint directory (LLaDA, Dream or ttfat layout)."""
    path = BUNDLED.get(str(name), Path(name))
    if str(name) in BUNDLED and not (path / "config.json").is_file():
        raise ModelNotFound(f"{path}: the bundled model {name!r} is not installed (ttfat train)")
    return path  # a directory: the engine's checkpoint loader says what is wrong with it, if anything


def served_name(name: str | Path) -> str:
    """The model id a server announces: the bundled name, else the directory's name."""
    return str(name) if str(name) in BUNDLED else Path(name).name
