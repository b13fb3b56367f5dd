"""The piper synthesizer: its onnxruntime session keeps no memory plan per input shape (each clause has
its own length, and the plans piled up through long runs: issue 22), and says exactly what piper's own
loader says."""

from __future__ import annotations

import numpy as np
from piper import PiperVoice

from tts.piper import Synthesizer, bundled_voice


def test_the_voice_keeps_no_memory_plan_per_clause_length_and_sounds_as_pipers_own():
    quiet = dict(noise_scale=0.0, noise_w_scale=0.0)  # deterministic synthesis
    ours = Synthesizer(**quiet)
    assert ours.voice.session.get_session_options().enable_mem_pattern is False
    pipers = PiperVoice.load(bundled_voice())
    assert pipers.session.get_session_options().enable_mem_pattern is True  # what we turn off
    for text in ("Your order has shipped.", "Sorry, that is out of stock until Friday, December fourth."):
        mine = ours.speak(text)
        theirs = np.concatenate([c.audio_int16_array for c in pipers.synthesize(text, ours.config)])
        assert mine.sample_rate == pipers.config.sample_rate
        assert np.array_equal(mine.audio, theirs)
