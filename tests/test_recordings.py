"""The sample calls in recordings/: the manifest is complete and true to the audio (the turn detector is
tested against its speech boundaries), the tools and facts agree with the bundled store, the files
decode the way the replay decodes them (PyAV), the set stays small, and the generator is deterministic.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from llm.support.policy import order_answer, stock_answer
from llm.support.spoken import parse_order_id
from llm.support.store import Store

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = ROOT / "recordings"
THRESHOLD = 0.01  # the generator's speech boundary: 1% of full scale
LSB = 1 / 32768


def read_manifest(directory: Path) -> list[dict]:
    return [json.loads(line) for line in (directory / "manifest.jsonl").read_text().splitlines()]


CALLS = read_manifest(RECORDINGS)


def decode(path: Path) -> tuple[np.ndarray, int]:
    """(channels x samples float32, sample rate), decoded with PyAV like the replay."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="fltp")
        frames = [out for f in container.decode(stream) for out in resampler.resample(f)]
        frames += resampler.resample(None)
        return np.concatenate([f.to_ndarray() for f in frames], axis=1), stream.rate


def seconds(x: float, rate: int) -> int:
    return round(x * rate)


def test_manifest():
    assert len(CALLS) >= 12
    assert len({c["call"] for c in CALLS}) == len({c["file"] for c in CALLS}) == len(CALLS)
    for c in CALLS:
        assert 2 <= len(c["turns"]) <= 5, c["call"]
        assert [t["turn"] for t in c["turns"]] == list(range(len(c["turns"])))
        for t in c["turns"]:
            assert re.fullmatch(r"[a-z']+( [a-z']+)*", t["text"]), t["text"]  # words as spoken
            assert all(f in t["answer"] for f in t["facts"]), t


def test_variety():
    rates = {c["sample_rate"] for c in CALLS}
    assert {8000, 16000} <= rates and rates & {22050, 44100}
    assert {c["file"].rsplit(".", 1)[1] for c in CALLS} >= {"flac", "wav", "ogg", "mp3"}
    assert any(c["channels"] == 2 for c in CALLS)
    assert any(c["noise"] is None for c in CALLS) and any(c["noise"] for c in CALLS)


def test_size_and_total_duration():
    size = sum(p.stat().st_size for p in RECORDINGS.iterdir() if p.is_file())
    assert size < 15_000_000
    assert 240 <= sum(c["duration_s"] for c in CALLS) <= 360  # the realtime replay benchmark


@pytest.mark.parametrize("call", CALLS, ids=[c["call"] for c in CALLS])
def test_audio_matches_manifest(call):
    audio, rate = decode(RECORDINGS / call["file"])
    assert rate == call["sample_rate"]
    assert len(audio) == call["channels"] and 0 <= call["caller_channel"] < call["channels"]
    lossy = call["codec"] in ("ogg", "mp3")
    assert audio.shape[1] / rate == pytest.approx(call["duration_s"], abs=0.05 if lossy else 0.001)
    caller = audio[call["caller_channel"]]
    assert np.argmax([rms(x) for x in audio]) == call["caller_channel"]  # "auto" finds the caller

    turns = call["turns"]
    assert turns[0]["speech_start_s"] >= 0.5 and turns[-1]["speech_end_s"] <= call["duration_s"] - 1.4
    for t, after in zip(turns, turns[1:], strict=False):
        assert t["speech_start_s"] < t["speech_end_s"] <= after["speech_start_s"] - 3.49  # time to answer
    for t in turns:
        a, b = seconds(t["speech_start_s"], rate), seconds(t["speech_end_s"], rate)
        ms, near, far = seconds(0.001, rate), seconds(0.05, rate), seconds(0.3, rate)
        if call["noise"] is None and not lossy:  # exact: the boundaries are the first/last sample above 1%
            assert np.abs(caller[a - far : a - ms]).max() <= THRESHOLD + LSB
            assert np.abs(caller[a - ms : a + ms]).max() > THRESHOLD
            assert np.abs(caller[b - ms : b + ms]).max() > THRESHOLD
            assert np.abs(caller[b + ms : b + far]).max() <= THRESHOLD + LSB
        else:  # under noise, roughly: speech starts loud, and the turn is louder than the silence after it
            before, after = rms(caller[a - far : a - near]), rms(caller[b + near : b + far])
            assert rms(caller[a : a + 2 * near]) > 2 * before and rms(caller[a:b]) > 2 * after


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


def test_tools_and_facts_agree_with_the_store():
    store = Store()
    for call in CALLS:
        for t in call["turns"]:
            tool = t["expected_tool"]
            if tool is None:
                continue
            assert tool["name"] in ("lookup_order", "check_stock")
            if tool["name"] == "lookup_order":
                oid = tool["arguments"]["order_id"]
                assert oid in store.orders
                assert parse_order_id(t["text"]) == oid  # the caller says the number in this turn
                assert order_answer(t["intent"], store.lookup_order(oid)) == (t["answer"], t["facts"])
            else:
                product = tool["arguments"]["product"]
                assert product in t["text"]
                result = store.check_stock(product)
                assert result["found"] == (product in store.products)  # a missing product is asked on purpose
                assert stock_answer(result) == (t["answer"], t["facts"])


def _without_timing(turns: list[dict]) -> list[dict]:
    return [{k: v for k, v in t.items() if not k.startswith("speech_")} for t in turns]


def test_generator_is_deterministic(tmp_path):
    """Two runs give identical samples and entries; they match the committed calls (the MP3's timing
    included, compared against a lossless rendering of the same call)."""
    only = ["--only", "call08", "--only", "call11", "--lossless"]
    runs = [
        subprocess.Popen(
            [sys.executable, "recordings/make_recordings.py", *only, "--out", str(tmp_path / d)],
            cwd=ROOT,
            stderr=subprocess.PIPE,
        )
        for d in "ab"
    ]
    for p in runs:
        assert p.wait(timeout=300) == 0, p.stderr.read().decode()
    a, b = (read_manifest(tmp_path / d) for d in "ab")
    assert a == b and [e["call"] for e in a] == ["call08", "call11"]
    for entry in a:
        x, _ = decode(tmp_path / "a" / entry["file"])
        np.testing.assert_array_equal(x, decode(tmp_path / "b" / entry["file"])[0])
        committed = next(c for c in CALLS if c["call"] == entry["call"])
        assert _without_timing(entry["turns"]) == _without_timing(committed["turns"])
        for t, u in zip(entry["turns"], committed["turns"], strict=True):
            assert t["speech_start_s"] == pytest.approx(u["speech_start_s"], abs=0.002)
            assert t["speech_end_s"] == pytest.approx(u["speech_end_s"], abs=0.002)
        y, _ = decode(RECORDINGS / committed["file"])
        assert aligned_correlation(x[0], y[0]) > 0.95


def aligned_correlation(x: np.ndarray, y: np.ndarray, max_lag: int = 50) -> float:
    """Normalized correlation of y with x; fails unless it peaks at lag 0 (no codec delay)."""
    n = min(len(x), len(y)) - 2 * max_lag
    ref = x[max_lag : max_lag + n]
    corr = [float(np.dot(ref, y[max_lag + lag : max_lag + lag + n])) for lag in range(-max_lag, max_lag + 1)]
    assert int(np.argmax(corr)) == max_lag
    return corr[max_lag] / float(np.linalg.norm(ref) * np.linalg.norm(y[max_lag : max_lag + n]))
