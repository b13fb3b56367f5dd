"""An end of turn that listens to the words: the transcript rule, and Smart Turn on real human speech."""

from __future__ import annotations

from pathlib import Path

import pytest

from voice.pipeline.audio import load_audio
from voice.pipeline.endpointing import SmartTurn, TurnModelError, goes_on

CLIP = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "speech"
    / "clips"
    / "livekit__weather_question.flac"
)


def test_words_that_start_a_turn_rather_than_make_one():
    for text in [
        "Okay.",
        "Hi.",
        "Hello?",
        "Great. Great.",
        "um",
        "My order number is",
        "I want to cancel and",
    ]:
        assert goes_on(text), text
    for text in [
        "Where is my order 4217?",
        "Thanks, bye.",
        "Great, thank you.",
        "Okay, thanks.",
        "",
        "Bye bye.",
    ]:
        assert not goes_on(text), text


def test_smart_turn_tells_a_finished_question_from_half_of_one():
    try:
        model = SmartTurn()
    except TurnModelError as e:
        pytest.fail(f"{e} (setup installs it: make setup)")
    audio = load_audio(CLIP).samples  # a person asking "how old is the Brooklyn Bridge"
    assert model.complete(audio) > 0.5 > model.complete(audio[: len(audio) // 2])


def test_the_text_turn_model_is_rebuilt_by_its_recipe():
    """voice/pipeline/textturn.py's recipe rebuilds the shipped weights from ../shared/data/text (seconds on
    a CPU, deterministic: full-batch training, sums in a fixed order), and on the held-out test splits it
    tells complete turns from cut ones."""
    import json

    from voice.pipeline.textturn import DATA, WEIGHTS, TextTurn, accuracy, train, turns

    rebuilt, shipped = train(), json.loads(WEIGHTS.read_text())
    assert rebuilt["weights"].keys() == shipped["weights"].keys()
    assert max(abs(rebuilt["weights"][f] - w) for f, w in shipped["weights"].items()) <= 2e-4
    assert abs(rebuilt["bias"] - shipped["bias"]) <= 2e-4
    model = TextTurn()
    complete, cut = accuracy(model, turns(DATA, "test"))
    assert complete >= 0.85 and cut >= 0.80, (complete, cut)
    assert model.complete("can I talk to a person") > 0.5
    assert all(
        model.complete(t) < 0.5 for t in ("what are your", "I need two space heaters and", "one two three")
    )
