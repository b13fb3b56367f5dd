"""A learned end of turn from the words: the probability that what the caller has said so far is all of
their turn, from the words heard by a pause (the speculative transcript).

Trained as LiveKit trains its turn detector, on text: each real user query is a complete turn, and each
of its cuts at a word boundary an incomplete one. The model is a logistic regression over the last words
(one, two and three of them, the word before the last, the first word and the length), small enough to
ship (`textturn.json`) and to rebuild from ../shared/data/text in seconds on a CPU:

    python -m voice.pipeline.textturn [--data ../shared/data/text] [--out voice/pipeline/textturn.json]

It learns on the train splits of CLINC150 and Banking77 and the customers' turns of ABCD, and prints its
accuracy on their test splits (held out). bench/endpointing.py measures it on speech, against the
other rules.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np

WEIGHTS = Path(__file__).with_name("textturn.json")
DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "text"
MIN_COUNT = 10  # a feature seen fewer times in training is not learned
L2 = 1e-5
STEPS = 300
LEARNING_RATE = 0.05


def words(text: str) -> list[str]:
    """Lower case, no punctuation, every numeral one token "#" (ASR writes numbers as digits)."""
    return [w if not w[0].isdigit() else "#" for w in re.findall(r"[a-z0-9']+", text.lower())]


def features(said: list[str]) -> list[str]:
    """What the model sees of the words said so far."""
    if not said:
        return ["empty"]
    last = said[-3:]
    return [
        f"1:{last[-1]}",
        f"2:{' '.join(last[-2:])}",
        f"3:{' '.join(last)}",
        f"p:{said[-2] if len(said) > 1 else '^'}",
        f"0:{said[0]}",
        f"n:{min(len(said), 12)}",
    ]


class TextTurn:
    """`TextTurn().complete("what are your hours")` -> the probability that the turn is complete."""

    def __init__(self, path: str | Path = WEIGHTS):
        model = json.loads(Path(path).read_text())
        self.bias, self.weights = model["bias"], model["weights"]

    def complete(self, transcript: str) -> float:
        return self.of_features(features(words(transcript)))

    def of_features(self, seen: list[str]) -> float:
        z = self.bias + sum(self.weights.get(f, 0.0) for f in seen)
        return 1 / (1 + math.exp(-max(-30.0, min(30.0, z))))


@functools.cache
def bundled_text_turn() -> TextTurn:
    """The shipped model, read once."""
    return TextTurn()


def turns(data: Path, split: str) -> list[str]:
    """Real users' complete turns: CLINC150 and Banking77 queries (`split`: train or test), and for
    training the customers' turns of the ABCD dialogues."""
    clinc = json.loads((data / "clinc150" / "data_full.json").read_text())
    out = [text for text, _ in clinc[split] + clinc[f"oos_{split}"]]
    with open(data / "banking77" / f"{split}.csv", newline="") as f:
        out += [row["text"] for row in csv.DictReader(f)]
    if split == "train":
        for dialogue in json.loads((data / "abcd_sample" / "abcd_sample.json").read_text()):
            out += [text for who, text in dialogue["original"] if who == "customer"]
    return out


def examples(texts: list[str]) -> tuple[list[list[str]], np.ndarray]:
    """Each turn complete (1) and cut after each of its words but the last (0)."""
    rows, labels = [], []
    for text in texts:
        said = words(text)
        for k in range(1, len(said) + 1):
            rows.append(features(said[:k]))
            labels.append(float(k == len(said)))
    return rows, np.array(labels)


def train(data: Path = DATA) -> dict:
    """Full-batch Adam on the class-balanced log loss (deterministic: no sampling, sums in a
    fixed order), over the features seen `MIN_COUNT` times or more."""
    rows, y = examples(turns(data, "train"))
    counts = Counter(f for row in rows for f in row)
    vocab = sorted(f for f, c in counts.items() if c >= MIN_COUNT)
    index = {f: i for i, f in enumerate(vocab)}
    pairs = [(r, index[f]) for r, row in enumerate(rows) for f in row if f in index]
    at, cols = np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])
    weight = np.where(y == 1, (y == 0).sum() / y.sum(), 1.0)
    weight /= weight.sum()
    theta = np.zeros(len(vocab) + 1)  # the weights, then the bias
    m, v = np.zeros_like(theta), np.zeros_like(theta)
    for step in range(1, STEPS + 1):  # Adam, full batch
        z = theta[-1] + np.bincount(at, weights=theta[cols], minlength=len(y))
        err = weight * (1 / (1 + np.exp(-np.clip(z, -30, 30))) - y)
        grad = np.append(np.bincount(cols, weights=err[at], minlength=len(vocab)), err.sum()) + L2 * theta
        m, v = 0.9 * m + 0.1 * grad, 0.999 * v + 0.001 * grad**2
        theta -= LEARNING_RATE * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    w, bias = theta[:-1], theta[-1]
    kept = {f: round(float(v), 4) for f, v in zip(vocab, w, strict=True) if abs(v) >= 1e-3}
    return {"bias": round(float(bias), 4), "weights": kept}


def accuracy(model: TextTurn, texts: list[str]) -> tuple[float, float]:
    """On held-out turns: the share of complete turns judged complete, and of cuts judged incomplete."""
    rows, y = examples(texts)
    judged = np.array([model.of_features(row) >= 0.5 for row in rows])
    return float(judged[y == 1].mean()), float((~judged[y == 0]).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DATA, help="../shared/data/text (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=WEIGHTS, help="where the weights go (default: %(default)s)")
    args = ap.parse_args()
    model = train(args.data)
    args.out.write_text(json.dumps(model, indent=0, sort_keys=True) + "\n")
    complete, cut = accuracy(TextTurn(args.out), turns(args.data, "test"))
    print(
        f"{args.out}: {len(model['weights'])} weights, {args.out.stat().st_size / 1e3:.0f} kB; held-out test "
        f"splits: complete turns judged complete {complete:.1%}, cut turns judged incomplete {cut:.1%}"
    )


if __name__ == "__main__":
    main()
