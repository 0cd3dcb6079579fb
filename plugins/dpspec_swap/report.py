"""Report sections for swap releases: the budget against the swap rate, for the actual b and
for alternative stratifications (the seed paper's comparison), and, internally, the utility.

Everything shown publicly is a function of the declared invariants (b of the spec's key and of
the alternative keys whose counts the invariants publish). Every value is escaped; the HTML
is self-contained (inline SVG, no requests).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from markupsafe import Markup, escape

from dpspec.api import Section
from dpspec_swap.theorem import minimum_epsilon, psa_epsilon

RATE_GRID = tuple(
    Fraction(x)
    for x in (
        "0.005",
        "0.01",
        "0.02",
        "0.03",
        "0.05",
        "0.075",
        "0.1",
        "0.15",
        "0.2",
        "0.3",
        "0.4",
        "0.5",
        "0.6",
        "0.7",
        "0.8",
        "0.9",
        "0.95",
        "0.99",
    )
)
TABLE_RATES = tuple(Fraction(x) for x in ("0.01", "0.02", "0.05", "0.1", "0.5"))
PALETTE = ("#3b5b92", "#a4262c", "#2f6f4f", "#8a5a00", "#6b3f8f", "#4d6b73", "#8a8f98")


def _key_label(match) -> str:
    return " x ".join(match) if match else "(no match key)"


def _json_eps(value: float):
    return "inf" if math.isinf(value) else value


def _fmt(value) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:.2f}"


def budget_data(facts: dict, rate) -> dict:
    """The section's data: one curve per distinct b, the keys that share it, the spec's point."""
    rows = list(facts.get("alternatives") or [])
    spec_key = list(facts.get("match") or [])
    if not any(r.get("is_spec") for r in rows):
        rows.insert(
            0,
            {"match": spec_key, "b": int(facts["b"]), "largest_stratum": facts.get("largest_stratum"), "is_spec": True},
        )
    curves: dict[int, dict] = {}
    for r in rows:
        c = curves.setdefault(int(r["b"]), {"b": int(r["b"]), "keys": [], "is_spec": False})
        c["keys"].append(list(r["match"]))
        c["is_spec"] = c["is_spec"] or bool(r.get("is_spec"))
    for c in curves.values():
        least, at = minimum_epsilon(c["b"])
        at = float(at) if at is not None else None
        c["minimum"] = {"epsilon": least, "rate": at}
        c["rates"] = _curve_rates(at)  # the grid, and the curve's minimum with a point past it
        c["epsilon"] = [_json_eps(psa_epsilon(c["b"], p)) for p in c["rates"]]
    ordered = sorted(curves.values(), key=lambda c: (not c["is_spec"], -c["b"]))
    keys = [
        {
            "match": list(r["match"]),
            "b": int(r["b"]),
            "largest_stratum": r.get("largest_stratum"),
            "is_spec": bool(r.get("is_spec")),
            "epsilon": [{"rate": float(p), "epsilon": _json_eps(psa_epsilon(int(r["b"]), p))} for p in TABLE_RATES],
        }
        for r in rows
    ]
    b = int(facts["b"])
    least, at = minimum_epsilon(b)
    return {
        "rate": float(rate),
        "b": b,
        "largest_stratum": facts.get("largest_stratum"),
        "epsilon": _json_eps(psa_epsilon(b, rate)),
        "minimum_epsilon": least,
        "minimum_rate": float(at) if at is not None else None,
        "rates": [float(p) for p in RATE_GRID],
        "curves": ordered,
        "keys": keys,
        "table_rates": [float(p) for p in TABLE_RATES],
    }


def _curve_rates(at: float | None) -> list[float]:
    """The plot's rates for one curve: the fixed grid plus its minimum's rate and one beyond it,
    so the curve shows where epsilon stops falling and rises again."""
    rates = {float(p) for p in RATE_GRID}
    if at is not None:
        rates |= {at, 1 - (1 - at) / 4}
    return sorted(rates)


def _ticks(top: float) -> list[float]:
    """Round tick values (steps of 1, 2 or 5 times a power of ten) from 0 up to `top`."""
    raw = top / 4
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [k * step for k in range(int(top // step) + 1)]


def _minimum_words(data: dict) -> str:
    """The curve's floor in a sentence: no rate gives less; every larger epsilon has two rates."""
    if data.get("minimum_rate") is None:
        return "With b = 0 every rate gives epsilon = 0."
    return (
        f"No swap rate gives less than epsilon = {data['minimum_epsilon']:.2f} for this b (ln(b+1)/2, at "
        f"p = {data['minimum_rate']:.4g}); every larger epsilon is given by two rates, one on each side "
        "(dpspec swap epsilon --epsilon E prints both)."
    )


# ---- HTML ----------------------------------------------------------------------------------


def budget_svg(data: dict, width: int = 640, height: int = 320) -> Markup:
    """epsilon against the swap rate, one line per b; the spec's rate marked."""
    left, right, top, bottom = 52, 16, 20, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    finite = [e for c in data["curves"] for e in c["epsilon"] if e != "inf"]
    y_max = (max(finite) if finite else 1.0) * 1.08 or 1.0

    def x(p):
        return left + plot_w * p

    def y(e):
        return top + plot_h * (1 - e / y_max)

    title = "Budget against swap rate, by stratification"
    out = [
        f'<svg role="img" class="figure" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#444"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>',
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1):
        out.append(
            f'<text x="{x(tick):.1f}" y="{top + plot_h + 16}" font-size="11" text-anchor="middle">'
            f"{escape(f'{tick:g}')}</text>"
        )
    for value in _ticks(y_max):
        out.append(
            f'<text x="{left - 6}" y="{y(value) + 4:.1f}" font-size="11" text-anchor="end">{escape(f"{value:g}")}</text>'
        )
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" font-size="12" text-anchor="middle">swap rate p</text>'
    )
    out.append(
        f'<text x="12" y="{top + plot_h / 2:.1f}" font-size="12" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + plot_h / 2:.1f})">epsilon</text>'
    )
    for i, curve in enumerate(data["curves"]):
        color = PALETTE[i % len(PALETTE)]
        points = " ".join(
            f"{x(p):.1f},{y(e):.1f}" for p, e in zip(curve.get("rates", data["rates"]), curve["epsilon"]) if e != "inf"
        )
        width_attr = 3 if curve["is_spec"] else 1.5
        label = f"b = {curve['b']:,}: " + "; ".join(_key_label(k) for k in curve["keys"])
        out.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="{width_attr}" points="{points}">'
            f"<title>{escape(label)}</title></polyline>"
        )
        low = curve.get("minimum") or {}
        if low.get("rate") is not None:
            where = f"minimum for b = {curve['b']:,}: epsilon = {low['epsilon']:.2f} at p = {low['rate']:.4g}"
            out.append(
                f'<circle cx="{x(low["rate"]):.1f}" cy="{y(low["epsilon"]):.1f}" r="3.5" fill="#fff" '
                f'stroke="{color}" stroke-width="2"><title>{escape(where)}</title></circle>'
            )
    if data["epsilon"] != "inf":
        px, py = x(data["rate"]), y(data["epsilon"])
        out.append(
            f'<line x1="{px:.1f}" y1="{top}" x2="{px:.1f}" y2="{top + plot_h}" stroke="#111" stroke-dasharray="3,2"/>'
        )
        point = f"this spec: p = {data['rate']:g}, epsilon = {data['epsilon']:.2f}"
        out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="4" fill="#111"><title>{escape(point)}</title></circle>')
    out.append("</svg>")
    return Markup("".join(out))


def budget_html(data: dict) -> Markup:
    parts = [
        Markup("<p>"),
        escape(
            f"The budget of permutation swapping depends on the swap rate and on b, the largest stratum "
            f"holding two different records. This release: b = {data['b']:,}, p = {data['rate']:g}, "
            f"epsilon = {_fmt(data['epsilon'])}. {_minimum_words(data)} Finer match keys lower b and the nominal "
            f"budget only by publishing more statistics exactly; coarser keys do the opposite."
        ),
        Markup("</p>"),
        budget_svg(data),
    ]
    legend = [Markup('<ul class="legend">')]
    for i, curve in enumerate(data["curves"]):
        color = PALETTE[i % len(PALETTE)]
        keys = "; ".join(_key_label(k) for k in curve["keys"])
        spec = " (this spec)" if curve["is_spec"] else ""
        legend.append(
            Markup('<li><span style="color:{}">&#9632;</span> {}</li>').format(
                color, f"b = {curve['b']:,}: {keys}{spec}"
            )
        )
    legend.append(Markup("</ul>"))
    rates = [RATE_HEAD.format(p=p) for p in data["table_rates"]]
    head = Markup("").join(Markup("<th>{}</th>").format(h) for h in rates)
    rows = [
        Markup(
            '<table class="stack"><thead><tr><th>match key</th><th>{}</th><th>largest stratum</th>{}</tr></thead>'
            "<tbody>"
        ).format(B_HEAD, head)
    ]
    for k in data["keys"]:
        where = ", ".join(f"{c} = {v}" for c, v in (k["largest_stratum"] or {}).items()) or "-"
        cells = Markup("").join(
            Markup('<td data-label="{}">{}</td>').format(h, _fmt(e["epsilon"])) for h, e in zip(rates, k["epsilon"])
        )
        label = _key_label(k["match"]) + (" (this spec)" if k["is_spec"] else "")
        rows.append(
            Markup(
                '<tr><td data-label="match key">{}</td><td data-label="{}">{}</td>'
                '<td data-label="largest stratum">{}</td>{}</tr>'
            ).format(label, B_HEAD, f"{k['b']:,}", where, cells)
        )
    rows.append(Markup("</tbody></table>"))
    return Markup("").join(parts + legend + rows)


# Column heads in words: a printed report has no hover text to explain "eps" or "b".
RATE_HEAD = "epsilon at swap rate p = {p:g}"
B_HEAD = "b (units in the largest stratum)"


# ---- Markdown ------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}|#!~<>&])")


def md(value) -> str:
    """A value as inert Markdown text: no emphasis, links, tables or HTML can come from it."""
    text = str(value)
    text = _MD_SPECIAL.sub(lambda m: {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(m.group(1), "\\" + m.group(1)), text)
    return " ".join(text.split())


def budget_markdown(data: dict) -> str:
    lines = [
        md(
            f"This release: b = {data['b']:,}, p = {data['rate']:g}, epsilon = {_fmt(data['epsilon'])}. "
            f"{_minimum_words(data)} Finer match keys lower b and the nominal budget only by publishing more statistics exactly."
        ),
        "",
    ]
    head = ["match key", B_HEAD, "largest stratum", *[RATE_HEAD.format(p=p) for p in data["table_rates"]]]
    lines.append("| " + " | ".join(md(h) for h in head) + " |")
    lines.append("|" + "---|" * len(head))
    for k in data["keys"]:
        where = ", ".join(f"{c} = {v}" for c, v in (k["largest_stratum"] or {}).items()) or "-"
        label = _key_label(k["match"]) + (" (this spec)" if k["is_spec"] else "")
        cells = [label, f"{k['b']:,}", where, *[_fmt(e["epsilon"]) for e in k["epsilon"]]]
        lines.append("| " + " | ".join(md(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


# ---- utility (internal) --------------------------------------------------------------------


def utility_section(utility: dict):
    tables = utility.get("tables") or {}
    if not tables:
        return None
    head = ["table", "invariant", "cells", "mean MAPE (%)", "sd", "runs"]
    md_lines = [
        md(
            f"Mean absolute percentage error against the confidential data over {utility.get('runs', 1)} "
            f"run(s) at p = {utility.get('rate', float('nan')):g}."
        ),
        "",
        "| " + " | ".join(md(h) for h in head) + " |",
        "|" + "---|" * len(head),
    ]
    html = [
        Markup("<table><thead><tr>"),
        Markup("").join(Markup("<th>{}</th>").format(h) for h in head),
        Markup("</tr></thead><tbody>"),
    ]
    for t in tables.values():
        m = t["mape_percent"]
        cells = [
            t["query"],
            "yes" if t["invariant"] else "no",
            str(t["cells"]),
            "-" if m["mean"] is None else f"{m['mean']:.3f}",
            "-" if m["sd"] is None else f"{m['sd']:.3f}",
            str(len(m["per_run"])),
        ]
        md_lines.append("| " + " | ".join(md(c) for c in cells) + " |")
        html.append(Markup("<tr>") + Markup("").join(Markup("<td>{}</td>").format(c) for c in cells) + Markup("</tr>"))
    html.append(Markup("</tbody></table>"))
    return Section(
        "Swapping: utility of the released tables",
        str(Markup("").join(html)),
        "\n".join(md_lines) + "\n",
        utility,
        internal=True,
    )


def sections(result) -> list:
    """The report sections for a compiled swap result (none for other mechanisms)."""
    mech = getattr(result, "mechanism", None)
    if getattr(mech, "name", None) != "swap" or "b" not in (result.facts or {}):
        return []
    data = budget_data(result.facts, result.checked.params["rate"])
    out = [
        Section(
            "Swapping: budget against swap rate, by stratification", str(budget_html(data)), budget_markdown(data), data
        )
    ]
    util = utility_section(result.utility or {})
    if util is not None:
        out.append(util)
    return out
