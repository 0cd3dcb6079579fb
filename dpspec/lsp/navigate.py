"""Go to definition (an `include`d spec, a table, a column) and the document's outline."""

from __future__ import annotations

import os
import re

import attrs

from dpspec import ir
from dpspec.lsp import text as tx


@attrs.frozen
class Place:
    """A range in a file (0-based), for definitions and symbols."""

    path: str | None  # None: this document
    line: int
    start: int
    end: int


@attrs.frozen
class Symbol:
    name: str
    kind: str  # section, table, column, parameter, budget, include
    detail: str
    range: tuple[int, int, int, int]  # start line, start column, end line, end column
    selection: Place
    children: tuple = ()


def _name_place(text: str, loc: ir.Loc | None, name: str) -> Place | None:
    """Where `name` is written on the line of `loc`, at or after its column."""
    if loc is None:
        return None
    line = loc.line - 1
    source = tx.line_of(text, line)
    m = re.compile(rf"\b{re.escape(name)}\b").search(source, max(loc.column - 1, 0))
    if m is None:
        return Place(None, line, loc.column - 1, tx.token_end(text, line, loc.column - 1))
    return Place(None, line, m.start(), m.end())


def include_target(text: str, line: int, character: int, path: str | None) -> Place | None:
    source = tx.line_of(text, line)
    if not re.match(r"\s*include\b", source):
        return None
    rel = tx.string_at(text, line, character)
    if rel is None:
        m = re.search(r'"((?:[^"\\]|\\.)*)"', source)
        rel = m.group(1) if m else None
    if not rel:
        return None
    base = os.path.dirname(os.path.abspath(path)) if path else os.getcwd()
    target = rel if os.path.isabs(rel) else os.path.normpath(os.path.join(base, rel))
    return Place(target, 0, 0, 0) if os.path.isfile(target) else None


def definition(text: str, spec: ir.Spec | None, path: str | None, line: int, character: int) -> list[Place]:
    """Where the `include`d file, table or column under the cursor is declared."""
    target = include_target(text, line, character, path)
    if target is not None:
        return [target]
    hit = tx.word_at(text, line, character)
    if hit is None or spec is None or spec.domain is None:
        return []
    word = hit[0]
    table = spec.domain.table(word)
    if table is not None:
        place = _name_place(text, table.loc, word)
        return [place] if place else []
    owners = [t for t in spec.domain.tables if word in t.column_names]
    source = tx.line_of(text, line)
    named = re.search(r"\bcount\s+([A-Za-z_]\w*)", source) or re.search(r"^\s*table\s+([A-Za-z_]\w*)", source)
    if named is None:  # a column inside a table block: that table's own
        header = tx.enclosing(text, tx.offset_of(text, line, character))
        named = re.match(r"table\s+([A-Za-z_]\w*)", header[-1]) if header else None
    preferred = [t for t in owners if named and t.name == named.group(1)]
    return [
        p for t in (preferred or owners) for c in t.columns if c.name == word and (p := _name_place(text, c.loc, word))
    ]


def _section_symbol(text: str, s: tx.Section, spec: ir.Spec | None) -> Symbol:
    lines = text.split("\n")
    head = lines[s.start].strip()
    name = re.sub(r"\s*\{.*$", "", head) or s.keyword
    last = lines[s.end - 1] if s.end - 1 < len(lines) else ""
    rng = (s.start, 0, s.end - 1, len(last))
    selection = Place(None, s.start, 0, len(s.keyword))
    children: list[Symbol] = []
    if spec is not None and s.keyword == "domain" and spec.domain is not None and _within(spec.domain.loc, s):
        for t in spec.domain.tables:
            tp = _name_place(text, t.loc, t.name)
            cols = tuple(
                Symbol(c.name, "column", c.type.kind, (cp.line, cp.start, cp.line, cp.end), cp)
                for c in t.columns
                if (cp := _name_place(text, c.loc, c.name))
            )
            end = max((c.range[2] for c in cols), default=tp.line) + (1 if cols else 0)
            children.append(
                Symbol(
                    t.name,
                    "table",
                    f"one row per {t.unit}",
                    (tp.line, 0, min(end, s.end - 1), len(tx.line_of(text, min(end, s.end - 1)))),
                    tp,
                    cols,
                )
            )
    if spec is not None and s.keyword == "mechanism" and spec.mechanism is not None and _within(spec.mechanism.loc, s):
        for p in spec.mechanism.params.params:
            if p.loc is not None:
                pp = Place(None, p.loc.line - 1, p.loc.column - 1, p.loc.column - 1 + len(p.name.split("*")[0]))
                children.append(
                    Symbol(p.name, "parameter", "", (pp.line, pp.start, pp.line, len(tx.line_of(text, pp.line))), pp)
                )
    return Symbol(name[:80], "section", "", rng, selection, tuple(children))


def _within(loc: ir.Loc | None, s: tx.Section) -> bool:
    return loc is not None and s.start <= loc.line - 1 < s.end


def symbols(text: str, spec: ir.Spec | None) -> list[Symbol]:
    """One symbol per top-level section; tables and columns under the domain, parameters under
    the mechanism."""
    return [_section_symbol(text, s, spec) for s in tx.sections(text)]
