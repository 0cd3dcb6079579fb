"""Counts in messages read as English: "1 record", "2 records" (a reviewer reads every DataError)."""
from __future__ import annotations


def counted(n, word: str, plural: str | None = None) -> str:
    """'1 person', '3 persons', '1 record', '0 records': ``n`` and its noun in agreement."""
    n = int(n)
    return f"{n} {word if n == 1 else (plural or word + 's')}"
