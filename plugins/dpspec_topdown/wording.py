"""Counts in messages read as English: "1 record", "2 records" (a reviewer reads every DataError)."""

from __future__ import annotations


def counted(n, word: str, plural: str | None = None) -> str:
    """'1 person', '3 persons', '1 record', '0 records': ``n`` and its noun in agreement."""
    n = int(n)
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def listed(values, most: int = 12) -> str:
    """A list of known values short enough to read: all of them up to ``most``, a run of
    consecutive integers as its ends ('0..521', the 522 household types), else the first ones
    and how many there are."""
    values = list(values)
    if len(values) <= most:
        return ", ".join(map(str, values))
    if all(isinstance(v, int) for v in values) and values == list(range(values[0], values[0] + len(values))):
        return f"{values[0]}..{values[-1]}"
    return ", ".join(map(str, values[:most])) + f", ... ({len(values)} in all)"
