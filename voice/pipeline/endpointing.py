"""An end of turn that listens to the words, two ways.

`goes_on(transcript)`: the words heard by the pause (the speculative transcript) read like the start of
a turn rather than all of it: a lone greeting or acknowledgement ("Okay.", "Hi.") that callers follow
with their request, or words that cannot end a sentence ("my order number is", "and"). The turn then
gets a longer end window; anything else ends on the usual one.

`SmartTurn`: Smart Turn v3.2 (BSD-2-Clause, by Daily; the ONNX file ships inside the `pipecat-ai` wheel,
which setup installs without its dependencies) says from the last 8 s of audio whether the caller is
done. On a pause, a complete turn ends at once and an incomplete one waits longer. Its input is
Whisper's log-mel features of 8 s of audio (zero-mean, unit-variance, padded at the front), which
faster-whisper's feature extractor computes. (On the synthetic callers of recordings/ it separates the
two badly: bench/endpointing.py.)
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np

# A turn that is one of these alone is usually the start of one.
LEADS = {"hi", "hello", "hey", "hi there", "hello there", "okay", "ok", "okay so", "so", "well", "great",
         "thanks", "all right", "alright", "right", "yes", "yeah", "yes hello", "sure", "oh", "um", "uh",
         "good morning", "good afternoon", "good evening", "excuse me", "sorry"}  # fmt: skip
# Words a sentence does not end on.
DANGLING = {"and", "or", "but", "the", "a", "an", "my", "your", "is", "are", "to", "of", "for", "with",
            "about", "um", "uh", "er", "erm", "so", "if", "because"}  # fmt: skip


def goes_on(transcript: str) -> bool:
    """Whether words that stop at a pause are likely to go on (see the module docstring)."""
    words = re.sub(r"[^a-z' ]", " ", transcript.lower()).split()
    words = [w for i, w in enumerate(words) if i == 0 or w != words[i - 1]]  # "Great. Great." (ASR echo)
    return bool(words) and (" ".join(words) in LEADS or words[-1] in DANGLING)


RATE = 16000
SECONDS = 8


class TurnModelError(RuntimeError):
    """The turn model could not be found or loaded."""


def bundled_smart_turn() -> Path:
    spec = importlib.util.find_spec("pipecat")
    if spec is None or not spec.submodule_search_locations:
        raise TurnModelError("Smart Turn ships in the pipecat-ai wheel: pip install --no-deps pipecat-ai")
    package = Path(next(iter(spec.submodule_search_locations)))
    path = package / "audio" / "turn" / "smart_turn" / "data" / "smart-turn-v3.2-cpu.onnx"
    if not path.is_file():
        raise TurnModelError(f"{path}: not in this pipecat-ai (Smart Turn v3.2 came with pipecat-ai 1.14)")
    return path


class SmartTurn:
    """`SmartTurn().complete(audio_16k)` -> the probability that the caller has finished the turn."""

    def __init__(self, path: str | Path | None = None, threads: int = 1):
        import onnxruntime as ort
        from faster_whisper.feature_extractor import FeatureExtractor

        self.path = Path(path) if path else bundled_smart_turn()
        options = ort.SessionOptions()
        options.inter_op_num_threads, options.intra_op_num_threads = 1, threads
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        try:
            self.session = ort.InferenceSession(str(self.path), sess_options=options)
        except Exception as e:  # onnxruntime raises its own exception types
            raise TurnModelError(f"could not load the turn model at {self.path}: {e}") from e
        self.features = FeatureExtractor(chunk_length=SECONDS)

    def complete(self, audio: np.ndarray) -> float:
        audio = audio[-SECONDS * RATE :].astype(np.float32)
        audio = np.pad(audio, (SECONDS * RATE - len(audio), 0))
        audio = (audio - audio.mean()) / np.sqrt(audio.var() + 1e-7)
        features = self.features(audio, padding=0)[None].astype(np.float32)
        return float(self.session.run(None, {"input_features": features})[0][0, 0])
