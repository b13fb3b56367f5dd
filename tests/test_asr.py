"""ASR accuracy on real human speech from ../shared/data/speech (never copied into the project)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asr.whisper import AsrModelError, Transcriber, bundled_model
from voice.audio import load_audio
from voice.report import wer

SPEECH = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "speech"
KINDS = ("human_reference", "test_expected_text", "script_text")


def human_clips(folder: str, limit: int) -> list[dict]:
    rows = [json.loads(line) for line in (SPEECH / "manifest.jsonl").read_text().splitlines()]
    usable = lambda r: r["speech_origin"] == "human" and r["transcript"] and r["transcript_kind"] in KINDS  # noqa: E731
    return [r for r in rows if r["file"].startswith(folder) and usable(r) and r["duration_s"] <= 15][:limit]


@pytest.fixture(scope="module")
def transcriber() -> Transcriber:
    return Transcriber()


@pytest.mark.parametrize(("folder", "limit", "bound"), [("clips/", 40, 0.12), ("telephony/", 20, 0.08)])
def test_word_error_rate_on_human_speech(transcriber, folder, limit, bound):
    clips = human_clips(folder, limit)
    assert len(clips) >= 10, f"expected human clips with transcripts in {SPEECH / folder}"
    pairs = [
        (c["transcript"], transcriber.transcribe(load_audio(SPEECH / c["file"]).samples).text) for c in clips
    ]
    rate = wer(pairs)
    print(f"tiny.en WER on {len(pairs)} human {folder} clips: {100 * rate:.1f}%")
    assert rate <= bound


def test_models_are_local_only():
    assert (bundled_model("tiny.en") / "model.bin").is_file()
    with pytest.raises(AsrModelError, match="neither tiny.en, base nor"):
        bundled_model("large-v3")  # a size name would download: refused, with the choices
