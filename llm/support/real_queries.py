"""Real user queries, read from the shared data directory and never copied into the repo: what the
evaluation tries the model on besides the generator's own phrasings."""

from __future__ import annotations

import csv
import json
import os
import random
from pathlib import Path

# CLINC150 intents a store support line handles; every other CLINC150 intent (and "oos") is out of scope.
CLINC_IN_SCOPE = {"order_status", "greeting", "goodbye", "thank_you", "what_can_i_ask_you"}
# Too context-dependent to call either way: left out.
CLINC_AMBIGUOUS = {"yes", "no", "maybe", "repeat", "cancel"}


def shared_text_dir() -> Path:
    env = os.environ.get("TTFAT_SHARED_DATA")
    if env:
        p = Path(env)
        return p / "text" if (p / "text").is_dir() else p
    return Path(__file__).resolve().parents[3] / "shared" / "data" / "text"


def real_queries(limit: int | None = None) -> list[dict]:
    """Real user queries: CLINC150 (test + oos_test), Banking77 (test), ABCD sample (customer openings).

    Returns ``[{"text", "source", "label", "out_of_scope"}]`` in a fixed shuffled order (so a ``limit``
    mixes the sources). Missing sources are skipped; an empty list when nothing is there.
    """
    root = shared_text_dir()
    out: list[dict] = []
    clinc = root / "clinc150" / "data_full.json"
    if clinc.exists():
        data = json.loads(clinc.read_text())
        for part in ("test", "oos_test"):
            for text, label in data.get(part, []):
                if label in CLINC_AMBIGUOUS:
                    continue
                out.append(
                    {
                        "text": text,
                        "source": "clinc150",
                        "label": label,
                        "out_of_scope": label not in CLINC_IN_SCOPE,
                    }
                )
    banking = root / "banking77" / "test.csv"
    if banking.exists():
        with banking.open(newline="") as f:
            for row in csv.DictReader(f):
                out.append(
                    {
                        "text": row["text"],
                        "source": "banking77",
                        "label": row["category"],
                        "out_of_scope": True,
                    }
                )
    abcd = root / "abcd_sample" / "abcd_sample.json"
    if abcd.exists():
        for conv in json.loads(abcd.read_text()):
            flow = conv.get("scenario", {}).get("flow", "")
            sub = conv.get("scenario", {}).get("subflow", "")
            for speaker, text in conv.get("original", []):
                # The caller's first real request (skip bare greetings and names).
                if speaker == "customer" and len(text.split()) >= 4:
                    out.append(
                        {"text": text, "source": "abcd", "label": f"{flow}/{sub}", "out_of_scope": False}
                    )
                    break
    random.Random(0).shuffle(out)
    return out if limit is None else out[:limit]
