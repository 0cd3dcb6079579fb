"""Line ends: LF, CRLF and a bare CR (old Mac files) each end a line, as they do in every editor.

Text is made LF-only once, where it enters the language (`parse`, the language server's
documents), so the grammar, diagnostics, the formatter and editor positions all count the same
lines. Only these three end a line: `str.splitlines` also splits at form feeds, U+2028 and other
characters the grammar reads inside strings and comments, which would shift every caret below.
"""

from __future__ import annotations


def normal(text: str) -> str:
    """The text with every CRLF and bare CR made LF (columns and line numbers are unchanged)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def lines(text: str) -> list[str]:
    """The lines of a text, ended by LF, CRLF or CR and nothing else."""
    return normal(text).split("\n")
