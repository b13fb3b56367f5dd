"""ASR accuracy on real human speech from ../shared/data/speech (never copied into the project)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from asr.whisper import AsrModelError, Transcriber, bundled_model, number_digits
from voice.pipeline.audio import load_audio
from voice.reports.summary import wer

ROOT = Path(__file__).resolve().parents[1]
SPEECH = ROOT.parent / "shared" / "data" / "speech"
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


def test_how_many_digits_a_number_may_spell():
    """What decides whether a fitted window's words are heard again: numbers back to back make one, and a
    word counts at its most, so a long number is never taken for a short one."""
    cases = {
        "Two.": 1,
        "5 5": 2,
        "10 of clubs.": 2,
        "Eight of spades, four of clubs.": 1,
        "order 511": 3,
        "777-0": 4,
        "One, two, three.": 3,
        "fifty eleven": 4,
        "one hundred": 3,
        "Hi.": 0,
    }
    assert {text: number_digits(text) for text in cases} == cases


def test_a_number_the_agent_reads_whole_keeps_the_fitted_windows_words():
    """Window "auto" hears words holding a long number again (a short window drops or doubles a digit) unless
    the agent's `numbers_whole` reads the number as whole: the bundled agent's four-digit order numbers.
    Heard again, the fitted window's 10 likeliest readings come first, and only when none will do the 30 s
    window. On the recorded callers: order 1533 comes out whole from the fitted window and is kept;
    5011 comes out as "511", and a whole reading of it is among the ten; so is 7770 ("77770"); with the
    readings turned off, 7770 is heard right at 30 s."""
    from llm.support.spoken import holds_order_id, parse_order_id
    from voice.runs.replay import find_calls

    auto = Transcriber(window="auto", numbers_whole=holds_order_id)
    calls = {c.name: c for c in find_calls([str(ROOT / "recordings")])}
    cases = (
        ("call05", 1, "1533", ["fit 10 s"], auto),
        ("call03", 0, "5011", ["fit 10 s", "fit 10 s, 10-best"], auto),
        ("call06", 0, "7770", ["fit 10 s", "fit 10 s, 10-best"], auto),
        (
            "call06",
            0,
            "7770",
            ["fit 10 s", "30 s"],
            Transcriber(window="auto", numbers_whole=holds_order_id, nbest=0),
        ),
    )
    for name, turn, order, passes, transcriber in cases:
        call = calls[name]
        ref = call.reference[turn]
        audio = load_audio(call.path, call.channel).samples
        clip = audio[int((ref["speech_start_s"] - 0.3) * 16000) : int((ref["speech_end_s"] + 0.3) * 16000)]
        result = transcriber.transcribe(clip)
        assert result.passes == passes and parse_order_id(result.text) == order, result
    silence = auto.first_pass(np.zeros(16000, np.float32))
    assert not auto.needs_second_pass(silence)  # no number: one pass, as before
    # "fifteen" said alone: two digits are no long number, and not heard again; where every number is (as
    # before lever 6), a short one goes straight to 30 s. Among the fitted window's readings are "15. 15."
    # and "15. 16.", which spell whole four-digit numbers: neither would be taken (the first says its words
    # twice, the second is far less likely than the best reading)
    fifteen = load_audio(SPEECH / "telephony" / "digits__15.flac").samples
    for transcriber, passes in (
        (auto, ["fit 10 s"]),
        (Transcriber(window="auto", numbers_whole=holds_order_id, long_digits=1), ["fit 10 s", "30 s"]),
    ):
        result = transcriber.transcribe(fifteen)
        assert result.passes == passes and "".join(c for c in result.text if c.isdigit()) == "15", result
    assert auto.whole_reading(fifteen, auto.first_pass(fifteen)) is None


def test_sound_whisper_judges_no_speech_gives_no_words(transcriber):
    """A 440 Hz tone an agent plays over the phone line (μ-law, 8 kHz), at 40 offsets within a frame: tiny.en
    reads "You" or "Beep!" into it at some offsets (no-speech probability about 0.7); `words` hears none at
    any of them. A spoken answer over the same line is still heard."""
    from tests.peers import wordless
    from voice.pipeline.audio import resample
    from voice.runs.telephony import Twilio

    wire = Twilio()
    over_the_line = lambda x: resample(wire.parse(wire.agent_media(x)).samples, wire.rate, 16000)  # noqa: E731
    tone = dict(wordless(wire.rate))["tone"]
    read_into = 0
    for offset in range(0, 80, 2):
        heard = over_the_line(
            np.concatenate([np.zeros(400 + offset, np.float32), tone, np.zeros(4000, np.float32)])
        )
        read_into += any(s.words for s in transcriber._segments(heard, word_timestamps=True))
        assert transcriber.words(heard) == [], offset
    assert read_into > 0  # the case this guards against still arises
    speech = load_audio(ROOT / "recordings" / "call03.wav").samples[:80000]
    assert len(transcriber.words(over_the_line(resample(speech, 16000, wire.rate)))) >= 5


def test_a_short_number_after_a_word_naming_an_id_is_heard_again():
    """A fitted window that hears "order 93 once" (call13's "order nine three one six", the audio ending a
    quarter second early, as a pause's transcript does) has two digits: no long number, but one that
    follows "order" may be an id cut short, and is heard again; the fitted window's readings hold 9316.
    A short number that names no id ("fifteen", "2 heaters") is not."""
    from asr.whisper import Transcript, names_id
    from llm.support.spoken import holds_order_id, parse_order_id
    from voice.runs.replay import find_calls

    auto = Transcriber(window="auto", numbers_whole=holds_order_id)
    (call,) = [c for c in find_calls([str(ROOT / "recordings")]) if c.name == "call13"]
    ref = call.reference[0]
    audio = load_audio(call.path, call.channel).samples
    clip = audio[int((ref["speech_start_s"] - 0.3) * 16000) : int((ref["speech_end_s"] - 0.26) * 16000)]
    first = auto.first_pass(clip)
    assert number_digits(first.text) == 2 and not holds_order_id(first.text), first
    result = auto.transcribe(clip)
    assert result.passes == ["fit 10 s", "fit 10 s, 10-best"] and parse_order_id(result.text) == "9316", (
        result
    )
    named = ("order 93 once a", "my account number is 42", "Confirmation, twelve.", "order #7")
    unnamed = ("fifteen", "I need 2 heaters", "in order to get 3", "the order came on the 5th")
    assert [names_id(t) for t in named] == [True] * 4 and [names_id(t) for t in unnamed] == [False] * 4
    short = lambda text: auto.needs_second_pass(Transcript(text, 3.0, 0.0, ["fit 10 s"]))  # noqa: E731
    assert short("What's the status of order 93 once a") and not short("I need 2 heaters")
