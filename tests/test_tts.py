"""The piper synthesizer: its onnxruntime session keeps no memory plan per input shape (each clause has
its own length, and the plans piled up through long runs: issue 22), says exactly what piper's own
loader says, and streams a clause in pieces that join to piper's own audio."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from piper import PiperVoice, SynthesisConfig

from tts.piper import FIRST_FRAMES, LEAD_DB, Synthesizer, bundled_voice, split_voice, without_lead

SILENT = 32768 * 10 ** (LEAD_DB / 20) * 4  # no sample of a lead trimmed away is louder (a peak, 12 dB over)


def test_the_voice_keeps_no_memory_plan_per_clause_length_and_sounds_as_pipers_own():
    quiet = dict(noise_scale=0.0, noise_w_scale=0.0)  # deterministic synthesis
    ours = Synthesizer(**quiet)
    assert all(s.get_session_options().enable_mem_pattern is False for s in ours.sessions)
    pipers = PiperVoice.load(bundled_voice())
    assert pipers.session.get_session_options().enable_mem_pattern is True  # what we turn off
    leads = []
    for text in ("Your order has shipped.", "Sorry, that is out of stock until Friday, December fourth."):
        mine = ours.speak(text)
        theirs = np.concatenate([c.audio_int16_array for c in pipers.synthesize(text, ours.config)])
        assert mine.sample_rate == pipers.config.sample_rate
        lead = len(theirs) - len(mine.audio)  # ours starts where the voice first sounds: 40 ms, then 0
        assert lead >= 0 and np.abs(theirs[:lead], dtype=np.int32).max(initial=0) < SILENT
        assert np.abs(mine.audio.astype(np.int32) - theirs[lead:]).max() <= 1  # the voice cut in two
        leads.append(lead)
    assert leads[0] > 0


QUIET = dict(noise_scale=0.0, noise_w_scale=0.0)  # deterministic synthesis
LONG = "Yes, we have fifty two in stock at nineteen dollars and ninety nine cents each."


def unnormalized(path: Path, text: str) -> np.ndarray:
    """piper's own synthesis of `text` at the model's level (the pieces cannot know a sentence's peak),
    each sentence less its leading silence, as ours."""
    config = SynthesisConfig(normalize_audio=False, **QUIET)
    chunks = PiperVoice.load(path).synthesize(text, config)
    return np.concatenate([without_lead(c.audio_int16_array, c.sample_rate) for c in chunks])


def test_a_clause_streams_in_pieces_that_join_to_pipers_own_audio():
    ours = Synthesizer(**QUIET)
    assert ours.streams
    for text in (LONG, "Your order has shipped. It arrives on Friday."):
        pieces = [piece.audio for piece in ours.stream(text)]
        assert len(pieces) >= 3  # two sentences, or one long one
        assert len(pieces[0]) <= FIRST_FRAMES * ours.hop  # the first piece is short: heard early
        joined, theirs = np.concatenate(pieces), unnormalized(bundled_voice(), text)
        assert len(joined) == len(theirs)
        # the decoder sees CONTEXT_FRAMES past each edge: the seams are exact to within rounding
        assert np.abs(joined.astype(np.int32) - theirs).max() <= 2
    assert [len(p.audio) for p in ours.stream("...")] == [0]  # nothing to say: one empty piece


def test_a_voice_whose_graph_cannot_be_cut_streams_a_sentence_at_a_time(tmp_path):
    import onnx

    model = onnx.load(str(bundled_voice()))
    for node in model.graph.node:  # a graph laid out otherwise: no /flow/ scope to cut at
        node.name = node.name.replace("/flow/", "/coupling/")
    path = tmp_path / "voice.onnx"
    onnx.save(model, str(path))
    (tmp_path / "voice.onnx.json").write_text(Path(str(bundled_voice()) + ".json").read_text())
    assert split_voice(path) is None
    voice = Synthesizer(path, **QUIET)
    assert not voice.streams
    text = "Your order has shipped. It arrives on Friday."
    pieces = [piece.audio for piece in voice.stream(text)]
    assert len(pieces) == 2
    assert np.array_equal(np.concatenate(pieces), unnormalized(path, text))
