"""The public report's PHSafe section: the design in plain words and, per (table, geography,
iteration level), its budget and the noise of each count. Functions of the public parameters
only (rho, tau), never of a run's noise, so the section is the same for every run."""

from __future__ import annotations

from markupsafe import Markup

from dpspec.api import Section

TEXT = (
    "Counts of persons in households (PH1_num, PH2, PH3, PH4, PH6, PH7) join each person to their household's "
    "unit record and count at most tau persons of one household (the rest of a larger household is left out). "
    "Counts of units (PH1_denom, PH5_denom, PH8_denom) count occupied housing units. Each measurement with a "
    "budget is published for the nation or for every state, by race and ethnicity iteration, every cell of its "
    "table included, zero or not (a measurement whose rho is 0 is not made).",
    "The budget protects one person: adding or removing one person's record, together with the change it makes "
    "to their unit's record. A person-table count can move by 2 tau + 2 under that change and a unit-table count "
    "by 2, so each count gets exact discrete Gaussian noise of variance sensitivity^2 / (2 rho). PH5_num is PH4 "
    "and PH8_num is PH7 by owner and renter: sums of published counts, with no budget of their own.",
)


def _lines(measurements: list[dict]) -> list[str]:
    """One line per table: its sensitivity, then each measurement's rho and noise sd."""
    by_table: dict = {}
    for m in measurements:
        by_table.setdefault((m["table"], m["sensitivity"]), []).append(
            f"{m['geography']} {m['iteration_level']}: rho {m['rho']}, noise sd {m['noise_sd']:.1f}"
        )
    return [f"{table} (sensitivity {d}): " + "; ".join(parts) for (table, d), parts in by_table.items()]


def public_section(facts: dict) -> Section:
    household = (
        f"A whole household (its unit and all its persons, whatever its size) is protected at rho = "
        f"{facts['household_rho']}, since truncation keeps at most tau of its persons in any count."
    )
    paragraphs = (
        *TEXT,
        household,
        "Each measurement (geography and iteration level) with its rho and the standard "
        "deviation of the noise of each of its counts:",
    )
    lines = _lines(facts.get("measurements", []))
    html = Markup("").join(Markup("<p>{}</p>").format(p) for p in paragraphs)
    html += Markup("<ul>") + Markup("").join(Markup("<li>{}</li>").format(li) for li in lines) + Markup("</ul>")
    md = "\n\n".join(paragraphs) + "\n\n" + "\n".join(f"- {li}" for li in lines) + "\n"
    return Section(
        "PHSafe: tables, unit and noise per measurement",
        str(html),
        md,
        {"design": list(paragraphs[:-1]), "measurements": facts.get("measurements", [])},
    )


def sections(result) -> list:
    mech = getattr(result, "mechanism", None)
    if getattr(mech, "name", None) != "phsafe" or result.release is None:
        return []
    return [public_section(result.release.facts)]
