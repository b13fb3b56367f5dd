"""Stop sequences held back across pieces: what is sent never includes a stop sequence or its start."""

import pytest

from llm.serving.stop import StopSequences


@pytest.mark.parametrize(
    "pieces, stops, sent, stopped",
    [
        (["Hello wor", "ld. Bye"], ["world"], "Hello ", True),
        (["ab", "c", "d"], ["cd"], "ab", True),
        (["abc"], ["x"], "abc", False),
        (["a", "bc", "de"], ["cde", "bcx"], "ab", True),  # the earliest stop wins
        (["wor", "m"], ["world"], "worm", False),  # a held start that turned out not to be one
        (["x"], [], "x", False),
    ],
)
def test_stop_sequences(pieces, stops, sent, stopped):
    s = StopSequences(stops)
    out, hit = "", False
    for piece in pieces:
        text, hit = s.feed(piece)
        out += text
        if hit:
            break
    out += "" if hit else s.flush()
    assert (out, hit) == (sent, stopped)
