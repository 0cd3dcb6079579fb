"""Report sections for aggregate releases: clipping and accuracy in plain words (public), and the
realized error against the confidential values with the clipped counts (internal).

Public: what the declared bounds do to each answer, from the parameters alone (how many values
were clipped is a figure of the confidential data, so it is internal). Internal: each query's
released values against the confidential ones, cell by cell, over the compile's runs.
"""

from __future__ import annotations

from markupsafe import Markup

from dpspec.api import Section, ir

from . import design as design_mod


def _fmt(v, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _table(headers, rows) -> tuple[Markup, str]:
    html = [
        Markup("<table><thead><tr>"),
        *(Markup("<th>{}</th>").format(h) for h in headers),
        Markup("</tr></thead><tbody>"),
    ]
    md = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        html.append(Markup("<tr>") + Markup("").join(Markup("<td>{}</td>").format(c) for c in r) + Markup("</tr>"))
        md.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    html.append(Markup("</tbody></table>"))
    return Markup("").join(html), "\n".join(md)


def _section(title: str, paragraphs: list[str], table=None, data=None, internal: bool = False) -> Section:
    html = Markup("").join(Markup("<p>{}</p>").format(p) for p in paragraphs)
    md = "\n\n".join(paragraphs)
    if table is not None:
        html += table[0]
        md += "\n\n" + table[1]
    return Section(title, str(html), md + "\n", data or {}, internal=internal)


def clipping_words(design) -> list[str]:
    """One sentence per clipped query: what its bounds do to the answer, in plain words."""
    out = []
    for q in design.queries:
        if not q.clipped:
            continue
        lo, hi = q.low, q.high
        what = {
            "sum": "the sum of each cell",
            "mean": "the mean of each cell",
            "quantile": f"the {ir.format_number(q.q)} quantile of each cell",
        }[q.statistic]
        effect = {
            "sum": f"a cell with values above {hi} gets a sum lower than its true one (below {lo}: higher)",
            "mean": f"a cell with many values above {hi} gets a mean lower than its true one (below {lo}: higher), "
            f"and every released mean lies between {lo} and {hi}",
            "quantile": f"a quantile above {hi} (or below {lo}) is released as {hi} (or {lo}): the grid runs from "
            f"{lo} to {hi} in steps of {q.grid_step}",
        }[q.statistic]
        out.append(
            f"Query '{q.name}' ({q.statistic} of {q.column}): before anything is added, a value below {lo} counts "
            f"as {lo} and a value above {hi} counts as {hi}. The bounds cap what one person can change, which sets "
            f"the noise; the price is a bias in {what} when values lie outside them: {effect}. Nothing is "
            "refused or dropped. The bounds are declared in the spec, never taken from the data; how many values "
            "were clipped is a figure of the confidential data and is in the internal report only."
        )
    return out


def public_section(design) -> Section | None:
    words = clipping_words(design)
    if design.postprocess == "total":
        words.append(design_mod.TOTAL_BIAS)
    if not words:
        return None
    return _section("Aggregate: clipping and post-processing in plain words", words, data={"clipping": words})


def internal_section(utility: dict) -> Section | None:
    queries = utility.get("queries")
    if not queries:
        return None
    runs = utility.get("runs", 1)
    intro = [
        f"Released values against the confidential ones, cell by cell, over {runs} run(s) of "
        f"{_fmt(utility.get('cells'))} cells and {_fmt(utility.get('records'))} records. "
        + (
            "The truth of a sum or mean is the unclipped one, so its error includes what clipping moved (stated apart); "
            if utility.get("truth_unclipped", True)
            else "The truth of a sum or mean is the clipped one (the table stayed on the engine), so its error is the "
            "noise's alone; "
        )
        + "a quantile's truth is the grid point the clipped values give. A mean or quantile of an empty cell has no true value and is left out "
        "of its figures."
    ]
    for r in queries:
        if "clipped_values" in r:
            share = 100 * r["clipped_share"]
            intro.append(
                f"Query '{r['query']}': {_fmt(r['clipped_values'])} value(s) of {r['column']} "
                f"({share:.1f}% of the records) lay outside [{r['bounds'][0]}, {r['bounds'][1]}] and were "
                "clipped to the nearest bound"
                + (
                    ": clipping pulls those cells' answers toward the bounds, "
                    "a bias the noise scale and interval do not include."
                    if r["clipped_values"]
                    else "; clipping changed nothing."
                )
            )
    headers = [
        "query",
        "statistic",
        "cells",
        "without a value",
        "mean abs error",
        "RMSE",
        "mean error (bias)",
        "largest error",
        "values clipped",
        "of the bias, clipping's",
    ]
    rows = [
        [
            r["query"],
            r["statistic"],
            _fmt(r["cells"]),
            _fmt(r["cells_without_a_value"]),
            _fmt(r["mean_absolute_error"]),
            _fmt(r["rmse"]),
            _fmt(r["mean_error"]),
            _fmt(r["largest_absolute_error"]),
            _fmt(r.get("clipped_values")),
            _fmt(r.get("clipping_bias")),
        ]
        for r in queries
    ]
    summary = _section(
        "Aggregate: realized error against the confidential values",
        intro,
        _table(headers, rows),
        data=utility,
        internal=True,
    )
    per_cell = utility.get("per_cell") or {}
    if per_cell:
        cols = list(per_cell)
        n = utility.get("cells_listed", 0)
        cell_rows = [[_fmt(per_cell[c][i]) for c in cols] for i in range(n)]
        t_html, t_md = _table(cols, cell_rows)
        more = f" (the first {n:,} of {utility['cells']:,})" if n < utility.get("cells", 0) else ""
        lead = Markup("<p>{}</p>").format(f"Cell by cell, first run{more}:")
        summary = Section(
            summary.title,
            summary.html + str(lead + t_html),
            summary.markdown + f"\nCell by cell, first run{more}:\n\n" + t_md + "\n",
            utility,
            internal=True,
        )
    return summary


def sections(result) -> list:
    mech = getattr(result, "mechanism", None)
    if getattr(mech, "name", None) != "aggregate":
        return []
    design, problems = design_mod.parse(result.spec, result.checked.params)
    if design is None:
        return []
    out = [s for s in (public_section(design), internal_section(result.utility or {})) if s is not None]
    return out
