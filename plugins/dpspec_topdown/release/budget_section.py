"""TopDown's part of the report's budget section: the allocation per level and query, the AIAN
spine's parts and the budgets the optimized spine moves (the `dpspec_report_budget` hook).

Its words and keys live here, not in dpspec's templates: the core renders these templates with
the figures below as `d`, escaping every value, and writes the figures to report.json and
`dpspec compile --json` as `budget.spending`.
"""

from __future__ import annotations

from fractions import Fraction

from dpspec.api import BudgetSection, hookimpl, ir


def spending(breakdown: dict) -> dict | None:
    """The report's figures from `TopDown.budget_breakdown` (as `dpspec budget --json` lists it):
    each level's total, each query's rho and noise, and the geounit classes whose budget the spine
    moves (a single-child unit measured with its chain's shares, summed over the chain's queries).
    None when there is no allocation to show."""
    rows = (breakdown or {}).get("allocation")
    if not rows:
        return None
    total = sum((Fraction(r["rho_exact"]) for r in rows), Fraction(0))
    levels: dict[str, Fraction] = {}
    for r in rows:
        levels[r["level"]] = levels.get(r["level"], Fraction(0)) + Fraction(r["rho_exact"])
    spine = breakdown.get("spine") or {}
    classes: dict[tuple, dict] = {}
    for c in (spine.get("bypass") or {}).get("classes", ()):
        entry = classes.setdefault(
            (c["level"], c["through"]),
            {
                "level": c["level"],
                "through": c["through"],
                "class": c["class"],
                "level_share": c["level_share"],
                "rho": Fraction(0),
                "queries": 0,
            },
        )
        entry["rho"] += Fraction(c["rho_exact"])
        entry["queries"] += 1
    return {
        "total_exact": ir.format_number(total),
        "levels": [
            {
                "level": lv,
                "rho_exact": ir.format_number(r),
                "rho": float(r),
                "share": ir.format_number(r / total) if total else "0",
            }
            for lv, r in levels.items()
        ],
        "queries": [
            {k: r.get(k) for k in ("level", "query", "share", "rho_exact", "rho", "noise_variance")} for r in rows
        ],
        "bypass": [
            {
                **{k: v for k, v in e.items() if k != "rho"},
                "rho_exact": ir.format_number(e["rho"]),
                "rho": float(e["rho"]),
            }
            for e in classes.values()
        ],
        "aian": spine.get("aian") or None,
    }


# The Markdown and HTML of the section: Jinja templates of the report's own environments.
MARKDOWN = """### Allocation: which geographic level and query spends what

rho = {{ d.total_exact }} is split over the geographic levels, and each level's share over its queries; every geounit of a level spends its level's rho, except where the spine moves it (below); exact fractions. Each query's answers get discrete Gaussian noise of the variance shown.

| Level | rho (exact) | Share of the total |
| --- | --- | --- |
{% for lv in d.levels %}
| {{ lv.level }} | {{ lv.rho_exact }} | {{ lv.share }} |
{% endfor %}

| Level | Query | Share of the level | rho (exact) | Noise variance |
| --- | --- | --- | --- | --- |
{% for q in d.queries %}
| {{ q.level }} | {{ q.query }} | {{ q.share }} | {{ q.rho_exact }} | {{ q.noise_variance|fmt }} |
{% endfor %}
{% if d.aian %}

AIAN spine: every {{ d.aian.split_levels|join(", ") }} unit is measured as two geounits, its part inside the American Indian / Alaska Native areas (column '{{ d.aian.column }}') and the rest, each spending its level's rho above; invariants are {{ d.aian.invariants }}.
{% endif %}
{% if d.bypass %}

#### Budgets the spine moves: geounits with a single child

A geounit with a single child is not measured apart from it (production's optimized spine): the top of a chain of single children is measured once, with the shares of every level down to where the chain ends (at its own level's query shares), and the units below it in the chain are not measured. The budget moves between levels and is not added: over every block, its geounits still spend rho = {{ d.total_exact }} in all. Such a top geounit spends:

| Geounit of level | Its chain of single children reaches | Share of the total | rho it spends (exact) | rho |
| --- | --- | --- | --- | --- |
{% for c in d.bypass %}
| {{ c.level }} | {{ c.through }} | {{ c.level_share }} | {{ c.rho_exact }} | {{ c.rho|fmt }} |
{% endfor %}
{% endif %}

"""

HTML = """<h3 id="allocation">Allocation: which geographic level and query spends what</h3>
<p>rho = {{ d.total_exact }} is split over the geographic levels, and each level's share over its queries; every geounit of a level spends its level's rho, except where the spine moves it (below); exact fractions. Each query's answers get discrete Gaussian noise of the variance shown.</p>
<table>
<thead><tr><th>Level</th><th>rho (exact)</th><th>Share of the total</th></tr></thead>
<tbody>{% for lv in d.levels %}<tr><td>{{ lv.level }}</td><td>{{ lv.rho_exact }}</td><td>{{ lv.share }}</td></tr>
{% endfor %}</tbody>
</table>
<details><summary>Every query ({{ d.queries|length }})</summary>
<table class="stack">
<thead><tr><th>Level</th><th>Query</th><th>Share of the level</th><th>rho (exact)</th><th>Noise variance</th></tr></thead>
<tbody>{% for q in d.queries %}<tr><td data-label="Level">{{ q.level }}</td><td data-label="Query">{{ q.query }}</td><td data-label="Share of the level">{{ q.share }}</td><td data-label="rho (exact)">{{ q.rho_exact }}</td><td class="num" data-label="Noise variance">{{ q.noise_variance|fmt }}</td></tr>
{% endfor %}</tbody>
</table>
</details>
{% if d.aian %}
<p>AIAN spine: every {{ d.aian.split_levels|join(", ") }} unit is measured as two geounits, its part inside the American Indian / Alaska Native areas (column '{{ d.aian.column }}') and the rest, each spending its level's rho above; invariants are {{ d.aian.invariants }}.</p>
{% endif %}
{% if d.bypass %}
<h4>Budgets the spine moves: geounits with a single child</h4>
<p>A geounit with a single child is not measured apart from it (production's optimized spine): the top of a chain of single children is measured once, with the shares of every level down to where the chain ends (at its own level's query shares), and the units below it in the chain are not measured. The budget moves between levels and is not added: over every block, its geounits still spend rho = {{ d.total_exact }} in all. Such a top geounit spends:</p>
<table class="stack">
<thead><tr><th>Geounit of level</th><th>Its chain of single children reaches</th><th>Share of the total</th><th>rho it spends (exact)</th><th>rho</th></tr></thead>
<tbody>{% for c in d.bypass %}<tr><td data-label="Geounit of level">{{ c.level }}</td><td data-label="Chain reaches">{{ c.through }}</td><td data-label="Share of the total">{{ c.level_share }}</td><td data-label="rho (exact)">{{ c.rho_exact }}</td><td class="num" data-label="rho">{{ c.rho|fmt }}</td></tr>
{% endfor %}</tbody>
</table>
{% endif %}
"""


@hookimpl
def dpspec_report_budget(spec, mechanism, params):
    """TopDown's allocation section; None for another plugin's mechanism."""
    if getattr(mechanism, "name", None) != "topdown":
        return None
    data = spending(mechanism.budget_breakdown(spec, params).figures)
    return BudgetSection(data=data, markdown=MARKDOWN, html=HTML) if data is not None else None
