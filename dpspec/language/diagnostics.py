"""Messages for names that do not resolve ("did you mean"); diagnostics render in dpspec.errors."""

from __future__ import annotations

import difflib


def suggest(name: str, candidates) -> str | None:
    """A 'did you mean' for a misspelled name, or None when nothing is close."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


def unknown(kind: str, name: str, candidates, where: str | None = None) -> tuple[str, str | None]:
    """Message and hint for a name that does not resolve: "unknown column 'x' in table 't'"."""
    guess = suggest(name, candidates)
    hint = f"did you mean '{guess}'?" if guess else None
    known = sorted(candidates)
    message = f"unknown {kind} '{name}'" + (f" in {where}" if where else "")
    if not guess and known and len(known) <= 12:
        message += f" (known: {', '.join(known)})"
    return message, hint
