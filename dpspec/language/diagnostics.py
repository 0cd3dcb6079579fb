"""Rendering of spec diagnostics as `FILE:LINE:COL: error: MESSAGE` with a caret excerpt."""
from __future__ import annotations

import difflib

from dpspec.language import line_ends


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


def render_diagnostics(diagnostics, path: str | None, text: str | None) -> str:
    lines = line_ends.lines(text) if text else []  # the lines the grammar counts
    out = []
    for d in sorted(diagnostics, key=lambda d: (d.line or 0, d.column or 0)):
        where = path or "<spec>"
        if d.line:
            where += f":{d.line}:{d.column or 1}"
        message = d.message
        if d.hint:
            message += f"; {d.hint}"
        out.append(f"{where}: {d.severity}: {message}")
        if d.line and 0 < d.line <= len(lines):
            source = lines[d.line - 1].replace("\t", " ")
            out.append(f"    {source}")
            out.append("    " + " " * max((d.column or 1) - 1, 0) + "^")
    return "\n".join(out)
