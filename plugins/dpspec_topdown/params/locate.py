"""Where a word sits inside a value the spec writes: what the core's paths cannot say.

The core locates a path into the mechanism block down to a value or a list item
(`dpspec.api.located`); a query string such as "hhgq * votingage", or a cross constraint's side
"units: hhtenshort_3lev = mortgage", is one value, and a reviewer told that `votingage` is wrong
should be sent to `votingage`. `inside` reads the value's text from where the core says it
starts (equal_to's query and table, the sides of cross_constraints). Every other setting is
located by its path alone.
"""

from __future__ import annotations

import re

from dpspec.api import Diagnostic, ir
from dpspec.api import located as located_at


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
