"""The public report's Tumult section: the Session's own accounting beside dpspec's statement."""

from __future__ import annotations

from markupsafe import Markup

from dpspec.api import Section


def sections(result) -> list:
    mech = getattr(result, "mechanism", None)
    if getattr(mech, "name", None) != "tumult" or result.release is None:
        return []
    facts = result.release.facts
    versions = ", ".join(f"{k} {v}" for k, v in facts["tumult_versions"].items())
    paragraphs = (
        f"Tumult Analytics evaluated the queries in a Session built with {facts['tumult_session_budget']} and the "
        f"protected change {facts['tumult_protected_change']} ({facts['tumult_unit']}). Its own accounting: spent "
        f"{facts['tumult_spent_text']}; remaining {facts['tumult_remaining']}.",
        "The queries were built by the user's own Python code (the entry point the spec names), run in a second "
        f"Python interpreter ({versions}). {facts['tumult_seed']}.",
    )
    html = Markup("").join(Markup("<p>{}</p>").format(p) for p in paragraphs)
    md = "\n\n".join(paragraphs) + "\n"
    data = {
        "session_budget": facts["tumult_session_budget"],
        "spent": facts["tumult_spent"],
        "remaining": facts["tumult_remaining"],
        "protected_change": facts["tumult_protected_change"],
        "versions": facts["tumult_versions"],
        "entry_point": result.checked.params["queries"],
        "reproducible_by_seed": False,
    }
    return [Section("Tumult Analytics session", html=html, markdown=md, data=data)]
