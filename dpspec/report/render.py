"""Render a report model to HTML and Markdown with the package's Jinja templates.

Templates come only from the dpspec package (never from a spec's directory). HTML is
autoescaped; Markdown has no autoescaping in Jinja, so every expression goes through a
`finalize` hook that escapes Markdown and HTML syntax: a category named `<script>` prints as
text in both. Only markup this package builds (figures) or a plugin section that passes the
safety screen is inserted as is.
"""

from __future__ import annotations

import functools
import json
import math
import re

import jinja2
from markupsafe import Markup

from dpspec.audit.verdict import percent
from dpspec.budget import format_figure, budget_from_params
from dpspec.report import svg
from dpspec.budget.interpret import tradeoff
from dpspec.report.model import HEADLINE_PARAM, RENDER_ONLY
from dpspec.schemas import versioned
from dpspec.lazy import LazyModule

# heavy libraries, imported on first use
np = LazyModule("numpy", "np", globals())

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

# Markup a plugin may not put into a self-contained report: scripts, frames, external fetches.
_UNSAFE = re.compile(
    r"<\s*(script|iframe|object|embed|link|meta|base|form|frame)\b|\bon[a-z]+\s*=|javascript:|https?:|"
    r"url\s*\(|\b(src|href|xlink:href|action)\s*=\s*(?![\"']?\s*(data:|#))",
    re.IGNORECASE,
)


def screen(markup: str) -> bool:
    """True when plugin-supplied markup may be inserted (no script, no request leaves the page)."""
    text = (markup or "").replace('xmlns="http://www.w3.org/2000/svg"', "")
    return not _UNSAFE.search(text)


class TrustedMarkdown(str):
    """Markdown this package (or a screened plugin section) wrote; not escaped again."""


_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}|#!~])")


def md_escape(value) -> str:
    """Escape a value for Markdown: no emphasis, links, tables or raw HTML can come from it."""
    if value is None:
        return ""
    if isinstance(value, TrustedMarkdown):
        return value
    if isinstance(value, float):
        value = format_figure(value)
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return " ".join(text.split("\n"))


pct = percent  # a probability as a percentage (one definition, with the verdict that quotes them)


def fmt(value) -> str:
    """Numbers as the literature quotes them; infinities and missing values in words."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return "—"
        return format_figure(float(value)) if isinstance(value, float) else f"{value:,}"
    return str(value)


def plain(value) -> str:
    """A public fact for a reader: a mapping as 'state = MA, size = 2', a list as words."""
    if value is None:
        return "— (none)"
    if isinstance(value, dict):
        return ", ".join(f"{k} = {fmt(v)}" for k, v in value.items()) or "— (none)"
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(fmt(v) for v in value) or "— (none)"
    return compact(value)


PREMETRIC_NAMES = {
    "pure": "pure DP (MULT)",
    "approx": "approximate DP (epsilon, delta)",
    "zcdp": "zero-concentrated DP (zCDP, rho)",
    "renyi": "Rényi DP",
    "gdp": "Gaussian DP (mu)",
}
RELATION_NAMES = {
    "hamming": "changing one record of table {t} (hamming)",
    "symdiff": "adding or removing one record of table {t} (symdiff)",
}


PROGRAM_WORDS = (
    "Budgets of several releases of the same data add up (sequential composition); releases "
    "that each use a separate part of the data (a parallel group, such as one per state) count once, "
    "at the largest of them (parallel composition)."
)


def premetric_words(kind: str) -> str:
    return PREMETRIC_NAMES.get(kind, kind)


def currency_words(currency: str) -> str:
    """A bound's currency as the ledger names it ('pure, hamming') in words; other forms as they are."""
    short = {"hamming": "change one unit (hamming)", "symdiff": "add or remove one unit (symdiff)"}
    parts = [p.strip() for p in str(currency).split(",")]
    if len(parts) == 2 and parts[0] in PREMETRIC_NAMES and parts[1] in short:
        return f"{PREMETRIC_NAMES[parts[0]]}, {short[parts[1]]}"
    return str(currency)


def relation_words(relation: str, table: str) -> str:
    return RELATION_NAMES.get(relation, relation + " on {t}").format(t=table)


def _flat_list(value) -> bool:
    return isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value)


def compact(value, number=fmt) -> str:
    """A value on one line: scalars as numbers, flat lists and mappings in words, else JSON."""
    if isinstance(value, dict) and all(
        not isinstance(v, dict) and (not isinstance(v, list) or _flat_list(v)) for v in value.values()
    ):
        parts = [
            f"{_key(k)}: [{', '.join(number(x) for x in v)}]" if isinstance(v, list) else f"{_key(k)}: {number(v)}"
            for k, v in value.items()
        ]
        return ", ".join(parts) or "—"
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(number(v) for v in value) or "—"
    if isinstance(value, (dict, list)):
        return nested(value, number)
    return number(value)


def _runs(values: list, number) -> str:
    """A flat list in words, each run of three or more consecutive whole numbers as 'a–b'
    (ages 0 to 17 read '0–17', not eighteen numbers)."""
    out, i = [], 0
    while i < len(values):
        j = i
        while (
            j + 1 < len(values)
            and type(values[j]) is int
            and type(values[j + 1]) is int
            and values[j + 1] == values[j] + 1
        ):
            j += 1
        if j - i >= 2:
            out.append(f"{number(values[i])}–{number(values[j])}")
        else:
            out.extend(number(v) for v in values[i : j + 1])
        i = j + 1
    return ", ".join(out)


def _key(k) -> str:
    """A parameter's key as written: a query's factors joined by ' * '."""
    return " * ".join(part.strip() for part in str(k).split("*")) if "*" in str(k) else str(k)


def nested(value, number=fmt) -> str:
    """A nested parameter (recodes, passes, per-level shares) in the spec's own order, as
    'name {key: value; ...}' with lists in brackets, instead of sorted JSON."""
    if isinstance(value, dict):
        return (
            "; ".join(
                f"{_key(k)}: {{{nested(v, number)}}}" if isinstance(v, dict) else f"{_key(k)}: {nested(v, number)}"
                for k, v in value.items()
            )
            or "—"
        )
    if isinstance(value, list):
        if _flat_list(value):
            return f"[{_runs(value, number)}]"
        return (
            "["
            + "; ".join(f"{{{nested(v, number)}}}" if isinstance(v, dict) else nested(v, number) for v in value)
            + "]"
        )
    return number(value)


def _written(value) -> str:
    """A spec's own number as its author wrote it (0.9999 stays 0.9999, not the rounded 1)."""
    if isinstance(value, float) and math.isfinite(value):
        return repr(value)
    return fmt(value)


def as_written(value) -> str:
    """Mechanism parameters: like `compact`, but numbers exactly as the spec states them."""
    return compact(value, _written)


def as_records(value):
    """Rows for a table when a figure is a list of records or a mapping of records, else None
    (utility figures such as error by level and query read better as tables than as JSON)."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        value = [{"name": k, **v} for k, v in value.items()]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        columns: list = []
        for row in value:
            columns.extend(k for k in row if k not in columns)
        return {"columns": columns, "rows": [[row.get(c) for c in columns] for row in value]}
    return None


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _common_filters(env: jinja2.Environment):
    env.filters["fmt"] = fmt
    env.filters["pct"] = pct
    env.filters["json"] = pretty_json
    env.filters["as_records"] = as_records
    env.filters["compact"] = compact
    env.filters["as_written"] = as_written
    env.filters["plain"] = plain
    env.filters["premetric_words"] = premetric_words
    env.filters["relation_words"] = relation_words
    env.filters["currency_words"] = currency_words
    env.globals["CSP"] = CSP
    env.globals["PROGRAM_WORDS"] = PROGRAM_WORDS


@functools.lru_cache(maxsize=1)
def html_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dpspec", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    _common_filters(env)
    return env


@functools.lru_cache(maxsize=1)
def markdown_env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dpspec", "templates"),
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=md_escape,
        keep_trailing_newline=True,
    )
    _common_filters(env)
    env.filters["trusted"] = TrustedMarkdown
    return env


# ---- figures ---------------------------------------------------------------------------------


def _float(value):
    if value is None:
        return None
    if isinstance(value, str):
        return math.inf if value == "inf" else None
    return float(value)


def figures(model: dict) -> dict:
    """The inline SVG figures of the HTML report, keyed by section."""
    out = {}
    budget = model["budget"]
    bounds = budget.get("bounds") or []
    drawable = [b for b in bounds if b["achieved"] is not None]
    if drawable:
        bars = [
            svg.Bar(b["bound"], _float(b["achieved"]), "ok" if b["holds"] else "bad", _float(b["limit"]))
            for b in drawable
        ]
        out["bounds"] = svg.bar_chart("Achieved budget against each declared bound (dashed line)", bars)
    native = budget["native"] or {}
    declared, worst = budget.get("declared"), budget.get("worst")
    if native.get("per_universe") and declared:
        param = _headline_param(declared)
        bars = [svg.Bar("actual universe", _float(declared.get(param)), "neutral")]
        bars.append(
            svg.Bar(
                "worst admitted universe",
                _float(worst.get(param)) if worst else math.inf,
                "muted" if worst and worst.get("finite") else "bad",
            )
        )
        out["universes"] = svg.bar_chart(f"Budget ({param}) in the actual universe and the worst case", bars)
    words = model.get("plain_words") or {}
    if words.get("available"):
        out["plain_words"] = _tradeoff_figure(words["rows"])
    comparison = model.get("comparison")
    if comparison:
        row = next((r for r in comparison["rows"] if r["block"] == "budget"), None)
        ev = row["evidence"] if row else {}
        if "spec_converted" in ev:
            param = _headline_param(ev["spec_converted"])
            bars = [
                svg.Bar("this spec", _float(ev["spec_converted"].get(param)), "neutral"),
                svg.Bar("baseline", _float(ev["baseline_converted"].get(param)), "muted"),
            ]
            out["comparison"] = svg.bar_chart(f"Budgets in one currency ({param}; {ev['currency']})", bars)
    return out


def _tradeoff_figure(rows: list[dict]) -> Markup:
    """Each entity's trade-off curve against perfect privacy (f(alpha) = 1 - alpha)."""
    alpha = np.linspace(0.0, 1.0, 101)

    def budget(params: dict):
        return budget_from_params({k: v if k == "premetric" else _float(v) for k, v in params.items()})

    series = [(r["who"], alpha.tolist(), tradeoff(budget(r["read_as"]), alpha)) for r in rows]
    return svg.curve_chart(
        "What a test can do: trade-off curves",
        series,
        x_label="false-positive rate alpha (type I error)",
        y_label="smallest miss rate f(alpha)",
        reference=("perfect privacy: 1 - alpha", [0.0, 1.0], [1.0, 0.0]),
    )


def _headline_param(budget_json: dict) -> str:

    return HEADLINE_PARAM.get(budget_json.get("premetric"), "epsilon")


def _sections_html(model: dict) -> list[dict]:
    out = []
    for s in model["sections"]:
        safe = screen(s["html"])
        out.append({**s, "html": Markup(s["html"]) if safe else None, "screened_out": not safe})
    return out


def _sections_markdown(model: dict) -> list[dict]:
    out = []
    for s in model["sections"]:
        safe = screen(s["markdown"])
        out.append({**s, "markdown": TrustedMarkdown(s["markdown"]) if safe else None, "screened_out": not safe})
    return out


def _budget_section(model: dict, env: jinja2.Environment, kind: str, wrap):
    """The mechanism's budget section (`dpspec.contract.BudgetSection`): its plugin's template
    rendered in `env` with the spending figures as `d`; "" when there is none. Markup that fails
    the safety screen is withheld, as a plugin section's is."""

    template = (model.get(RENDER_ONLY) or {}).get(f"budget_{kind}")
    if not template:
        return ""
    if kind == "html":  # the HTML environment drops a template's final newline; a plugin's is kept, as in Markdown
        template += "\n"
    text = env.from_string(template).render(d=model["budget"]["spending"])
    if not screen(text):
        text = (
            '<p class="meta">The mechanism\'s budget section was withheld: it tried to load or run something; '
            "report.json holds its figures (budget.spending).</p>\n"
            if kind == "html"
            else "The mechanism's budget section was withheld: it tried to load or run something; report.json holds "
            "its figures (budget.spending).\n\n"
        )
    return wrap(text)


def render_html(model: dict) -> str:
    env = html_env()
    return env.get_template("report.html.j2").render(
        m=model,
        figures=figures(model),
        sections=_sections_html(model),
        budget_section=_budget_section(model, env, "html", Markup),
    )


def render_markdown(model: dict) -> str:
    env = markdown_env()
    return env.get_template("report.md.j2").render(
        m=model,
        sections=_sections_markdown(model),
        budget_section=_budget_section(model, env, "markdown", TrustedMarkdown),
    )


def render_json(model: dict) -> str:

    data = {k: v for k, v in model.items() if k != RENDER_ONLY}
    return json.dumps(versioned("report", data), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
