"""The interval eval-llm reads its targets with."""

import pytest

from llm.support.evaluate import Scores, interval, interval_line


def test_wilson_interval_matches_textbook_values():
    # 0 of 10: the textbook Wilson upper bound 0.2775; 114 of 120 (a 95.0% tool-call figure): 89.5-97.7
    assert interval(0.0, 10) == (0.0, pytest.approx(0.27754, abs=1e-5))
    assert interval(114 / 120, 120) == (pytest.approx(0.89520, abs=1e-5), pytest.approx(0.97689, abs=1e-5))
    low, high = interval(0.3, 50)
    assert (1 - high, 1 - low) == pytest.approx(interval(0.7, 50))
    assert interval(0.5, 0) == (0.0, 1.0)


def test_interval_line_names_both_rates_and_their_counts():
    r = Scores("autoregressive twin", 114 / 120, 172 / 180, 0.95, 1.0, 70.0, 120, 180)
    assert interval_line(r) == (
        "autoregressive twin: tool calls 95.0% [89.5, 97.7] of 120, answer facts 95.6% [91.5, 97.7] of 180"
    )
