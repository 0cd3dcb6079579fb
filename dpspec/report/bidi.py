"""Text from specs and data kept apart from the report's own words: bidirectional controls shown.

A right-to-left override (U+202E) or isolate (U+2067) in a spec's title, a category or a data
value reorders everything after it on the screen: "Release epsilon = 0.1" can be made to read
in the report while the bytes say otherwise, and an unterminated override also reverses the
report's own words that follow. Every bidi control in the report model is therefore replaced by
a visible marker such as `[U+202E]`, once, where the model is finished (`neutral`), so the HTML,
Markdown and JSON forms all show the same neutral text and a reader sees that the text held one.
A terminal also obeys control characters (`ESC[8m` hides what follows, `ESC[2J` clears the
screen, a bare CR overwrites the line): `terminal_text` marks those too, for every command's
output (`dpspec.report.terminal.echo`).
"""

from __future__ import annotations

import re

# ALM, LRM, RLM, the embeddings and overrides (LRE RLE PDF LRO RLO) and isolates (LRI RLI FSI PDI)
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")


def neutral_text(text: str) -> str:
    """`text` with each bidi control replaced by a visible `[U+XXXX]` (the same str subclass, so
    markup this package built stays markup)."""
    if not _BIDI.search(text):
        return text
    return type(text)(_BIDI.sub(lambda m: f"[U+{ord(m.group()):04X}]", str(text)))


# C0 controls but tab and newline, DEL, C1 controls (CSI U+009B and OSC U+009D are escapes on
# their own), the line and paragraph separators, and the bidi controls.
_TERMINAL_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029{BIDI_CONTROLS}]")


def terminal_text(text) -> str:
    """`text` with every control, escape and bidi character replaced by a visible `[U+XXXX]`."""
    text = str(text)
    if not _TERMINAL_UNSAFE.search(text):
        return text
    return _TERMINAL_UNSAFE.sub(lambda m: f"[U+{ord(m.group()):04X}]", text)


def neutral(value):
    """A report model (dicts, lists, tuples, strings) with every string made `neutral_text`;
    keys too, since data values become keys (cells, categories)."""
    if isinstance(value, str):
        return neutral_text(value)
    if isinstance(value, dict):
        return {neutral(k) if isinstance(k, str) else k: neutral(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return (
            type(value)(neutral(v) for v in value)
            if not hasattr(value, "_fields")
            else type(value)(*map(neutral, value))
        )
    return value
