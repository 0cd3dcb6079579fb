"""The public report's OpenDP section: the library's own privacy claim beside dpspec's statement."""

from __future__ import annotations

from markupsafe import Markup

from dpspec.api import Section


def sections(result) -> list:
    mech = getattr(result, "mechanism", None)
    if getattr(mech, "name", None) != "opendp" or result.release is None:
        return []
    facts = result.release.facts
    whose = "the Context the query was released through" if facts.get("opendp_context") else "the measurement"
    paragraphs = (
        f"OpenDP's privacy map of {whose} at d_in = {facts['opendp_d_in']} (the spec's unit in OpenDP's "
        f"metric): {facts['opendp_claim']}. The compile checked it against the stated budget before releasing.",
        *((f"OpenDP's own accounting: {facts['opendp_context']}.",) if facts.get("opendp_context") else ()),
        "The measurement was built by the user's own Python code (the entry point the spec names) and drew its "
        "noise from OpenDP's own sampler: " + facts["opendp_seed"] + ".",
    )
    html = Markup("").join(Markup("<p>{}</p>").format(p) for p in paragraphs)
    md = "\n\n".join(paragraphs) + "\n"
    data = {
        "d_in": facts["opendp_d_in"],
        "claim": facts["opendp_claim"],
        "entry_point": result.checked.params["measurement"],
        "context": facts.get("opendp_context"),
    }
    return [Section("OpenDP measurement", html=html, markdown=md, data=data)]
