"""Models by name: names a user may give instead of a checkpoint directory, resolved here so the engine
only ever sees directories. This module knows no names itself: whoever ships models adds them with
`register` (the support line's `llm/support/models.py` adds `bundled` and `bundled-ar`). Torch-free:
the voice process resolves the model of the server it starts."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


class ModelNotFound(FileNotFoundError):
    """A name that is neither a registered model nor a directory, or a registered model that is not
    installed; the message says what would do."""


@dataclass(frozen=True)
class Registered:
    path: Path  # its checkpoint directory
    install: str  # how a user installs it when it is missing


MODELS: dict[str, Registered] = {}


def register(name: str, path: Path, install: str) -> None:
    """Let `name` stand for the checkpoint directory `path` wherever a model is asked for."""
    MODELS[name] = Registered(Path(path), install)


def model_dir(name: str | Path) -> Path:
    """The checkpoint directory of a registered name, or `name` itself when it is a directory (LLaDA,
    Dream or ttfat layout: the engine's checkpoint loader says what is wrong with it, if anything)."""
    model = MODELS.get(str(name))
    if model is None:
        if not Path(name).is_dir():
            known = ", ".join(MODELS) or "none registered"
            raise ModelNotFound(f"{name}: neither a model name ({known}) nor a checkpoint directory")
        return Path(name)
    if not (model.path / "config.json").is_file():
        raise ModelNotFound(f"{model.path}: the model {str(name)!r} is not installed ({model.install})")
    return model.path


def served_name(name: str | Path) -> str:
    """The model id a server announces: the registered name, else the directory's name."""
    return str(name) if str(name) in MODELS else Path(name).name
