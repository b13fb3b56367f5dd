"""Numbers, ordinals and money in words, as a voice says them ("forty five", "twenty second", "twenty four
dollars and ninety nine cents"): the support domain's answers are written so (llm/support/spoken.py), and
`ttfat probe` reads an agent's heard numbers back into words to check its facts."""

from __future__ import annotations

ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEENS = [
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_ORDINAL_SPECIAL = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}


def number(n: int) -> str:
    """Cardinal in words, no hyphens: 12 -> "twelve", 45 -> "forty five", 1203 -> "one thousand two
    hundred three"."""
    n = int(n)
    if n < 0:
        return "minus " + number(-n)
    if n < 10:
        return ONES[n]
    if n < 20:
        return TEENS[n - 10]
    if n < 100:
        tens, ones = divmod(n, 10)
        return TENS[tens] + ("" if ones == 0 else " " + ONES[ones])
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return ONES[hundreds] + " hundred" + ("" if rest == 0 else " " + number(rest))
    if n < 1_000_000:
        thousands, rest = divmod(n, 1000)
        return number(thousands) + " thousand" + ("" if rest == 0 else " " + number(rest))
    millions, rest = divmod(n, 1_000_000)
    return number(millions) + " million" + ("" if rest == 0 else " " + number(rest))


def ordinal(n: int) -> str:
    """Ordinal in words: 1 -> "first", 3 -> "third", 22 -> "twenty second", 30 -> "thirtieth"."""
    words = number(n).split(" ")
    last = words[-1]
    if last in _ORDINAL_SPECIAL:
        last = _ORDINAL_SPECIAL[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last = last + "th"
    return " ".join(words[:-1] + [last])


def money(cents: int) -> str:
    """Cents in words: 2499 -> "twenty four dollars and ninety nine cents", 100 -> "one dollar",
    5 -> "five cents", 0 -> "zero dollars"."""
    cents = int(cents)
    dollars, rest = divmod(cents, 100)
    parts = []
    if dollars:
        parts.append(number(dollars) + (" dollar" if dollars == 1 else " dollars"))
    if rest:
        parts.append(number(rest) + (" cent" if rest == 1 else " cents"))
    if not parts:
        return "zero dollars"
    return " and ".join(parts)
