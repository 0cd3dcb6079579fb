"""End-of-line comments stay at the end of their line through `dpspec fmt`.

A comment after code (`stage edited  # why`) is anchored to the first two tokens of its line
(`stage edited`); the formatter puts it back at the end of the first formatted line, after the
previous comment's, that starts with the same tokens. A comment whose line has vanished (say,
a one-line block reflowed away) stands on its own line where the search stopped.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")


def anchor(code: str) -> tuple[str, ...]:
    return tuple(_TOKEN.findall(code)[:2])


def split(comments, text: str):
    """(standalone [(line, text)], end-of-line [(anchor, text)]) from lexer comment tokens."""
    lines = text.split("\n")
    standalone, eol = [], []
    for c in comments:
        code = lines[c.line - 1][: c.column - 1] if c.line <= len(lines) else ""
        if code.strip():
            eol.append((anchor(code), str(c).rstrip()))
        else:
            standalone.append((c.line, str(c)))
    return standalone, tuple(eol)


def place(text: str, eol) -> str:
    """Put each end-of-line comment back at the end of its anchored line."""
    if not eol:
        return text
    lines = text.split("\n")
    cursor = 0
    for key, comment in eol:
        hit = next((i for i in range(cursor, len(lines)) if lines[i].strip() and anchor(lines[i]) == key), None)
        if hit is None:
            indent = re.match(r"\s*", lines[cursor] if cursor < len(lines) else "").group(0)
            lines.insert(cursor, indent + comment)
            cursor += 1
        else:
            lines[hit] += "  " + comment
            cursor = hit + 1
    return "\n".join(lines)
