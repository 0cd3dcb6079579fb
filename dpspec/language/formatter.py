"""The canonical text of a spec: `dpspec fmt`.

Sections come in the order of the five questions (who, where, what, how, how much), numbers
keep their exact value (0.05, 1e-10, 104/4099), and formatting the output again changes
nothing. Comments are kept, moved to the line before the section they were in.
"""

from __future__ import annotations

import re
from fractions import Fraction

from dpspec import ir
from dpspec.language import eol_comments

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT = re.compile(r"[0-9]+\Z")
INDENT = "  "


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _atom(value: str) -> str:
    return value if _NAME.match(value) or _INT.match(value) else quote(value)


def _number(value: Fraction) -> str:
    text = ir.format_number(value)
    if text.startswith("-") and "/" in text:
        return f"-({text[1:]})"
    return text


def _value(value, depth: int) -> str:
    if isinstance(value, Fraction):
        return _number(value)
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, ir.Name):
        return value.text
    if isinstance(value, tuple):
        if len(value) > 1 and all(isinstance(v, ir.Name) for v in value):
            return ", ".join(v.text for v in value)
        return "[" + ", ".join(_value(v, depth) for v in value) + "]"
    if isinstance(value, ir.ParamBlock):
        return _block(value, depth)
    raise TypeError(f"cannot format parameter value {value!r}")


def _key(name: str) -> str:
    parts = name.split("*")
    if all(_NAME.match(p) for p in parts):
        return " * ".join(parts)
    return quote(name)


def _block(block: ir.ParamBlock, depth: int) -> str:
    if not block.params:
        return "{ }"
    pad = INDENT * (depth + 1)
    lines = [f"{pad}{_key(p.name)}: {_value(p.value, depth + 1)}" for p in block.params]
    return "{\n" + "\n".join(lines) + "\n" + INDENT * depth + "}"


def _column_type(ty: ir.ColumnType) -> str:
    if ty.kind == "category":
        return (
            "category"
            + (f" in {ty.parent}" if ty.parent else "")
            + (f" values from {quote(ty.keys_from)}" if ty.keys_from else "")
        )
    if ty.kind == "enum":
        return "{" + ", ".join(_atom(v) for v in ty.values) + "}"
    if ty.kind == "int":
        return f"int {ty.low}..{ty.high}"
    return "bool"


def _query(q: ir.CountQuery) -> str:
    text = f"count {q.table}"
    if q.by:
        text += " by " + ", ".join(q.by)
    if q.level:
        text += f" at {q.level}"
    return text


def _domain(d: ir.Domain) -> list[str]:
    head = f"domain {d.name}" + (f" {quote(d.description)}" if d.description is not None else "") + " {"
    out = [head]
    if d.stage:
        out.append(f"{INDENT}stage {d.stage}")
    if d.geography:
        out.append(f"{INDENT}geography {d.geography.name} {{ " + " > ".join(d.geography.levels) + " }")
        if d.geography.components:
            out.append(f"{INDENT}crosscut {{ " + ", ".join(d.geography.components) + " }")
    if d.same_as:
        out.append(f"{INDENT}same as " + ", ".join(d.same_as))
    for t in d.tables:
        link = f" in {t.parent} by {t.link}" if t.parent else ""
        if t.parent and t.link_bound is not None:
            link += f" at most {t.link_bound}"
        out.append(f"{INDENT}table {t.name} unit {t.unit}{link} {{")
        width = max((len(c.name) for c in t.columns), default=0)
        for c in t.columns:
            null = " nullable" if c.nullable else ""
            out.append(f"{INDENT * 2}{c.name.ljust(width)} : {_column_type(c.type)}{null}")
        out.append(f"{INDENT}}}")
    out.append("}")
    return out


def _premetric(p: ir.Premetric) -> str:
    text = f"premetric {p.kind}"
    for name, value in p.options:
        text += f" {name} {_number(value)}"
    if p.events is not None:
        text += f" on events {quote(p.events)}"
    return text


def _budget(b: ir.BudgetBound) -> str:
    return f"budget {b.describe(_number)}"


def _release(items) -> list[str]:
    out = ["release {"]
    for r in items:
        if r.kind == "count":
            out.append(f"{INDENT}{_query(r.query)}")
        else:
            out.append(f"{INDENT}{r.kind} {r.name}")
    out.append("}")
    return out


def _program(p: ir.Program) -> list[str]:
    out = [f"program {quote(p.title)} {{"]
    for part in p.parts:
        if part.parallel:
            label = f" {quote(part.label)}" if part.label is not None else ""
            out.append(f"{INDENT}parallel{label} {{")
            out.extend(f"{INDENT * 2}include {quote(path)}" for path in part.paths)
            out.append(f"{INDENT}}}")
        else:
            out.extend(f"{INDENT}include {quote(path)}" for path in part.paths)
    out.append("}")
    return out


def _notes(notes) -> list[str]:
    """One string per line of a note's text, so long prose stays readable in the spec."""
    out = ["notes {"]
    for n in notes:
        lines = n.text.split("\n")
        out.append(f"{INDENT}{n.key}: {quote(lines[0])}")
        out.extend(f"{INDENT * 2}{quote(line)}" for line in lines[1:])
    out.append("}")
    return out


def format_spec(spec: ir.Spec) -> str:
    """The canonical text; comments are kept, each before the section it was in or preceded."""
    blocks: list[tuple[tuple[str, ...], list[str]]] = []
    if spec.title is not None:
        blocks.append((("title",), [f"spec {quote(spec.title)}"]))
    if spec.domain:
        blocks.append((("domain",), _domain(spec.domain)))
    if spec.data:
        blocks.append((("data",), [f"data {d.table} from {quote(d.path)}" for d in spec.data]))
    if spec.invariants:
        blocks.append((("invariants",), ["invariants {", *[f"{INDENT}{_query(q)}" for q in spec.invariants], "}"]))
    if spec.public or spec.public_keys:
        blocks.append(
            (
                ("public",),
                [
                    "public {",
                    *[f"{INDENT}keys {quote(k.path)} released {quote(k.source)}" for k in spec.public_keys],
                    *[
                        f"{INDENT}{_query(p.query)} released {quote(p.source)}" + (f" used as {p.use}" if p.use else "")
                        for p in spec.public
                    ],
                    "}",
                ],
            )
        )
    if spec.pufferfish:
        c = spec.pufferfish
        options = "".join(f" {name} {_number(value)}" for name, value in c.options)
        blocks.append((("pufferfish",), ["pufferfish {", f"{INDENT}class {c.kind}{options}", "}"]))
    how = []
    if spec.unit:
        u = spec.unit
        bound = f" holds at most {u.bound.k} {u.bound.finer}" if u.bound else ""
        how.append(f"unit {u.table} : {u.relation}{bound}")
    if spec.premetric:
        how.append(_premetric(spec.premetric))
    if how:
        blocks.append((("unit", "premetric"), how))
    if spec.mechanism:
        blocks.append((("mechanism",), [f"mechanism {spec.mechanism.name} {_block(spec.mechanism.params, 0)}"]))
    if spec.budgets:
        blocks.append((("budgets",), [_budget(b) for b in spec.budgets]))
    if spec.releases:
        blocks.append((("releases",), _release(spec.releases)))
    if spec.tuning:
        t = spec.tuning
        blocks.append((("tuning",), [f"tuned on {t.source}" + (f" {quote(t.note)}" if t.note is not None else "")]))
    if spec.program:  # a program file reads top-down: what it composes, then its bounds
        blocks.insert(0, (("program",), _program(spec.program)))
    if spec.notes:
        blocks.append((("notes",), _notes(spec.notes)))
    if spec.language_version is not None:  # first, as the language requires
        blocks.insert(0, (("language_version",), [f"language {spec.language_version}"]))
    trailing = list(spec.comments_for(ir.END_COMMENTS))
    if trailing:
        blocks.append(((), trailing))
    texts = []
    for i, (fields, lines) in enumerate(blocks):
        comments = [c for f in fields for c in spec.comments_for(f)]
        if i == 0 and comments and fields:  # a file's header comment stands apart
            texts.append("\n".join(comments))
            comments = []
        texts.append("\n".join(comments + lines))
    return eol_comments.place("\n\n".join(texts), spec.eol_comments) + "\n"
