"""Where a word sits inside a value the spec writes: what the core's paths cannot say.

The core locates a path into the mechanism block down to a value or a list item
(`dpspec.api.located`); a query string such as "hhgq * votingage", or a cross constraint's side
"units: hhtenshort_3lev = mortgage", is one value, and a reviewer told that `votingage` is wrong
should be sent to `votingage`. `inside` reads the value's text from where the core says it
starts. `item_at` does the same from a setting's own ir.Param, for the settings still parsed by
hand (joint, recodes, queries, structural_zeros: params/tables.py), and goes with them.
"""

from __future__ import annotations

import re

from dpspec.api import Diagnostic, ir
from dpspec.api import located as located_at


def at(p) -> tuple:
    """(line, column) of a setting, (None, None) when it has no location."""
    return ir.line_column(p)


def _value_span(text: str, start: int) -> tuple[int, int]:
    """(first, end) offsets of the value written after a setting's ``name:`` that starts at `start`."""
    colon = text.find(":", start)
    if colon < 0:
        return start, start
    first = colon + 1
    while first < len(text) and text[first] in " \t":
        first += 1
    if first < len(text) and text[first] in '["':
        close = "]" if text[first] == "[" else '"'
        end = text.find(close, first + 1)
        return first, (len(text) if end < 0 else end + 1)
    end = len(text)
    for stop in ("\n", "#"):
        found = text.find(stop, first)
        end = min(end, found) if found >= 0 else end
    return first, end


def item_at(spec: ir.Spec, p, item: str | None = None, after: str | None = None, occurrence: int = 1) -> tuple:
    """(line, column) of `item` (a name, a label, a piece of a quoted value) in setting `p`'s value,
    as a whole word (past the first `after` in the value, when given: the label after "="; its
    `occurrence`-th appearance: 2 for a name listed twice); the setting's own (line, column) when
    it has no text or `item` is not found."""
    where = at(p)
    text = spec.text if spec is not None else None
    if where[0] is None or not text or not item:
        return where
    lines = text.split("\n")
    if where[0] > len(lines):
        return where
    start = sum(len(line) + 1 for line in lines[: where[0] - 1]) + (where[1] or 1) - 1
    first, end = _value_span(text, start)
    if after:
        cut = text.find(after, first, end)
        first = cut + len(after) if cut >= 0 else first
    pattern = re.compile(r"(?<![\w.])" + re.escape(item.strip()) + r"(?![\w.])")
    found = None
    for found in pattern.finditer(text, first, end):
        occurrence -= 1
        if occurrence <= 0:
            break
    if found is None or occurrence > 0:
        return where
    line = text.count("\n", 0, found.start()) + 1
    return line, found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1


def inside(spec: ir.Spec, path, item: str | None = None, after: str | None = None, occurrence: int = 1) -> tuple:
    """(line, column) of `item` (a factor of a query string, a table name) inside the value of
    the setting at `path` (past the first `after` in it, when given; its `occurrence`-th
    appearance), as a whole word; the setting's own (line, column) when `item` is not found.

    Why here and not in the core: the core locates a path down to a value or a list item
    (`dpspec.api.located`), and a query such as "hhgq * votingage" is one value; where one of
    its factors sits is found by reading the value's text from where the core says it starts."""
    key, value = located_at(spec, [Diagnostic("", path=tuple(path)), Diagnostic("", path=(*path, 0))])
    where = (key.line, key.column)
    text = spec.text if spec is not None else None
    if value.line is None or not text or not item:
        return where
    lines = text.split("\n")
    start = sum(len(line) + 1 for line in lines[: value.line - 1]) + (value.column or 1) - 1
    if start < len(text) and text[start] in '["':
        close = text.find("]" if text[start] == "[" else '"', start + 1)
        end = len(text) if close < 0 else close + 1
    else:
        end = min([i for i in (text.find("\n", start), text.find("#", start)) if i >= 0] or [len(text)])
    first = start
    if after:
        cut = text.find(after, start, end)
        first = cut + len(after) if cut >= 0 else start
    found = None
    for found in re.compile(r"(?<![\w.])" + re.escape(item.strip()) + r"(?![\w.])").finditer(text, first, end):
        occurrence -= 1
        if occurrence <= 0:
            break
    if found is None or occurrence > 0:
        return where
    return text.count("\n", 0, found.start()) + 1, found.start() - (text.rfind("\n", 0, found.start()) + 1) + 1
