"""Everything that shapes the timing of a run, as dataclasses: reports print them, and the command
line takes its defaults from them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

MODES = ("realtime", "fast")
LEVERS = (
    "speculate",
    "preempt",
    "first_clause_first",
    "split_first_clause",
    "stream_speech",
    "words_end_turns",
    "text_turn",
    "smart_turn",
)  # off: serial
VAD_RATES = (8000, 16000, 32000, 48000)
VAD_FRAME_MS = (10, 20, 30)


class SettingsError(ValueError):
    """Settings that cannot work together; the message says which and why."""


@dataclass
class VadConfig:
    """webrtcvad endpointing (voice/pipeline/turns.py)."""

    aggressiveness: int = 3  # 0 (keeps most audio as speech) .. 3 (most aggressive)
    frame_ms: int = 30
    start_ms: int = 150  # window that must be mostly voiced to start a turn
    start_ratio: float = 0.8
    end_ms: int = 300  # window that must be mostly unvoiced to end it (the hangover)
    end_ratio: float = 0.9
    pause_ms: int = 60  # unvoiced this long within a turn, the caller may be done: speculation starts
    quiet_pause: bool = True  # ... or this long far below the caller's level (tail_db), webrtcvad lagging
    pre_roll_ms: int = 300  # audio kept before the start, so the ASR hears the first syllable
    max_turn_s: float = 30.0  # a turn longer than this is cut (one caller monologue, a stuck VAD)
    tail_db: float = 25.0  # t0 refinement: speech ends where energy falls this far below its level
    gate_db: float = 30.0  # frames this far below the caller's speech level are not speech (babble)
    merge_ms: int = 800  # speech resuming within this after an endpoint may continue the turn

    def validate(self, rate: int) -> None:
        if rate not in VAD_RATES:
            raise SettingsError(f"webrtcvad takes sample rates {VAD_RATES}, not {rate} (resample first)")
        if self.frame_ms not in VAD_FRAME_MS:
            raise SettingsError(f"webrtcvad takes frames of {VAD_FRAME_MS} ms, not {self.frame_ms}")
        if not 0 <= self.aggressiveness <= 3:
            raise SettingsError(f"VAD aggressiveness must be 0..3, not {self.aggressiveness}")
        if self.start_ms < self.frame_ms or self.end_ms < self.frame_ms:
            raise SettingsError("VAD start and end windows must hold at least one frame")


@dataclass
class Settings:
    """One call's pipeline (voice/pipeline/call.py)."""

    mode: str = "realtime"  # realtime: audio at its own pace; fast: no waiting for audio while idle
    vad: VadConfig = field(default_factory=VadConfig)
    turn_timeout_s: float = 20.0  # from the endpoint to the last clause heard
    playback_latency_ms: float = 0.0  # the simulated device's output latency
    min_clause_words: int = 4  # a clause ends at , ; : only once it has this many words
    filler_grace_ms: float = 400.0  # a filler is spoken only if no useful words follow within this
    barge_in: bool = True  # caller speech during an answer stops playback and cancels the answer
    # The overlapped pipeline's levers (all off: the serial pipeline, `--serial`)
    speculate: bool = True  # transcribe what was said when the caller falls silent, before the endpoint
    preempt: bool = True  # and answer that transcript then (heard only once the turn is declared over)
    first_clause_first: bool = True  # hold words until their LLM call shows it answers (no filler ahead)
    split_first_clause: bool = True  # the answer's first clause also ends before "and", "but" (sooner heard)
    stream_speech: bool = True  # play a clause's audio piece by piece as the voice makes it (tts/piper.py)
    words_end_turns: bool = True  # words that read like the start of a turn ("Okay.") get a longer end window
    text_turn: bool = False  # ... and so do words the text end-of-turn model finds incomplete (textturn.py)
    smart_turn: bool = False  # on a pause, a turn model ends complete turns and waits on incomplete ones
    complete_at: float = 0.5  # the turn model's probability of a complete turn that ends it
    incomplete_end_ms: int = 600  # the end window of a turn that is likely to go on
    record_audio: bool = True  # keep each turn's audio, caller and answer as heard (run dir audio/)

    def validate(self) -> None:
        if self.mode not in MODES:
            raise SettingsError(f"replay mode must be one of {MODES}, not {self.mode!r}")
        if self.turn_timeout_s <= 0:
            raise SettingsError("the turn timeout must be positive")
        if self.text_turn and not self.words_end_turns:
            raise SettingsError("the text end-of-turn model judges the words heard by a pause: it needs them")
        if (self.preempt or self.words_end_turns) and not self.speculate:
            raise SettingsError(
                "preempting the answer, or ending turns by their words, needs speculative ASR"
            )
        self.vad.validate(16000)  # every call is resampled to 16 kHz for webrtcvad (voice/pipeline/audio.py)

    def serial(self) -> Settings:
        """The same settings with every lever of the overlapped pipeline off."""
        return replace(self, **dict.fromkeys(LEVERS, False))
