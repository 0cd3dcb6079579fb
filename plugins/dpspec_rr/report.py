"""The report section of randomized response: why its estimate can fall outside [0, 1].

Only released figures appear (the estimate and the share of 'yes' answers are outputs), so the
section is public. Every value is escaped.
"""

from __future__ import annotations

import math

from markupsafe import Markup, escape

from dpspec.api import Section

TITLE = "Randomized response: reading the estimate"


def _figure(value) -> str:
    return "-" if value is None or (isinstance(value, float) and not math.isfinite(value)) else f"{value:.4f}"


def explanation(p, estimate: dict | None) -> dict:
    """The section's data and sentences: the rule, and where the released estimate falls."""
    p = float(p)
    lie = 1 - p
    sentences = [
        f"Each unit answered truthfully with probability p = {p:g} and gave the other answer otherwise, so "
        f"the share of 'yes' answers mixes true answers with flipped ones. The estimate (q - (1 - p)) / (2p - 1) "
        "undoes the mixing on average: it is unbiased, but it is not confined to the range 0 to 1.",
        f"When few units truly say 'yes', or there are few units, chance alone can make the share of 'yes' "
        f"answers q fall below {lie:g} (what flipped answers alone would give), and the estimate is then "
        f"negative; above {p:g} it exceeds 1. Such a value is not a mistake: it says the true proportion is "
        "near that end, within its standard error. Rounding it to 0 or 1 would make the estimate biased, so "
        "dpspec publishes it as computed.",
    ]
    data = {"p": p, "estimate": None, "reported_proportion": None, "standard_error": None, "outside_0_1": None}
    if estimate:
        data.update({k: estimate.get(k) for k in ("estimate", "reported_proportion", "standard_error")})
        value = data["estimate"]
        if value is not None and math.isfinite(value):
            data["outside_0_1"] = bool(value < 0 or value > 1)
            where = "outside the range 0 to 1, for the reason above" if data["outside_0_1"] else "within 0 to 1"
            sentences.append(
                f"This release: q = {_figure(data['reported_proportion'])}, estimate = "
                f"{_figure(value)} (standard error {_figure(data['standard_error'])}), {where}."
            )
    return {"data": data, "sentences": sentences}


def sections(result) -> list:
    """The section for a compiled randomized-response result (none for other mechanisms)."""
    if getattr(getattr(result, "mechanism", None), "name", None) != "randomized_response":
        return []
    frame = (result.published or {}).get("estimate")
    estimate = (
        {
            k: float(frame[k].iloc[0])
            for k in ("estimate", "reported_proportion", "standard_error")
            if k in frame.columns
        }
        if frame is not None and len(frame)
        else None
    )
    text = explanation(result.checked.params["p"], estimate)
    html = Markup("").join(Markup("<p>{}</p>").format(escape(s)) for s in text["sentences"])
    markdown = "\n\n".join(text["sentences"])  # dpspec's own words and figures: nothing to escape
    return [Section(TITLE, str(html), markdown + "\n", text["data"])]
