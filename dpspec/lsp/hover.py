"""Hovers: what the thing under the cursor means, in the words dpspec already uses elsewhere.

A section keyword answers its building block's question (`dpspec show`'s five questions); a
budget line is read as what an attacker can learn (the audit's plain words); a mechanism and
its parameters are described by the plugin's own schema, so a third-party plugin's parameters
need no work here.
"""

from __future__ import annotations

import functools

from dpspec import ir
from dpspec.lsp import text as tx
from dpspec.contract import plugins
from dpspec.language.describe import five_questions, notation, PREMETRIC_WORDS, RELATION_WORDS
from dpspec.audit.plain_words import _readable, reading_delta
from dpspec.budget.interpret import read
from dpspec.audit.currency import bound_budget
from dpspec.language.formatter import _column_type
from dpspec.language.parser import parse, read_source
from dpspec.lsp.navigate import include_target

QUESTION_OF = {"domain": 0, "invariants": 1, "public": 1, "unit": 2, "premetric": 3, "budget": 4}
OTHER_BLOCKS = {  # sections that answer none of the five questions: what they are for
    "spec": "The spec's title, shown at the top of every report.",
    "data": "Where a table's confidential records are read from (a .csv or .parquet file, or a folder of Parquet files).",
    "release": "What is published: noisy counts, microdata tables or a mechanism's named outputs.",
    "tuned": "How the mechanism's parameters were chosen: on confidential, public or synthetic data, or none.",
    "program": "Several releases of the same confidential data, whose budgets compose.",
    "language": "The version of the .dps language the file is written in (a file without it is read as 1.0).",
    "pufferfish": "The class of data-generating distributions an epsilon-Z-Pufferfish guarantee holds for "
    "(independent, dependence, or arbitrary: no finite guarantee).",
    "notes": "Prose that travels with the spec (for example a registry entry's text fields); the audit lists it as unchecked.",
}


def mechanism_doc(mech) -> str:
    lines = [f"**mechanism {mech.name}** {mech.version}", "", mech.description or ""]
    if mech.parameters.params:
        lines += ["", "Parameters:"]
        lines += [
            f"- `{p.name}` ({p.describe_type()}{', required' if p.required else ''}): {p.doc}"
            for p in mech.parameters.params
        ]
    return "\n".join(lines)


def parameter_doc(mech_name: str, p, shown: str | None = None) -> str:
    """A parameter's (or a nested setting's) type, range and meaning; `shown`: the key written,
    for a map's values, which have no name of their own."""
    facts = [p.describe_type()]
    if p.required:
        facts.append("required")
    if p.default is not None:
        facts.append(f"default {ir.to_jsonable(p.default)}")
    if p.describe_range():
        facts.append(f"range {p.describe_range()}")
    if p.choices and p.type != "map":
        facts.append("one of " + ", ".join(p.choices))
    fields = [f"- `{f.name}` ({f.describe_type()}{', required' if f.required else ''}): {f.doc}" for f in p.fields]
    return (
        f"**{shown or p.name}** ({'; '.join(facts)}), a {'setting' if shown else 'parameter'} of mechanism "
        f"`{mech_name}`\n\n{p.doc}" + ("\n\nSettings:\n" + "\n".join(fields) if fields else "")
    )


NOT_DECLARED = object()  # the cursor is in a block the schema does not describe (a free-form block)


def nested(ps, key: str):
    """The declaration of `key` inside the setting `ps` declares (a block's field, a map's own
    setting or its values; inside an `either`, its block option's)."""
    ps = in_block(ps)
    if ps is None:
        return None
    if ps.type == "block" and ps.fields:
        return ps.field(key)
    if ps.type == "map":
        return ps.field(key) or ps.values
    return None


def in_block(ps):
    """The declaration of a `{ ... }` block written for setting `ps`: an `either`'s block option."""
    if ps is not None and ps.type == "either":
        return ps.option_for(ir.ParamBlock(()))
    return ps


def _header_key(header: str) -> str:
    words = header.rstrip(":").split()
    return words[-1].rstrip(":").strip('"') if words else ""


def mechanism_block(headers: list[str]):
    """(mechanism, the declaration of the nested block the cursor is in) when the cursor is inside a
    mechanism block: None at its top level, NOT_DECLARED inside a block no schema describes."""
    if not headers or not headers[0].startswith("mechanism"):
        return None, None
    words = headers[0].split()
    mech = installed_mechanisms().get(words[1]) if len(words) > 1 else None
    if mech is None:
        return None, None
    ps = None
    for header in headers[1:]:
        key = _header_key(header)
        ps = in_block(mech.parameters.get(key) if ps is None else nested(ps, key))
        if ps is None:
            return mech, NOT_DECLARED
    return mech, ps


def installed_mechanisms() -> dict:

    try:
        return plugins.mechanisms()
    except Exception:  # shown as a diagnostic by document.plugin_problems
        return {}


def _block_answer(spec: ir.Spec, keyword: str) -> str:

    question, block, answer = five_questions(spec)[QUESTION_OF[keyword]]
    return f"**{question}** ({block})\n\n{answer}"


@functools.lru_cache(maxsize=64)
def _reading(budget, delta: float):
    """The audit's reading of one budget (a zCDP trade-off curve takes a moment: hovering the
    same line again is instant)."""

    return read(_readable(budget, delta), delta)


def budget_reading(spec: ir.Spec, bound: ir.BudgetBound) -> str:
    """A declared bound read as an attacker's largest posterior belief and best test."""

    try:
        budget = bound_budget(spec, bound)
        if budget is None:
            return ""
        delta, source = reading_delta(spec)
        r = _reading(budget, delta)
    except Exception as exc:  # a bound that cannot be read (a conversion that does not exist)
        return f"This bound cannot be read in plain words: {exc}"
    posteriors = "; ".join(f"{p:.0%} → {_percent(q)}" for p, q in r.posteriors)
    powers = "; ".join(f"at {a:.0%} false alarms, power {_percent(w)}" for a, w in r.powers)
    caveat = f", except with probability {r.delta:.3g} (delta: {source})" if r.delta else ""
    via = "" if r.budget.kind in ("pure", "approx") else f", that is epsilon = {r.epsilon:.4g} at delta = {r.delta:.3g}"
    return (
        f"Read as {r.budget}{via}: an attacker's belief that one unit has a trait moves from its prior as follows: "
        f"{posteriors}{caveat}. The best test of whether the unit's record is in the data: {powers}."
        f"\n\nFormula: {r.formula}"
    )


def _percent(q: float) -> str:
    return "at most ~100%" if q >= 0.9995 else f"at most {q:.1%}"


def _table_doc(t: ir.Table) -> str:

    link = f", in `{t.parent}` by `{t.link}`" if t.parent else ""
    columns = "\n".join(f"- `{c.name}`: {_column_type(c.type)}{' nullable' if c.nullable else ''}" for c in t.columns)
    return f"**table {t.name}**: one row per {t.unit}{link}\n\n{columns}"


def _column_doc(spec: ir.Spec, name: str) -> str | None:

    found = [(t, c) for t in (spec.domain.tables if spec.domain else ()) for c in t.columns if c.name == name]
    if not found:
        return None
    return "\n\n".join(
        f"**column {c.name}** of table `{t.name}`: {_column_type(c.type)}{' nullable' if c.nullable else ''}"
        for t, c in found
    )


def _included(text: str, path: str | None, line: int, character: int) -> str | None:
    """An `include`d spec's title and its one-line notation."""

    target = include_target(text, line, character, path)
    if target is None:
        return None
    try:
        spec = parse(read_source(target.path), target.path)
    except Exception as exc:  # shown as a diagnostic on the include line
        return f"`{target.path}` does not parse: {str(exc).splitlines()[0]}"
    return f"**{spec.title or '(untitled spec)'}**\n\n`{notation(spec)}`"


VALUES_FROM = (
    "**values from \"FILE\"**: the column's values are those of the key file's column of the same name "
    "(a nested column's rows name every level). The file must be declared public "
    '(`public { keys "FILE" released "..." }`); a release keyed by the column has one cell per '
    "declared value, empty ones included, and a record outside them is a data error."
)
PUBLIC_KEYS = (
    '**keys "FILE" released "WHO"**: a public key file: the values (cells, geographic units) a '
    "release may be keyed by, published by WHO. Columns read their values from it with "
    '`category values from "FILE"`; a release\'s keys come from declared values, never from the data.'
)


def _key_words(word: str, source: str, start: int, end: int, headers: list[str]) -> str | None:
    """The declared-keys words: `values from` in a column, `keys` in the public block."""
    if word == "values" and source[end:].lstrip().startswith("from"):
        return VALUES_FROM
    if word == "from" and source[:start].rstrip().endswith("values"):
        return VALUES_FROM
    if word == "keys" and headers and headers[0].split()[:1] == ["public"] and source[:start].strip() == "":
        return PUBLIC_KEYS
    return None


def hover(text: str, spec: ir.Spec | None, line: int, character: int, path: str | None = None) -> str | None:
    """Markdown for the word under the cursor, or None."""

    if (included := _included(text, path, line, character)) is not None:
        return included
    hit = tx.word_at(text, line, character)
    if hit is None:
        return None
    word, start, end = hit
    source = tx.line_of(text, line)
    headers = tx.enclosing(text, tx.offset_of(text, line, start))
    top = not headers
    first = source.split()[0] if source.split() else ""
    if top and start == 0 and word == first:  # a section keyword
        if word in QUESTION_OF and spec is not None:
            answer = _block_answer(spec, word)
            if word == "budget":
                bound = next((b for b in spec.budgets if b.loc and b.loc.line == line + 1), None)
                if bound is not None and (reading := budget_reading(spec, bound)):
                    answer += "\n\n" + reading
            return answer
        if word == "mechanism":
            mech = installed_mechanisms().get(source.split()[1]) if len(source.split()) > 1 else None
            return mechanism_doc(mech) if mech else "The mechanism that produces the release, and its parameters."
        return OTHER_BLOCKS.get(word)
    if top and first == "mechanism" and source.split()[1:2] == [word]:
        mech = installed_mechanisms().get(word)
        return mechanism_doc(mech) if mech else None
    if top and first == "budget" and spec is not None:
        bound = next((b for b in spec.budgets if b.loc and b.loc.line == line + 1), None)
        if bound is not None:
            return f"**{bound.describe()}**\n\n" + (budget_reading(spec, bound) or "")
    mech, block = mechanism_block(headers)
    if mech is not None and block is not NOT_DECLARED and source[end:].lstrip().startswith((":", "*")):
        p = mech.parameters.get(word) if block is None else nested(block, word)
        if p is not None:
            return parameter_doc(mech.name, p, shown=None if block is None else word)
    if (words := _key_words(word, source, start, end, headers)) is not None:
        return words
    if word in PREMETRIC_WORDS:
        return f"**{word}**: {PREMETRIC_WORDS[word][1]}"
    if word in RELATION_WORDS:
        return f"**{word}** ({RELATION_WORDS[word][0]}): neighbours differ by " + RELATION_WORDS[word][1].format(
            unit="unit"
        )
    if spec is not None and spec.domain is not None:
        table = spec.domain.table(word)
        if table is not None:
            return _table_doc(table)
        return _column_doc(spec, word)
    return None
