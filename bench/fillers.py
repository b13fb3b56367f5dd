"""Fillers by meaning against the exact phrase list they replace (issue 56): precision and recall on each
set of clauses in tests/data (stall phrases and answers of voice agents, written apart from the rule by
someone who had not seen it), and the clauses each rule gets wrong. The rule was looked at against
`filler_clauses.tsv`; `filler_clauses_fresh.tsv` was written after it and has not been tuned on.

    python bench/fillers.py
"""

from __future__ import annotations

import csv
from pathlib import Path

from voice.pipeline.fillers import is_filler, words

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SETS = ("filler_clauses.tsv", "filler_clauses_fresh.tsv")
# The rule before (voice/chunker.py until issue 56): filler only when one of these, word for word.
BEFORE = {"sure", "okay", "ok", "alright", "all right", "right", "certainly", "of course", "got it",
          "one moment", "one second", "just a moment", "just a second", "hold on", "give me a second",
          "let me check", "let me check that", "let me look", "let me look that up",
          "let me look that up for you", "let me see", "well", "so", "hmm", "um", "uh"}  # fmt: skip


def exact_list(text: str) -> bool:
    return not words(text) or words(text) in BEFORE


def read(name: str) -> list[tuple[bool, str]]:
    """(is filler, clause) for each row of a set."""
    return [
        (r["label"] == "filler", r["clause"]) for r in csv.DictReader((DATA / name).open(), delimiter="\t")
    ]


def main() -> None:
    for name in SETS:
        rows = read(name)
        print(f"# {name}: {len(rows)} clauses, {sum(t for t, _ in rows)} filler")
        print(f"{'rule':<16}{'precision':>10}{'recall':>8}{'answers as filler':>19}{'fillers missed':>16}")
        for rule_name, rule in (("exact list", exact_list), ("by meaning", is_filler)):
            judged = [(truth, rule(text), text) for truth, text in rows]
            tp = sum(t and s for t, s, _ in judged)
            fp = [text for t, s, text in judged if s and not t]
            fn = [text for t, s, text in judged if t and not s]
            precision = f"{tp / (tp + len(fp)):.3f}" if tp + len(fp) else "-"  # none said filler
            print(f"{rule_name:<16}{precision:>10}{tp / (tp + len(fn)):>8.3f}{len(fp):>19}{len(fn):>16}")
            for text in fp if rule is is_filler else ():
                print(f"    answer taken for filler: {text}")
        print("fillers the meaning rule misses:")
        for truth, text in rows:
            if truth and not is_filler(text):
                print(f"    {text}")
        print()


if __name__ == "__main__":
    main()
