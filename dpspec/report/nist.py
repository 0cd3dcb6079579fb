"""The report's sections in the order of NIST SP 800-226 (2025), built from the finished report model.

SP 800-226, *Guidelines for Evaluating Differential Privacy Guarantees*, lists what a reader needs
to judge a guarantee: its definition and parameters, the unit of privacy, composition over every
release, the algorithms and their evidence, utility and bias, security and side channels, the
trust model, and what is exposed outside the noise. Each section here is written from what the
compile and the audit already computed (the model); where the spec is silent it says "not stated
in the spec" rather than leave the section out, since a missing section reads as a missing
problem. Jargon is glossed where it first appears (`GLOSSARY`).
"""

from __future__ import annotations

NOT_STATED = "not stated in the spec"

GLOSSARY = (
    (
        "eps_D (the budget)",
        "the number in front of -DP(...): how much the chances of any output may change "
        "when one unit's data changes; smaller protects more; it may depend on the universe D",
    ),
    (
        "flavor",
        "the four parts a budget is stated in besides its number: the domain (who), the multiverse (which "
        "datasets are compared), the unit (what one change is) and the premetric (how change in the output is "
        "measured); a budget means nothing without its flavor",
    ),
    (
        "currency",
        "a budget's premetric and unit together, as money has a currency: two budgets compare only once "
        "they are converted to one currency, and some conversions do not exist",
    ),
    (
        "MULT (pure differential privacy)",
        "change in the output measured as the largest log-ratio of the "
        "chances of any output with and without one unit; the budget is called epsilon",
    ),
    ("approximate DP (epsilon, delta)", "as pure DP, except that with probability up to delta the bound may fail"),
    (
        "zCDP (zero-concentrated DP, rho)",
        "change measured by the normalized Rényi divergence; rho is read as (epsilon, delta) at a stated delta",
    ),
    ("Hamming / change one", "neighbouring datasets differ in one unit's record, the number of units fixed"),
    ("symdiff / add or remove one", "neighbouring datasets differ by one unit added or removed"),
    (
        "invariant",
        "a statistic published exactly, without noise: it is not protected, and it splits the data "
        "into universes within which alone the budget holds",
    ),
    (
        "bs16",
        "the zCDP-to-(epsilon, delta) conversion of Bun and Steinke (2016), epsilon = rho + 2 sqrt(rho "
        "ln(1/delta)); the Census Bureau's published figures use it",
    ),
    (
        "cks20",
        "the tighter zCDP-to-(epsilon, delta) conversion of Canonne, Kamath and Steinke (2020), the one OpenDP uses",
    ),
    ("pure-zcdp", "pure epsilon restated as zCDP: rho = epsilon² / 2"),
)


def _section(key: str, title: str, paragraphs: list[str], silent: list[str]) -> dict:
    """`silent`: what the spec does not state for this section, each said as such."""
    said = [p for p in paragraphs if p]
    said += [f"{what}: {NOT_STATED}." for what in silent]
    return {"id": key, "title": title, "paragraphs": said, "silent": list(silent)}


def _answer(model: dict, block: str) -> str | None:
    return next((q["answer"] for q in model.get("questions", ()) if q["block"] == block), None)


def _guarantee(model: dict) -> dict:
    b = model["budget"]
    paras, silent = [], []
    premetric = _answer(model, "output premetric")
    if model.get("program") and model["program"].get("total"):
        paras.append(
            f"The composed guarantee of the program: {model['program']['total_text']} ({model['program']['method']})."
        )
    elif b.get("declared"):
        d = b["declared"]
        paras.append(f"The budget the mechanism achieves, in the spec's own flavor: {d['text']} ({d['paper_name']}).")
    else:
        paras.append(f"No budget could be stated in the spec's flavor: {b.get('problem') or 'no account'}.")
    if premetric:
        paras.append(f"How change is measured (the premetric): {premetric}.")
    if b.get("currencies"):
        conv = "; ".join(
            f"{c['budget']['text']} ({c['premetric']}, by {c['method']}: {c['method_words']})"
            for c in b["currencies"]
            if c.get("budget")
        )
        paras.append(f"The same budget in other currencies: {conv}.")
    if b.get("bounds"):
        paras.append(
            "The bounds the spec declares: "
            + "; ".join(f"{c['bound']} {'holds' if c['holds'] else 'DOES NOT HOLD'}" for c in b["bounds"])
            + "."
        )
    else:
        silent.append("A bound on the budget")
    return _section("guarantee", "The guarantee: definition and parameters", paras, silent)


def _unit(model: dict) -> dict:
    paras, silent = [], []
    who, unit = _answer(model, "domain"), _answer(model, "input premetric")
    if who:
        paras.append(f"Who is protected: {who}.")
    if unit:
        paras.append(
            f"The unit of privacy and the neighbouring relation: {unit}. Two datasets are neighbours "
            "when they differ by this one change; the budget bounds what any release can tell them apart by."
        )
    else:
        silent.append("The unit of privacy")
    rows = (model.get("plain_words") or {}).get("rows") or []
    for r in rows[1:]:
        paras.append(f"For {r['who']}, by group privacy: {r['budget']} ({r['source']}).")
    for coarse in (model.get("plain_words") or {}).get("unbounded", ()):
        paras.append(
            f"For one {coarse}: no bound on how many units it holds is declared, so no budget protects it as a whole."
        )
    return _section("unit", "Unit of privacy and neighbouring relation", paras, silent)


def _composition(model: dict) -> dict:
    paras, silent = [], []
    program = model.get("program")
    if program:
        for r in program.get("ledger", ()):
            paras.append(
                f"{r['title'] or r['spec']}: {r['own_budget_text']} on {r['own_unit'] or 'its unit'}, "
                f"{r['budget_text']} for the program's unit."
            )
        paras.append(f"Composed total: {program.get('total_text') or 'not computed'} ({program.get('method')}).")
        paras.append(
            "The ledger covers the program's members only; releases of the same people outside this "
            "program are not in it."
        )
    else:
        paras.append("This spec is one release; its budget covers this release alone.")
        silent.append("Other releases of the same people, and the total budget across them")
    if any(f["rule"] == "uncomposed-releases" for f in model.get("findings", ())):
        paras.append(
            "The audit found several releases of the same data without a stated total (finding uncomposed-releases)."
        )
    return _section("composition", "Composition across every release of the same people (the ledger)", paras, silent)


def _algorithms(model: dict) -> dict:
    paras, silent = [], []
    m = model.get("mechanism")
    if m:
        what = (m.get("description") or "no description").rstrip(". ")
        paras.append(
            f"Mechanism: {m['name']} {m.get('version') or ''} ({m.get('package')} {m.get('package_version')}): {what}."
        )
    native = model["budget"].get("native") or {}
    for note in native.get("notes", ()):
        paras.append(f"How the budget is derived (the mechanism plugin's account): {note.rstrip('.')}.")
    cites = sorted(
        {
            s["citation"]
            for s in model["budget"].get("steps", ()) + model["budget"].get("currencies", ())
            if s.get("citation")
        }
    )
    if cites:
        paras.append("Sources of the conversions used: " + "; ".join(cites) + ".")
    verified = [f for f in model.get("findings", ()) if f["rule"] == "empirical-verification"]
    if verified:
        paras += [f"Empirical verification (dpspec verify): {f['message']}" for f in verified]
    else:
        paras.append("Empirical verification (dpspec verify) was not attached to this report.")
    if m and m.get("proof"):
        paras.append(f"Where the guarantee is proved (the mechanism plugin's citation): {m['proof'].rstrip('.')}.")
    else:
        silent.append("A citation of the guarantee's proof (the mechanism plugin gives none)")
    if m and m.get("sampling"):
        paras.append(f"How the randomness is drawn: {m['sampling'].rstrip('.')}.")
    else:
        silent.append(
            "Whether the implementation samples its randomness exactly (integer samplers) rather than in floating point"
        )
    return _section("algorithms", "Algorithms and the evidence for them", paras, silent)


def _utility(model: dict) -> dict:
    paras = []
    titles = [s.get("title") for s in model.get("sections", ()) if s.get("title")]
    if titles:
        paras.append("The mechanism's own sections of this report state its expected error: " + "; ".join(titles) + ".")
    paras.append(
        "Post-processing (rounding, making counts nonnegative or consistent, swapping values) costs no "
        "privacy but can bias released figures, most for small counts."
    )
    return _section(
        "utility",
        "Utility and the bias post-processing adds",
        paras,
        ["The accuracy the release is meant to reach, and the bias its post-processing adds"],
    )


def _security(model: dict) -> dict:
    paras = []
    seed = (model.get("provenance") or {}).get("seed_policy")
    if seed is None:
        paras.append("No release was run for this report, so no random source was used.")
    elif seed.get("seeded"):
        paras.append(f"Random source: a known seed. {seed.get('warning', '')}")
    else:
        paras.append(f"Random source: {seed.get('source')}.")
    paras.append("Timing: dpspec does not make a release's run time independent of the confidential data.")
    return _section(
        "security",
        "Security and side channels",
        paras,
        ["Protection against floating-point and timing side channels, and who may run the release"],
    )


def _trust(model: dict) -> dict:
    paras = [
        "Central model: the curator who runs dpspec sees the confidential data in full, and the protection "
        "applies to what is released, not to the curator or to anyone with access to the data."
    ]
    return _section("trust", "Trust model", paras, ["Who the curator is and who else can see the confidential data"])


def _exposure(model: dict) -> dict:
    paras, silent = [], []
    invariants = model.get("invariants") or []
    if model.get("program") and model["program"].get("invariants"):
        invariants = [{"statistic": q["statistic"]} for q in model["program"]["invariants"]]
    if invariants:
        paras.append(
            "Published exactly, without noise, and so not protected (the invariants): "
            + "; ".join(i["statistic"] for i in invariants)
            + "."
        )
    else:
        paras.append("No statistic is published exactly (the spec declares no invariant).")
    public = model.get("public_information") or []
    if public:
        paras.append(
            "Public information the guarantee is conditioned on: "
            + "; ".join(f"{p['statistic']} (released in {p['source']})" for p in public)
            + "."
        )
    else:
        silent.append("Public information about the same people released elsewhere")
    stage = _answer(model, "domain")
    if stage:
        paras.append(
            "Whatever happened to the data before the domain's stage (collection, editing, imputation) "
            "is outside the guarantee."
        )
    critical = [f["rule"] for f in model.get("findings", ()) if f["severity"] == "critical"]
    if critical:
        paras.append("The audit's critical findings: " + ", ".join(critical) + ".")
    return _section("exposure", "Exposure outside the noise", paras, silent)


def nist_sections(model: dict) -> list[dict]:
    """The eight sections, in SP 800-226's order, from a built report model."""
    return [
        build(model) for build in (_guarantee, _unit, _composition, _algorithms, _utility, _security, _trust, _exposure)
    ]


def glossary() -> list[dict]:
    return [{"term": term, "meaning": meaning} for term, meaning in GLOSSARY]
