"""Completion from where the cursor is: the section and braces around it and the words before it
on its line. Names come from the grammar's keywords, the checker's lists (stages, budget
quantities, conversions), the installed plugins (mechanisms, their parameters and choices) and
the document's own domain (tables, columns, geography levels, units)."""

from __future__ import annotations

import re

import attrs

from dpspec import ir
from dpspec.lsp import text as tx
from dpspec.lsp.hover import (
    NOT_DECLARED,
    OTHER_BLOCKS,
    installed_mechanisms,
    mechanism_block,
    mechanism_doc,
    nested,
    parameter_doc,
)
from dpspec.contract.params import ROOT_LEVEL
from dpspec.check.checker import BUDGET_QUANTITIES, CONVERSION_METHODS, TUNING_SOURCES, STAGES

_WORDS = re.compile(r"[A-Za-z_]\w*|<=|[<=:]|[0-9][0-9.eE+-]*")
SECTIONS = (
    "language",
    "spec",
    "domain",
    "data",
    "invariants",
    "public",
    "pufferfish",
    "unit",
    "premetric",
    "mechanism",
    "budget",
    "release",
    "tuned",
    "program",
    "notes",
)
PREMETRICS = ("pure", "approximate", "zcdp", "renyi", "gdp")
RELATIONS = ("hamming", "symdiff")
DOMAIN_ITEMS = ("stage", "geography", "crosscut", "table")
COLUMN_TYPES = ("category", "int", "bool")


@attrs.frozen
class Item:
    label: str
    kind: str  # keyword, mechanism, parameter, table, column, value
    detail: str = ""
    doc: str = ""


def _keywords(words, detail="", kind="keyword") -> list[Item]:
    return [Item(w, kind, detail) for w in words]


def _tables(spec) -> list[Item]:
    tables = spec.domain.tables if spec is not None and spec.domain else ()
    return [Item(t.name, "table", f"table, one row per {t.unit}") for t in tables]


def _units(spec) -> list[Item]:
    tables = spec.domain.tables if spec is not None and spec.domain else ()
    return [Item(t.name, "table", f"unit: one {t.unit}") for t in tables]


def _columns(spec, table: str | None = None) -> list[Item]:
    if spec is None or spec.domain is None:
        return []
    tables = [t for t in spec.domain.tables if table is None or t.name == table] or spec.domain.tables
    seen, out = set(), []
    for t in tables:
        for c in t.columns:
            if c.name not in seen:
                seen.add(c.name)
                out.append(Item(c.name, "column", f"column of {t.name}: {c.type.kind}"))
    return out


def _levels(spec) -> list[Item]:
    geo = spec.domain.geography if spec is not None and spec.domain else None
    return _keywords(geo.levels if geo else (), "geography level", "column")


def _mechanisms() -> list[Item]:
    return [
        Item(name, "mechanism", m.description.split(". ")[0][:80], mechanism_doc(m))
        for name, m in sorted(installed_mechanisms().items())
    ]


def _count_query(words: list[str], spec) -> list[Item] | None:
    """Inside `count T by a, b at L`: what may come next."""
    if "count" not in words:
        return None
    rest = words[words.index("count") + 1 :]
    if not rest:
        return _tables(spec)
    table = rest[0]
    if rest[-1] == "at":
        return _levels(spec)
    if "by" in rest[1:]:
        return _columns(spec, table)
    return _keywords(("by", "at"))


def _parameter_value(p, key: str, spec) -> list[Item]:
    if p is None:
        return []
    if p.type == "list" and p.items is not None:
        p = p.items
    if p.type == "table":
        return _tables(spec)
    if p.type in ("column", "columns", "query"):
        return _columns(spec)
    if p.type == "level":
        return _keywords(_levels(spec), f"{key}: a geography level", "value")
    if p.choices and p.type != "map":
        return _keywords(p.choices, f"{key}: one of", "value")
    return []


def _levels(spec) -> tuple[str, ...]:

    geo = spec.domain.geography if spec is not None and spec.domain else None
    return (ROOT_LEVEL, *(geo.levels if geo else ()), *((geo.components or ()) if geo else ()))


def _map_keys(p, spec) -> list[Item]:
    if p.keys == "levels":
        return _keywords(_levels(spec), f"{p.name or 'key'}: a geography level", "key")
    if p.keys == "tables":
        return _tables(spec)
    if p.keys == "columns":
        return _columns(spec)
    if p.keys == "choices":
        return _keywords(p.choices, f"{p.name or 'key'}: one of", "key")
    return []


def _mechanism_block(mech, block, before: str, text: str, line: int, spec) -> list[Item]:
    """Inside a mechanism block or one of its nested blocks (`block`: the declaration of the one
    the cursor is in, None at the top level): its settings' keys, or a value of the key before the cursor."""
    if block is NOT_DECLARED:
        return []
    if ":" not in before:  # a key, not one the block already sets
        lines = text.split("\n")
        section = next((s for s in tx.sections(text) if s.start <= line < s.end), None)
        others = [lines[i] for i in range(section.start, section.end) if i != line] if section else []
        present = set(re.findall(r"^\s*([A-Za-z_]\w*)\s*:", "\n".join(others), re.M))
        if block is None:
            return [
                Item(
                    p.name,
                    "parameter",
                    f"{p.describe_type()}{', required' if p.required else ''}",
                    parameter_doc(mech.name, p),
                )
                for p in mech.parameters.params
                if p.name not in present
            ]
        fields = [
            Item(
                f.name,
                "parameter",
                f"{f.describe_type()}{', required' if f.required else ''}",
                parameter_doc(mech.name, f),
            )
            for f in block.fields
        ]
        return [*fields, *_map_keys(block, spec)] if block.type == "map" else fields
    key = before.split(":", 1)[0].strip().strip('"')
    return _parameter_value(mech.parameters.get(key) if block is None else nested(block, key), key, spec)


def _top_level(words: list[str], spec) -> list[Item]:
    if not words:
        return [Item(w, "keyword", "section", OTHER_BLOCKS.get(w, "")) for w in SECTIONS]
    head, last = words[0], words[-1]
    if head == "mechanism" and len(words) == 1:
        return _mechanisms()
    if head == "premetric":
        if len(words) == 1:
            return _keywords(PREMETRICS, "premetric")
        return _keywords({"approximate": ("delta",), "renyi": ("alpha",)}.get(words[1], ()) + ("on",), "option")
    if head == "unit":
        if len(words) == 1:
            return _units(spec)
        if last == ":":
            return _keywords(RELATIONS, "neighbour relation")
        if last in RELATIONS:
            return _keywords(("holds",))
        if len(words) >= 4 and words[-4:-1] == ["holds", "at", "most"]:
            return _tables(spec)
        return []
    if head == "budget":
        if len(words) == 1 or last == "with":
            return _keywords(BUDGET_QUANTITIES, "budget quantity")
        if last == "under":
            return _keywords(RELATIONS, "neighbour relation")
        if last == "by":
            return _keywords(CONVERSION_METHODS, "conversion")
        if len(words) >= 3:
            return _keywords(("with", "under", "by"))
        return _keywords(("<=", "<", "="))
    if head == "data" and len(words) == 1:
        return _tables(spec)
    if head == "tuned":
        return (
            _keywords(("on",))
            if len(words) == 1
            else _keywords(TUNING_SOURCES, "tuning source")
            if last == "on"
            else []
        )
    return []


def _in_block(headers: list[str], words: list[str], before: str, text: str, line: int, spec) -> list[Item]:
    outer, inner = headers[0].split()[:1], headers[-1].split()
    outer = outer[0] if outer else ""
    kind = inner[0] if inner else ""
    if outer == "mechanism":
        mech, block = mechanism_block(headers)
        return _mechanism_block(mech, block, before, text, line, spec) if mech is not None else []
    if outer == "domain" and len(headers) == 1:
        if not words:
            return _keywords(DOMAIN_ITEMS)
        if words[0] == "stage":
            return _keywords(STAGES, "life-cycle stage")
        if words[0] == "table" and words[-1] == "in":
            return _tables(spec)
        if words[0] == "table" and words[-1] == "by":  # the link column, in both tables
            return _columns(spec)
        if words[0] == "table" and len(words) >= 2 and words[-1] != "unit":
            return _keywords(("unit", "in", "by", "at most"))
        return []
    if kind == "table":  # a column: `name : type [nullable]`
        if ":" not in words:
            return []
        after = words[words.index(":") + 1 :]
        if after[-1:] == ["in"]:
            return _columns(spec, inner[1] if len(inner) > 1 else None)
        if after[-1:] == ["values"]:
            return _keywords(("from",))
        if after[:1] == ["category"] and "values" not in after:  # `category [in PARENT] [values from "FILE"]`
            return _keywords((*(("in",) if len(after) == 1 else ()), "values from", "nullable"))
        if after and (after[0] in ("category", "bool") or (after[0] == "int" and len(after) > 1)):
            return _keywords(("nullable",))
        return [] if after else _keywords(COLUMN_TYPES, "column type")
    if kind in ("geography", "crosscut"):
        return _columns(spec)
    if outer in ("invariants", "public", "release"):
        query = _count_query(words, spec)
        if query is not None:
            return query
        if outer == "release":
            if not words:
                return _keywords(("count", "microdata", "output"))
            if words[0] == "microdata":
                return _tables(spec)
            if words[0] == "output" and spec is not None and spec.mechanism is not None:
                mech = installed_mechanisms().get(spec.mechanism.name)
                return [Item(n, "value", d) for n, d in (mech.outputs.items() if mech else ())]
            return []
        if not words:
            return _keywords(("count", "keys") if outer == "public" else ("count",))
        return _keywords(("released",)) if outer == "public" else []
    if outer == "program" or kind == "parallel":
        return _keywords(("include", "parallel") if len(headers) == 1 else ("include",))
    return []


def complete(text: str, spec: ir.Spec | None, line: int, character: int) -> list[Item]:
    """What may be typed at the cursor (the editor filters by the word already typed)."""
    before = tx.code_before(text, line, character)
    if before.count('"') % 2:  # inside a string
        return []
    words = _WORDS.findall(before)
    if re.search(r"[A-Za-z_]\w*$", before):  # the word being typed is not context
        words = words[:-1]
    headers = tx.enclosing(text, tx.offset_of(text, line, character))
    if not headers:
        return _top_level(words, spec)
    return _in_block(headers, words, before, text, line, spec)
