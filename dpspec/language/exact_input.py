"""Numbers and keys read from files dpspec did not write: parsed once, exactly, and refused when
reading them would change their meaning.

A float that underflows to 0 (`rho: 1.0e-400`) reads as no privacy loss at all, one that
overflows to infinity (`1e999`) as no protection; both are refused with the text as written. A
key given twice in a mapping (`rho: 19.776`, later `rho: 0.001`) is refused naming the key and
both lines, where YAML and JSON readers keep the last one without a word.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction

_DECIMAL = re.compile(r"[+-]?(\d[\d_]*\.?[\d_]*|\.\d[\d_]*)([eE][+-]?\d+)?\Z")
MAX_EXPONENT_DIGITS = 4  # Fraction('1e-99999999') takes hours; no parameter needs 10^±10000


class NumberProblem(ValueError):
    """A number that cannot be read as written, or a mapping that gives a key twice."""


def range_problem(text: str, value: float) -> str | None:
    """Why the float `value` read from `text` does not mean what the text says, or None."""
    if math.isinf(value) and not re.fullmatch(r"[+-]?(\.?inf(inity)?)", text.strip(), re.IGNORECASE):
        return f"{text.strip()} is too large to compute with (it would be read as infinity; at most about 1.8e308)"
    if value == 0 and re.search(r"[1-9]", text.split("e")[0].split("E")[0]):
        return (
            f"{text.strip()} is too small to compute with (it would be read as 0, which means something else; "
            "the smallest is about 5e-324)"
        )
    return None


def exact_decimal(text: str) -> Fraction:
    """A decimal as written ('19.776' is 2472/125), NumberProblem if it is not one or its exponent
    has more than MAX_EXPONENT_DIGITS digits."""
    item = text.strip()
    m = _DECIMAL.match(item)
    if not m:
        raise NumberProblem(f"{item!r} is not a number")
    if m.group(2) and len(m.group(2)[1:].lstrip("+-").lstrip("0")) > MAX_EXPONENT_DIGITS:
        raise NumberProblem(f"{item}: the exponent is out of range")
    return Fraction(item.replace("_", ""))


def _duplicates(text: str):
    """A json object_pairs_hook refusing a key given twice, naming both lines of the text."""

    def hook(pairs):
        seen = {}
        for key, _ in pairs:
            if key in seen:
                lines = [
                    text.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)
                ]
                where = f" (lines {lines[0]} and {lines[1]})" if len(lines) >= 2 else ""
                raise NumberProblem(f"the key {key!r} is given twice in one object{where}; keep one")
            seen[key] = True
        return dict(pairs)

    return hook


def _float(text: str) -> float:
    value = float(text)
    problem = range_problem(text, value)
    if problem:
        raise NumberProblem(problem)
    return value


def strict_json(text: str | bytes):
    """json.loads that refuses duplicate keys and floats that under- or overflow (NumberProblem,
    a ValueError, so callers that catch invalid JSON catch these too)."""
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
    return json.loads(text, object_pairs_hook=_duplicates(text), parse_float=_float)
